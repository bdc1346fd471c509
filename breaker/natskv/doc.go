// Package natskv is a [breaker.Store] on NATS JetStream Key-Value, so the
// breakers of a fleet of consumer replicas share one state and one probe
// budget (see [breaker.JoinFleet]).
//
// # Layout
//
// One KV bucket (default "floodgate_breakers") holds, per breaker name N
// ([breaker.FleetConfig.Name], else the breaker's [breaker.Config.Name]):
//
//	N.state     the breaker.SharedState as JSON; every write is a
//	            compare-and-swap on the key's revision (KV Update with the
//	            last revision, or Create for the first write), so a stale
//	            writer never wins
//	N.probe.i   probe slot i (0 <= i < ProbeConcurrency): created with a
//	            per-key TTL (JetStream message TTL, nats-server 2.11+) by the
//	            replica that takes it, deleted (revision-checked) when the
//	            probe reports; a replica that crashed leaves it to expire
//
// A name is one token, or two joined by a dot ([ValidateName]). A breaker
// per partner is named "<service token>.<partner token>", both from
// partner.Token (package partner's FleetName; the same tokens as the
// route's retry subject <retry>.<service token>.<partner token>), so its
// keys are S.P.state and S.P.probe.i: unique per (service, partner), since
// a partner token alone would make two services delivering to one partner
// share a breaker. A token never holds a dot, so the two layouts never
// share a key: a state key is the name and ".state" and a slot index is a
// number.
//
// Replicas learn of changes through one KV watch per bucket per process,
// on "*.state" and "*.*.state" (updates only), demultiplexed by key to the
// breakers that joined: one goroutine and one ordered consumer, whatever
// the number of breakers ([Store.Watch], [Store.Stats]). The bucket keeps
// one revision per key (History 1) and enables per-key TTLs
// (LimitMarkerTTL).
//
// # Production
//
// On a NATS cluster create the bucket with [Config.Replicas] = 3, so the
// shared state survives the loss of a node (the integration test in
// integration/fleet kills one node of three during an outage). The same
// applies to the retry-queue and dead-letter streams; see docs/fleet.md in
// the floodgate repository ("Running a fleet").
package natskv
