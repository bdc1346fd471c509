package retryqueue

import (
	"context"
	"sync"
	"time"
)

// prefetchBudgets is how many gate budgets a FIFO round may have fetched
// and not yet admitted, at most: the next batch is on hand while the
// current one runs, so the drain does not wait a fetch's round trip for
// every budget's worth of calls. Each fetched message still starts its
// call only when the gate has room for it (see admitCall). firstBudgets
// is the bound until a call returned, when the calls' latency is unknown;
// then fetchBound paces it.
const (
	prefetchBudgets = 16
	firstBudgets    = 4
)

// signal wakes every goroutine waiting on it at once. The zero value is
// ready to use; it is safe for concurrent use.
type signal struct {
	mu sync.Mutex
	ch chan struct{}
}

// wait returns a channel closed by the next broadcast. Take it before
// looking at what it signals, so a change after the look is not missed.
func (s *signal) wait() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch == nil {
		s.ch = make(chan struct{})
	}
	return s.ch
}

// broadcast wakes the goroutines waiting now.
func (s *signal) broadcast() {
	s.mu.Lock()
	if s.ch != nil {
		close(s.ch)
		s.ch = nil
	}
	s.mu.Unlock()
}

// admitWait is how long a fetched message may wait for the gate to have
// room for its call before it is handed back: half of what AckWait leaves
// after HandlerTimeout, so the wait and the call together end before
// AckWait, and JetStream never redelivers a message still held here.
func (d *Drainer) admitWait() time.Duration {
	return (d.cfg.AckWait - d.cfg.HandlerTimeout) / 2
}

// admitCall waits until the gate has room for one more call of the
// drainer's (a FIFO message dispatched to the worker pool) and counts it
// in d.unadmitted, or reports false when the message is to be handed back:
// the breaker turned a drained message away since the last round, the
// gate admits nothing while none of the drainer's calls is running (the
// breaker open, or live traffic holding the partner's bulkhead), ctx
// ended, or the wait reached admitWait.
//
// The drainer's calls the gate does not count yet (d.unadmitted) are read
// before the budget, so a call admitted in between is counted twice (a
// longer wait), never missed: the budget is never exceeded by the
// drainer's own calls.
func (d *Drainer) admitCall(ctx context.Context) bool {
	defer d.waiting.Add(-1)
	select {
	case d.admitTurn <- struct{}{}: // nobody waits: look once, no timer
		admitted, done := d.look()
		<-d.admitTurn
		if admitted || done {
			return admitted
		}
	default:
	}
	wait := d.admitWait()
	deadline := time.Now().Add(wait)
	timer := time.NewTimer(wait)
	defer timer.Stop()
	// One waiter at a time looks at the gate (the others queue for the
	// turn, in order), so a returning call wakes one goroutine, not every
	// message waiting.
	select {
	case d.admitTurn <- struct{}{}:
		defer func() { <-d.admitTurn }()
	case <-timer.C:
		return false
	case <-ctx.Done():
		return false
	}
	for {
		woken := d.admitted.wait()
		if admitted, done := d.look(); admitted || done {
			return admitted
		}
		left := time.Until(deadline)
		if left <= 0 || ctx.Err() != nil {
			return false
		}
		// A returning call broadcasts; a live call's return or a budget
		// the breaker raised is seen within a poll interval.
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(min(left, d.cfg.PollInterval))
		select {
		case <-woken:
		case <-timer.C:
		case <-ctx.Done():
		}
	}
}

// look is one look of admitCall's at the gate: admitted (counted in
// d.unadmitted), or done when the message is to go back (the breaker
// turned a drained message away since the last round, or the gate admits
// nothing while none of the drainer's calls runs), or neither (wait).
func (d *Drainer) look() (admitted, done bool) {
	for {
		if d.turned.Load() {
			return false, true // what was fetched with it goes back too
		}
		u := d.unadmitted.Load()
		budget := d.cfg.Gate.Budget()
		if int64(budget)-int64(u) > 0 {
			if d.unadmitted.CompareAndSwap(u, u+1) {
				return true, false
			}
			continue
		}
		// No call of ours will return to free it: the breaker is open, or
		// live traffic holds the bulkhead.
		return false, budget <= 0 && d.calling.Load()-d.waiting.Load() <= 0
	}
}

// handBack returns a dispatched message that admitCall did not admit to
// the backlog (nakked with PollInterval's delay, no attempt counted), and
// makes the round wait a poll interval, as for a message the breaker
// turned away.
func (d *Drainer) handBack(it item) {
	d.turned.Store(true)
	d.calling.Add(-1)
	d.deferMsg(it, d.cfg.PollInterval)
}
