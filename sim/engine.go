package sim

import (
	"container/heap"
	"time"

	"github.com/floodgate-go/floodgate/breaker"
)

// epoch is the wall time the virtual clock starts at. Only differences
// matter; a fixed value keeps every run identical.
var epoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// engine is the discrete-event scheduler of one run. It is also the
// breaker's [breaker.TimerClock]: the breaker's timers (end of the open
// window, expired probes, ramp steps, adaptive intervals) are events in the
// same queue, so they fire exactly at their deadlines, in a deterministic
// order, in the simulation's only goroutine. Time is kept in nanoseconds
// since [epoch].
//
// An engine is not safe for concurrent use; one run owns it.
type engine struct {
	now    int64
	seq    uint64
	events eventHeap
}

// event is one scheduled action. Events at the same time run in the order
// they were scheduled.
type event struct {
	at        int64
	seq       uint64
	fn        func()
	cancelled bool
	fired     bool
}

type eventHeap []*event

func (h eventHeap) Len() int { return len(h) }
func (h eventHeap) Less(i, j int) bool {
	if h[i].at != h[j].at {
		return h[i].at < h[j].at
	}
	return h[i].seq < h[j].seq
}
func (h eventHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *eventHeap) Push(x any)   { *h = append(*h, x.(*event)) }
func (h *eventHeap) Pop() any {
	old := *h
	n := len(old)
	e := old[n-1]
	old[n-1] = nil
	*h = old[:n-1]
	return e
}

// at schedules fn at virtual time t (ns); a time in the past runs at now.
func (e *engine) at(t int64, fn func()) *event {
	e.seq++
	ev := &event{at: max(t, e.now), seq: e.seq, fn: fn}
	heap.Push(&e.events, ev)
	return ev
}

// run executes events in time order until none is left before end (ns).
// The clock finishes at end.
func (e *engine) run(end int64) {
	for len(e.events) > 0 {
		ev := e.events[0]
		if ev.at >= end {
			break
		}
		heap.Pop(&e.events)
		if ev.cancelled {
			continue
		}
		e.now = ev.at
		ev.fired = true
		ev.fn()
	}
	e.now = end
}

// time converts virtual nanoseconds to a clock reading.
func (e *engine) time(ns int64) time.Time { return epoch.Add(time.Duration(ns)) }

// Now implements [breaker.Clock].
func (e *engine) Now() time.Time { return e.time(e.now) }

// AfterFunc implements [breaker.TimerClock]: f runs as an event d from now.
func (e *engine) AfterFunc(d time.Duration, f func()) breaker.Timer {
	return timer{e.at(e.now+int64(max(0, d)), f)}
}

// timer is a scheduled breaker timer.
type timer struct{ ev *event }

// Stop cancels the timer; it reports whether it had not run yet.
func (t timer) Stop() bool {
	if t.ev.cancelled || t.ev.fired {
		return false
	}
	t.ev.cancelled = true
	return true
}
