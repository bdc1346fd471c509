// Package breakertest provides a fake clock for testing code that uses
// package breaker without sleeping.
package breakertest

import (
	"sort"
	"sync"
	"time"

	"github.com/floodgate-go/floodgate/breaker"
)

// Clock is a fake [breaker.TimerClock]. Time moves only when Advance or Set
// is called; timers due by then fire in the goroutine that moved the clock,
// in deadline order (then creation order), each seeing Now() equal to its
// deadline. It is safe for concurrent use; timer callbacks run without the
// clock's lock held, so they may use the clock.
type Clock struct {
	mu     sync.Mutex
	now    time.Time
	seq    uint64
	timers []*timer
}

// NewClock returns a clock reading start. A zero start means 2025-01-01 UTC.
func NewClock(start time.Time) *Clock {
	if start.IsZero() {
		start = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	}
	return &Clock{now: start}
}

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d (d < 0 is treated as 0), firing the
// timers that fall due on the way.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	target := c.now.Add(max(0, d))
	c.mu.Unlock()
	c.Set(target)
}

// Set moves the clock to t, firing the timers due by then. Moving it
// backwards sets the time and fires nothing.
func (c *Clock) Set(t time.Time) {
	for {
		c.mu.Lock()
		if len(c.timers) == 0 || c.timers[0].when.After(t) {
			c.now = t
			c.mu.Unlock()
			return
		}
		tm := c.timers[0]
		c.timers = c.timers[1:]
		if tm.when.After(c.now) {
			c.now = tm.when
		}
		tm.fired = true
		c.mu.Unlock()
		tm.f()
	}
}

// AfterFunc schedules f to run once the clock has advanced by d.
func (c *Clock) AfterFunc(d time.Duration, f func()) breaker.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	tm := &timer{c: c, when: c.now.Add(max(0, d)), seq: c.seq, f: f}
	c.timers = append(c.timers, tm)
	sort.SliceStable(c.timers, func(i, j int) bool {
		if !c.timers[i].when.Equal(c.timers[j].when) {
			return c.timers[i].when.Before(c.timers[j].when)
		}
		return c.timers[i].seq < c.timers[j].seq
	})
	return tm
}

// Pending returns the number of timers not yet fired or stopped.
func (c *Clock) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

// Next returns the deadline of the earliest pending timer, if any.
func (c *Clock) Next() (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.timers) == 0 {
		return time.Time{}, false
	}
	return c.timers[0].when, true
}

type timer struct {
	c     *Clock
	when  time.Time
	seq   uint64
	f     func()
	fired bool
}

// Stop cancels the timer; it reports whether the timer was still pending.
func (t *timer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	for i, x := range t.c.timers {
		if x == t {
			t.c.timers = append(t.c.timers[:i], t.c.timers[i+1:]...)
			return true
		}
	}
	return false
}

// NowOnly wraps a clock so that it has no timers: a breaker using it
// evaluates time lazily, on calls.
type NowOnly struct{ C breaker.Clock }

// Now returns the wrapped clock's time.
func (n NowOnly) Now() time.Time { return n.C.Now() }
