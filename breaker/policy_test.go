package breaker_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/breaker/breakertest"
)

func TestTimeBasedWindow(t *testing.T) {
	b, clk := newTest(t, func(c *breaker.Config) {
		c.WindowDuration = 10 * time.Second
		c.WindowBuckets = 10
		c.MinimumCalls = 8
	})
	// 3 failures at t=0..2s, then successes: not enough calls yet
	for range 3 {
		call(t, b, clk, errBoom, time.Millisecond)
		clk.Advance(time.Second)
	}
	mustState(t, b, clk, breaker.StateClosed)
	for range 4 {
		call(t, b, clk, nil, time.Millisecond)
	}
	s := b.SnapshotAt(clk.Now())
	if s.Calls != 7 || s.Failures != 3 {
		t.Fatalf("window %+v", s)
	}
	// the failures age out of the 10s window bucket by bucket
	clk.Advance(8 * time.Second) // t=11s: the buckets of t=0s and t=1s are gone
	if s := b.SnapshotAt(clk.Now()); s.Calls != 5 || s.Failures != 1 {
		t.Fatalf("after 11s %+v", s)
	}
	clk.Advance(10 * time.Second)
	if s := b.SnapshotAt(clk.Now()); s.Calls != 0 || s.Failures != 0 {
		t.Fatalf("after 21s %+v", s)
	}
	// failures within the window trip once MinimumCalls is met
	for i := range 7 {
		call(t, b, clk, map[bool]error{true: errBoom}[i%2 == 0], time.Millisecond)
	}
	mustState(t, b, clk, breaker.StateClosed)
	call(t, b, clk, nil, time.Millisecond) // 4/8 = 0.5 on a success reaching MinimumCalls
	mustState(t, b, clk, breaker.StateOpen)
}

func TestTimeWindowSuccessFastPathRotates(t *testing.T) {
	b, clk := newTest(t, func(c *breaker.Config) {
		c.WindowDuration = time.Second
		c.WindowBuckets = 2
		c.MinimumCalls = 2
	})
	for i := range 50 {
		call(t, b, clk, nil, time.Millisecond)
		clk.Advance(100 * time.Millisecond)
		s := b.SnapshotAt(clk.Now())
		if s.Calls > 11 || (i >= 10 && s.Calls < 5) {
			t.Fatalf("call %d: window holds %d calls", i, s.Calls)
		}
	}
}

