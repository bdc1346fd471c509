// Package partner is the partner registry: a circuit breaker and an
// in-flight bulkhead per partner, created on first use, bounded in number
// and evicted when idle, with one injective encoding of partner keys into
// names that are safe in NATS subjects, consumer names, KV keys and metric
// labels.
//
// # Keys and tokens
//
// A partner key selects the partner a message goes to (an AS2-To value, a
// webhook endpoint). Keys come from messages, so they are untrusted: any
// byte string, including empty, ".", "*", ">", whitespace, invalid UTF-8
// and keys of many kilobytes. [Token] maps every key to a token of at most
// [MaxTokenLen] bytes from [-_=A-Za-z0-9], and distinct keys to distinct
// tokens: replacing bad bytes with '_' would send "a.b" and "a_b" to one
// subject, a misdelivery. Ordinary keys stay readable ("ACME-RETAIL");
// other bytes are escaped as "=XX"; keys too long for that are a readable
// prefix and a SHA-256 hash ([IsHashed]), whose raw key travels beside the
// token and is checked with [Verify] where the token is trusted again
// (at drain). [Decode] inverts the token of any key that is not hashed.
//
// # Registry
//
// A [Registry] holds one [Partner] per key. [Registry.Get] returns it,
// creating it on first use from [Config.Template], adjusted per partner by
// [Config.Override]; its breaker is named by its token. Each partner has
// its own breaker (open window, probe cap, recovery policy, listeners) and
// its own bulkhead of [PartnerConfig.MaxInFlight] calls in flight.
//
// A call goes through [Registry.Acquire]: the bulkhead first (the excess
// gets [ErrBulkheadFull] without asking the breaker), then the breaker. The
// [Lease] it returns reports the outcome to the breaker and frees the slot,
// once. A message turned away by [ErrPartnerLimit], [ErrBulkheadFull] or
// the breaker was not attempted: the caller diverts it to the retry queue,
// where it waits for its own partner without holding up the others.
//
// # Bounds and eviction
//
// The registry holds at most [Config.MaxPartners] partners. A partner unused
// for [Config.IdleAfter] is evicted unless it has calls in flight, its
// breaker is not closed, is forced or keeps a backoff ladder above its base
// (closed by ForceClose after a trip), or [Config.HasBacklog] says it has a
// backlog: nothing worth keeping is lost. [Config.OnEvict] hears of it (to
// delete its metric series), and its next use creates it afresh, closed. When the registry is full and
// nothing can be evicted, a new partner gets [ErrPartnerLimit].
//
// Eviction costs no goroutine, timer or clock read per partner, and the
// registry starts no goroutine at all: a use stores the registry's sweep
// epoch in the partner (at most once per sweep), and a sweep, run by the
// goroutine that creates a partner at most once per [Config.SweepInterval]
// or by [Registry.Sweep], visits every partner once. So an idle partner
// costs only its memory (see BENCHMARKS.md), and a partner is evicted
// between IdleAfter and IdleAfter + 2×SweepInterval after its last use, if
// sweeps run. An eviction races with no call: it is a compare-and-swap on
// the partner's in-flight word, which every admission advances.
//
// # Fleet
//
// With [Config.Fleet], each partner's breaker joins a fleet
// ([breaker.JoinFleet]) when the partner is created, under the name
// [FleetName](service, key) = "<service token>.<partner token>", and
// leaves it when the partner is evicted or the registry closed: the
// replicas of a service share each partner's state and its probe budget.
// A joined breaker costs no goroutine of its own (see
// [breaker.FleetConfig.Store]).
//
// # Concurrency and cost
//
// A Registry is safe for concurrent use. Looking up a partner that exists
// (Get, Acquire) reads a sync.Map without a lock, does not allocate and
// reads no clock; Acquire adds one atomic add for the bulkhead and the
// breaker's Allow. Creating a partner, evicting one and Len take one mutex
// per registry; the callbacks of [Config] are never called with it held.
package partner
