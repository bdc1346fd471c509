package middleware

import (
	"math"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/partner"
	"github.com/floodgate-go/floodgate/retryqueue"
)

// DrainGate returns the [retryqueue.Gate] that lets a drainer take from the
// backlog only what b admits now: nothing while open, the free probe slots
// while half-open (so, when no live traffic arrives, probes come from the
// backlog and recovery never waits for new messages), and while closed as
// much as the drainer's own rate limit allows. It is safe for concurrent
// use; each call reads [breaker.Breaker.State], which takes no lock while
// closed (otherwise it takes the breaker's lock, and the call then takes
// a [breaker.Breaker.Snapshot] too). The gate is a
// [retryqueue.ClosedGate], closed while b is. It panics if b is nil, a
// programming error better caught at start-up than as a drain that never
// runs.
func DrainGate(b *breaker.Breaker) retryqueue.Gate {
	if b == nil {
		panic("middleware: DrainGate: nil breaker")
	}
	return breakerGate{b: b, probes: b.Config().ProbeConcurrency}
}

// breakerGate is [DrainGate]'s gate, a [retryqueue.ClosedGate].
type breakerGate struct {
	b      *breaker.Breaker
	probes int
}

func (g breakerGate) Budget() int {
	if g.b.State() == breaker.StateClosed { // lock-free while closed
		return math.MaxInt
	}
	switch s := g.b.Snapshot(); s.State {
	case breaker.StateClosed:
		return math.MaxInt
	case breaker.StateHalfOpen:
		return max(0, g.probes-s.ProbesInFlight)
	}
	return 0
}

func (g breakerGate) Closed() bool { return g.b.State() == breaker.StateClosed }

// UnknownPartnerBudget is the drain budget [PartnerDrainGate] gives a
// partner its registry does not hold (never seen, or evicted: an evicted
// partner was closed, with no call in flight): one message, which creates
// the partner when the middleware admits it. From then on the gate follows
// the partner's breaker. It is what a fresh closed breaker admits, bounded
// to one so the gate itself creates nothing and a registry at its
// MaxPartners cap is not asked for more than one partner-limit diversion.
const UnknownPartnerBudget = 1

// PartnerDrainGate returns, for a per-partner drainer, the [retryqueue.Gate]
// of each partner of reg: the gate of partner key k lets the drainer take
// from k's backlog only what k's breaker and bulkhead admit now: nothing
// while open; while half-open the free probe slots; while closed the free
// slots of its bulkhead ([partner.PartnerConfig.MaxInFlight] minus the
// calls in flight, live ones included), so drained messages are not
// turned away as "bulkhead"; and [UnknownPartnerBudget] while reg does not
// hold k. Each Budget call looks k up ([partner.Registry.Lookup], which
// does not count as a use, so a gate never keeps a partner from idle
// eviction) and reads the breaker's state ([breaker.Breaker.State], which
// takes no lock while closed; otherwise it takes the breaker's lock, and
// the call then takes a [breaker.Breaker.Snapshot] and, half-open, a
// [breaker.Breaker.Config] too); a gate allocates once, when made. Each
// gate is a [retryqueue.ClosedGate], closed while the partner's breaker
// is (or reg does not hold it), so a [retryqueue.PartnerDrainer] may drain
// many closed partners through its service consumer. Gates are safe for
// concurrent use. It panics if reg is nil, a programming
// error better caught at start-up.
//
// The drainer's messages must go through a middleware with Partners set
// to the same reg, which guards each with its route's partner
// ([retryqueue.DrainedPartner]).
func PartnerDrainGate(reg *partner.Registry) func(partnerKey string) retryqueue.Gate {
	if reg == nil {
		panic("middleware: PartnerDrainGate: nil registry")
	}
	return func(key string) retryqueue.Gate { return &partnerGate{reg: reg, key: key} }
}

// partnerGate is [PartnerDrainGate]'s gate of one partner, a
// [retryqueue.ClosedGate].
type partnerGate struct {
	reg *partner.Registry
	key string
}

func (g *partnerGate) Budget() int {
	p, ok := g.reg.Lookup(g.key)
	if !ok {
		return UnknownPartnerBudget
	}
	free := max(0, p.MaxInFlight()-p.InFlight())
	b := p.Breaker()
	if b.State() == breaker.StateClosed { // lock-free while closed
		return free
	}
	// Rare: the snapshot and the configuration copy are affordable.
	switch s := b.Snapshot(); s.State {
	case breaker.StateClosed:
		return free
	case breaker.StateHalfOpen:
		return min(free, max(0, b.Config().ProbeConcurrency-s.ProbesInFlight))
	}
	return 0
}

// Closed reports whether the partner's breaker is closed; a partner the
// registry does not hold would get a fresh, closed one (or was closed
// when evicted).
func (g *partnerGate) Closed() bool {
	p, ok := g.reg.Lookup(g.key)
	return !ok || p.Breaker().State() == breaker.StateClosed
}
