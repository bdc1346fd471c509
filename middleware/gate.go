package middleware

import (
	"math"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/retryqueue"
)

// DrainGate returns the [retryqueue.Gate] that lets a drainer take from the
// backlog only what b admits now: nothing while open, the free probe slots
// while half-open (so, when no live traffic arrives, probes come from the
// backlog and recovery never waits for new messages), and while closed as
// much as the drainer's own rate limit allows. It is safe for concurrent
// use; each call takes one [breaker.Breaker.Snapshot]. It panics if b is
// nil, a programming error better caught at start-up than as a drain that
// never runs.
func DrainGate(b *breaker.Breaker) retryqueue.Gate {
	if b == nil {
		panic("middleware: DrainGate: nil breaker")
	}
	probes := b.Config().ProbeConcurrency
	return retryqueue.GateFunc(func() int {
		s := b.Snapshot()
		switch s.State {
		case breaker.StateClosed:
			return math.MaxInt
		case breaker.StateHalfOpen:
			return max(0, probes-s.ProbesInFlight)
		}
		return 0
	})
}
