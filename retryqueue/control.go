package retryqueue

import "time"

// change is what one step of the drain rate control did.
type change int

const (
	unchanged change = iota
	increased
	decreased
)

// usedShare is the share of its rate the drainer must have used in an
// interval for a clean interval to raise the rate: below it, the backlog or
// the gate was the limit, not the rate.
const usedShare = 0.8

// aimd is the drain rate control: additive increase, multiplicative
// decrease, with a slow start (the rate grows by half per clean interval,
// or doubles on an early look) until the first decrease. It is a pure state machine: step takes the
// interval's counts and length; it never reads a clock.
type aimd struct {
	rate, min, max float64 // messages/s; max 0 = unbounded
	inc, dec       float64 // additive step (messages/s), decrease factor
	autoInc        bool    // inc follows the rate: 5 % of it after each decrease
	slowStart      bool
	// clean is the rate before slow start's last increase, the last one
	// known to be clean (0 before any): a failure in slow start backs off
	// to at most it, as TCP falls back to half its window on a loss.
	clean float64
}

// autoIncShare is the additive step, as a share of the rate after the last
// decrease, when [DrainerConfig.Increase] is not set.
const autoIncShare = 0.05

// resume restarts slow start, from at least start: after a pause (the
// breaker left closed) the partner's capacity is unknown again, and the
// failures that led to the pause (an outage) say nothing about it.
func (a *aimd) resume(start float64) {
	a.slowStart, a.clean = true, 0
	a.rate = a.clamp(max(a.rate, start))
}

// goodputShare is the share of the measured goodput the rate backs off to
// on a failure.
const goodputShare = 0.9

// step applies one interval: ok and bad deliveries seen, served messages
// drained, good of them delivered (not failed), over elapsed; early marks
// a slow-start look made before AdjustInterval (see [Drainer]), on which a
// clean interval doubles the rate instead of raising it by half.
func (a *aimd) step(ok, bad int, served, good float64, elapsed time.Duration, early bool) change {
	switch {
	case bad > 0:
		before := a.rate
		target := a.rate * a.dec
		if elapsed > 0 {
			target = max(target, min(a.rate, goodputShare*good/elapsed.Seconds()))
		}
		if a.slowStart && a.clean > 0 {
			target = min(target, a.clean)
		}
		a.slowStart, a.clean = false, 0
		a.rate = a.clamp(target)
		if a.rate <= a.min {
			// Backed off to the floor: the estimate of the capacity is
			// gone, so growth restarts with slow start once clean.
			a.slowStart = true
		}
		if a.autoInc {
			a.inc = max(1, autoIncShare*a.rate)
		}
		if a.rate < before {
			return decreased
		}
		return unchanged
	case ok == 0 || elapsed <= 0 || served < usedShare*a.rate*elapsed.Seconds():
		return unchanged
	}
	before := a.rate
	if a.slowStart {
		a.clean = before
	}
	switch {
	case a.slowStart && early:
		a.rate = a.clamp(a.rate * 2)
	case a.slowStart:
		a.rate = a.clamp(a.rate * 1.5)
	default:
		a.rate = a.clamp(a.rate + a.inc)
	}
	if a.rate > before {
		return increased
	}
	return unchanged
}

func (a *aimd) clamp(r float64) float64 {
	if a.max > 0 && r > a.max {
		r = a.max
	}
	return max(r, a.min)
}
