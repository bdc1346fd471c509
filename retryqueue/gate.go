package retryqueue

import (
	"context"

	"github.com/ThreeDotsLabs/watermill/message"
)

// Gate tells the drainer how many messages the breaker would admit right
// now. The drainer never has more calls of its own running than that, and
// fetches nothing while it is 0. In FIFO mode it fetches budgets ahead,
// four at first, then from one to sixteen: as many as the gate starts
// within half of the time a message may wait for room, at its calls'
// latency (never more than its MaxInFlight), each message waiting for room
// before its call; one that gets none in time, or while the gate is 0 and
// none of the drainer's calls runs, goes back to the backlog (nakked, no
// attempt), so nothing sits fetched while the breaker is open. With
// per-key ordering it fetches at most the budget.
//
// A breaker adapter is a few lines:
//
//	retryqueue.GateFunc(func() int {
//		s := b.Snapshot()
//		switch s.State {
//		case breaker.StateClosed:
//			return math.MaxInt // the drainer's rate limit bounds it
//		case breaker.StateHalfOpen:
//			return max(0, s.Config.ProbeConcurrency-s.ProbesInFlight)
//		default: // open
//			return 0
//		}
//	})
//
// and a breaker listener calling [Drainer.Wake] makes the drain resume
// without waiting for the next poll. A gate that counts the calls it
// admitted (a bulkhead) needs the guard to call [Admitted] for each
// drained message it admits; see there.
type Gate interface {
	// Budget returns how many more messages would be admitted now: 0 while
	// the breaker is open, the free probe slots while half-open, a large
	// number while closed. It must be safe for concurrent use and fast; it
	// is called before every fetch.
	Budget() int
}

// GateFunc adapts a function to [Gate].
type GateFunc func() int

// Budget calls f.
func (f GateFunc) Budget() int { return f() }

// Admitted tells the drainer that handed msg over with ctx that msg now
// holds its admission: from now on the drainer's [Gate] counts the call
// (a partner's bulkhead slot, a probe slot), so the drainer stops taking
// it off the gate's budget itself. A guarding middleware calls it once it
// admitted a drained message (floodgate's does in per-partner mode, where
// the gate counts the partner's bulkhead); without it the drainer takes each of its
// calls off the budget until the call returns, and a slow partner's drain
// reaches only about half its bulkhead (each call counted by both).
//
// It does nothing unless msg is the message the drainer handed over with
// ctx, and after the first call for it. It never blocks and is safe for
// concurrent use.
func Admitted(ctx context.Context, msg *message.Message) {
	if s := slotFor(ctx, msg); s != nil {
		s.admit()
	}
}

// ClosedGate is a [Gate] that also reports whether its breaker is closed:
// admitting every call, with no half-open probe or ramp going on. A
// [PartnerDrainer] whose gates are ClosedGates drains through one consumer
// for the whole service while enough partners have a backlog and every
// one of them is closed (see [PartnerDrainerConfig.ServiceConsumerFrom]);
// with other gates it never does. Closed must be safe for concurrent use
// and fast.
type ClosedGate interface {
	Gate
	Closed() bool
}

// gateClosed reports whether g is a [ClosedGate] reporting closed.
func gateClosed(g Gate) bool {
	c, ok := g.(ClosedGate)
	return ok && c.Closed()
}