func TestSingleProbePolicy(t *testing.T) {
	b, clk := newTest(t, func(c *breaker.Config) {
		c.HalfOpenPolicy = breaker.HalfOpenSingleProbe
		c.ProbeConcurrency = 5 // ignored
		c.SuccessesToClose = 5 // ignored
	})
	trip(t, b, clk)
	clk.Advance(time.Second)
	p, err := b.AllowAt(clk.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.AllowAt(clk.Now()); !errors.Is(err, breaker.ErrProbeLimit) {
		t.Fatalf("second probe: %v", err)
	}
	p.DoneAt(clk.Now(), nil)
	mustState(t, b, clk, breaker.StateClosed)
}

// TestIdleHalfOpenStaysHalfOpen: absence of calls is not evidence (issue
// 12). A half-open breaker that sees no call for 10 minutes stays half-open
// with its trip count unchanged, and the next call is admitted as a probe;
// before, it reopened at the half-open bound and climbed the ladder.
func TestIdleHalfOpenStaysHalfOpen(t *testing.T) {
	for _, policy := range []breaker.HalfOpenPolicy{breaker.HalfOpenCappedProbes, breaker.HalfOpenSingleProbe,
		breaker.HalfOpenRamp, breaker.HalfOpenAdaptive} {
		for _, timers := range []bool{true, false} {
			t.Run(fmt.Sprintf("%v/timers=%v", policy, timers), func(t *testing.T) {
				clk := breakertest.NewClock(time.Time{})
				var c breaker.Clock = clk
				if !timers {
					c = breakertest.NowOnly{C: clk}
				}
				b, err := breaker.New(breaker.Config{Clock: c, Seed: 1, DisableJitter: true, WindowSize: 4, MinimumCalls: 4,
					SlowCallDuration: 100 * time.Millisecond, MaxProbeWait: 5 * time.Second, HalfOpenPolicy: policy})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(b.Stop)
				rec := &recorder{}
				b.AddListener(rec.add)
				trip(t, b, clk)
				clk.Advance(time.Second)
				mustState(t, b, clk, breaker.StateHalfOpen)
				for range 600 { // 10 idle minutes, looking every second
					clk.Advance(time.Second)
					if timers {
						continue // the breaker's own timers see the time pass
					}
					mustState(t, b, clk, breaker.StateHalfOpen)
				}
				s := b.SnapshotAt(clk.Now())
				if s.State != breaker.StateHalfOpen || s.ConsecutiveTrips != 1 || s.Trips != 1 {
					t.Fatalf("after 10 idle minutes: %+v, want half-open with 1 trip", s)
				}
				if got := rec.path(); !slices.Equal(got, []string{"open", "half-open"}) {
					t.Fatalf("transitions %v, want [open half-open]", got)
				}
				p, err := b.AllowAt(clk.Now())
				if err != nil || !p.IsProbe() {
					t.Fatalf("next call: probe %v, err %v; want a probe", p.IsProbe(), err)
				}
				// Only evidence moves it: the probe, never reported, expires
				// after MaxProbeWait and counts as a failure.
				clk.Advance(5 * time.Second)
				mustState(t, b, clk, breaker.StateOpen)
				if s := b.SnapshotAt(clk.Now()); s.ConsecutiveTrips != 2 || s.OpenWindow != 2*time.Second {
					t.Fatalf("after the expired probe: %+v, want trip 2 with a 2s window", s)
				}
			})
		}
	}
}

// TestIdleAdaptiveShareHolds: after the probes passed, an adaptive recovery
// that sees no call holds its share; it neither reopens nor climbs the
// ladder.
func TestIdleAdaptiveShareHolds(t *testing.T) {
	b, clk := newTest(t, func(c *breaker.Config) {
		c.HalfOpenPolicy = breaker.HalfOpenAdaptive
		c.SuccessesToClose = 1
	})
	trip(t, b, clk)
	clk.Advance(time.Second)
	call(t, b, clk, nil, time.Millisecond) // the probe passes: adaptive share
	s := b.SnapshotAt(clk.Now())
	if s.State != breaker.StateHalfOpen || s.AdmittedShare == 0 {
		t.Fatalf("after the probe: %+v, want an adaptive share", s)
	}
	share := s.AdmittedShare
	clk.Advance(10 * time.Minute)
	s = b.SnapshotAt(clk.Now())
	if s.State != breaker.StateHalfOpen || s.ConsecutiveTrips != 1 || s.AdmittedShare != share {
		t.Fatalf("after 10 idle minutes: %+v, want half-open at share %v with 1 trip", s, share)
	}
}

func TestHealthCheck(t *testing.T) {
	var healthy atomic.Bool
	var checks atomic.Int32
	b, clk := newTest(t, func(c *breaker.Config) {
		c.BaseOpenWindow = 10 * time.Second
		c.HealthCheckInterval = 2 * time.Second
		c.HealthCheck = func(ctx context.Context) error {
			checks.Add(1)
			if _, ok := ctx.Deadline(); !ok {
				return errors.New("no deadline")
			}
			if healthy.Load() {
				return nil
			}
			return errBoom
		}
	})
	rec := &recorder{}
	b.AddListener(rec.add)
	trip(t, b, clk)
	clk.Advance(2 * time.Second) // first check fails: hold
	if checks.Load() != 1 {
		t.Fatalf("checks %d", checks.Load())
	}
	clk.Advance(8 * time.Second) // window ends at 10s, but the last check failed
	mustState(t, b, clk, breaker.StateOpen)
	if _, err := b.AllowAt(clk.Now()); !errors.Is(err, breaker.ErrOpen) {
		t.Fatalf("held open breaker admitted: %v", err)
	}
	healthy.Store(true)
	clk.Advance(2 * time.Second) // a passing check ends the open state
	mustState(t, b, clk, breaker.StateHalfOpen)
	if r := rec.ts[len(rec.ts)-1]; r.Reason != "health check passed" {
		t.Fatalf("transition %+v", r)
	}
	n := checks.Load()
	clk.Advance(4 * time.Second)
	if checks.Load() != n {
		t.Fatal("health check polled outside the open state")
	}
	// real traffic still confirms recovery through the probes
	for range 3 {
		call(t, b, clk, nil, time.Millisecond)
	}
	mustState(t, b, clk, breaker.StateClosed)

	// a passing check ends the window early
	trip(t, b, clk)
	start := clk.Now()
	clk.Advance(2 * time.Second)
	mustState(t, b, clk, breaker.StateHalfOpen)
	if d := clk.Now().Sub(start); d != 2*time.Second {
		t.Fatalf("left open after %v", d)
	}
}

func TestNoTimersWithoutTimerClock(t *testing.T) {
	clk := breakertest.NewClock(time.Time{})
	b, err := breaker.New(breaker.Config{Clock: breakertest.NowOnly{C: clk}, WindowSize: 2, MinimumCalls: 2,
		HealthCheck: func(context.Context) error { t.Error("health check ran without timers"); return nil }})
	if err != nil {
		t.Fatal(err)
	}
	trip(t, b, clk)
	clk.Advance(time.Minute)
	if clk.Pending() != 0 {
		t.Fatal("timers scheduled")
	}
	mustState(t, b, clk, breaker.StateHalfOpen)
}

func TestStopStopsTimers(t *testing.T) {
	b, clk := newTest(t, nil)
	trip(t, b, clk)
	if clk.Pending() == 0 {
		t.Fatal("no timer while open")
	}
	b.Stop()
	if clk.Pending() != 0 {
		t.Fatalf("%d timers after Stop", clk.Pending())
	}
	clk.Advance(time.Second)
	mustState(t, b, clk, breaker.StateHalfOpen) // still works lazily
}

// TestCancelledProbeFreesSlotCountsNothing (issue 12): a probe cut short by
// shutdown is cancelled: its slot is free at once, nothing is counted
// either way, the trip count is unchanged and the breaker stays half-open.
func TestCancelledProbeFreesSlotCountsNothing(t *testing.T) {
	b, clk := newTest(t, func(c *breaker.Config) { c.ProbeConcurrency = 1; c.SuccessesToClose = 2 })
	trip(t, b, clk)
	clk.Advance(time.Second)
	call(t, b, clk, nil, time.Millisecond) // one good probe of two
	p, err := b.AllowAt(clk.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.AllowAt(clk.Now()); !errors.Is(err, breaker.ErrProbeLimit) {
		t.Fatalf("second probe while one is in flight: %v", err)
	}
	before := b.SnapshotAt(clk.Now())
	p.Cancel()
	after := b.SnapshotAt(clk.Now())
	if after.State != breaker.StateHalfOpen || after.Generation != before.Generation ||
		after.ConsecutiveTrips != 1 || after.ConsecutiveSuccesses != 1 || after.ProbesInFlight != 0 || after.Stale != before.Stale {
		t.Fatalf("after Cancel: %+v (before %+v)", after, before)
	}
	clk.Advance(10 * time.Second) // past MaxProbeWait: nothing left to expire
	mustState(t, b, clk, breaker.StateHalfOpen)
	call(t, b, clk, nil, time.Millisecond) // the freed slot; the second good probe closes
	mustState(t, b, clk, breaker.StateClosed)
}
