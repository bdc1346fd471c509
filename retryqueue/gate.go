package retryqueue

// Gate tells the drainer how many messages the breaker would admit right
// now. The drainer never fetches more than that from the retry stream, so
// nothing sits prefetched while the breaker is open.
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
// without waiting for the next poll.
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
