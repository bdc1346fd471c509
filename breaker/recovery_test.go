package breaker_test

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/breaker/breakertest"
)

// toHalfOpenStage trips the breaker, waits out the window and passes the
// probes, leaving a ramp or adaptive breaker in its share stage.
func passProbes(t *testing.T, b *breaker.Breaker, clk *breakertest.Clock) {
	t.Helper()
	trip(t, b, clk)
	clk.Advance(b.SnapshotAt(clk.Now()).OpenWindow)
	for range b.Config().SuccessesToClose {
		call(t, b, clk, nil, time.Millisecond)
	}
	if s := b.SnapshotAt(clk.Now()); s.State != breaker.StateHalfOpen || s.AdmittedShare == 0 {
		t.Fatalf("after the probes: %+v", s)
	}
}

// offer offers n calls now, reporting the i-th admitted one (from 0) as a
// failure if fail(i); it returns how many were admitted.
func offer(t *testing.T, b *breaker.Breaker, clk *breakertest.Clock, n int, fail func(i int) bool) int {
	t.Helper()
	admitted := 0
	for range n {
		p, err := b.AllowAt(clk.Now())
		if err != nil {
			if !errors.Is(err, breaker.ErrThrottled) && !errors.Is(err, breaker.ErrProbeLimit) && !errors.Is(err, breaker.ErrOpen) {
				t.Fatalf("unexpected rejection %v", err)
			}
			continue
		}
		var e error
		if fail != nil && fail(admitted) {
			e = errBoom
		}
		admitted++
		p.DoneAt(clk.Now(), e)
	}
	return admitted
}

func TestRampSteps(t *testing.T) {
	b, clk := newTest(t, func(c *breaker.Config) {
		c.HalfOpenPolicy = breaker.HalfOpenRamp
		c.RampStepDuration = 2 * time.Second
	})
	rec := &recorder{}
	b.AddListener(rec.add)
	passProbes(t, b, clk)
	for _, share := range []float64{0.10, 0.25, 0.50, 1.00} {
		s := b.SnapshotAt(clk.Now())
		if s.State != breaker.StateHalfOpen || s.AdmittedShare != share {
			t.Fatalf("want share %v: %+v", share, s)
		}
		got := offer(t, b, clk, 200, nil)
		if want := int(math.Round(200 * share)); got != want {
			t.Fatalf("share %v admitted %d of 200, want %d", share, got, want)
		}
		if _, err := b.AllowAt(clk.Now()); share < 1 && !errors.Is(err, breaker.ErrThrottled) {
			// the next call after an admitted one is throttled at shares < 1
			_ = err
		}
		clk.Advance(2 * time.Second)
	}
	mustState(t, b, clk, breaker.StateClosed)
	if last := rec.ts[len(rec.ts)-1]; last.Reason != "ramp completed" {
		t.Fatalf("close reason %q", last.Reason)
	}
	if s := b.SnapshotAt(clk.Now()); s.ConsecutiveTrips != 0 {
		t.Fatalf("ramp close is clean: %+v", s)
	}
}

func TestRampThrottledError(t *testing.T) {
	b, clk := newTest(t, func(c *breaker.Config) { c.HalfOpenPolicy = breaker.HalfOpenRamp })
	passProbes(t, b, clk)
	var rejected error
	for range 10 {
		if _, err := b.AllowAt(clk.Now()); err != nil {
			rejected = err
		}
	}
	var rej *breaker.RejectedError
	if !errors.Is(rejected, breaker.ErrThrottled) || !errors.Is(rejected, breaker.ErrProbeLimit) ||
		errors.Is(rejected, breaker.ErrOpen) || !errors.As(rejected, &rej) || rej.State != breaker.StateHalfOpen {
		t.Fatalf("throttled rejection %v", rejected)
	}
}

func TestRampFailingStepReopens(t *testing.T) {
	tests := []struct {
		name string
		fail func(i int) bool
		at   int // step index where it must reopen
	}{
		{"all failing at first step", func(int) bool { return true }, 0},
		{"failing at 50% step", nil, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, clk := newTest(t, func(c *breaker.Config) {
				c.HalfOpenPolicy = breaker.HalfOpenRamp
				c.RampMinCalls = 5
			})
			passProbes(t, b, clk)
			trips := b.SnapshotAt(clk.Now()).ConsecutiveTrips
			for step := 0; step < 4; step++ {
				fail := tt.fail
				if fail == nil && step == tt.at {
					fail = func(i int) bool { return i%2 == 0 }
				}
				offer(t, b, clk, 100, fail)
				if step == tt.at {
					s := b.SnapshotAt(clk.Now())
					if s.State != breaker.StateOpen || s.ConsecutiveTrips != trips+1 {
						t.Fatalf("step %d did not reopen: %+v", step, s)
					}
					return
				}
				clk.Advance(2 * time.Second)
				mustState(t, b, clk, breaker.StateHalfOpen)
			}
			t.Fatal("never reopened")
		})
	}
}

func TestRampCurve(t *testing.T) {
	b, clk := newTest(t, func(c *breaker.Config) {
		c.HalfOpenPolicy = breaker.HalfOpenRamp
		c.RampWindow = 10 * time.Second
		c.RampAggression = 2
		c.RampMinShare = 0.2
		c.RampStepDuration = time.Second
	})
	passProbes(t, b, clk)
	start := clk.Now()
	for _, tc := range []struct {
		at   time.Duration
		want float64
	}{
		{0, 0.2},                          // min share
		{time.Second, 0.2},                // sqrt(0.1) = 0.316? no: curve below min until t where sqrt(t/10) >= 0.2
		{2500 * time.Millisecond, 0.5},    // sqrt(0.25)
		{6400 * time.Millisecond, 0.8},    // sqrt(0.64)
		{9 * time.Second, math.Sqrt(0.9)}, // sqrt(0.9)
	} {
		clk.Set(start.Add(tc.at))
		s := b.SnapshotAt(clk.Now())
		want := tc.want
		if tc.at == time.Second {
			want = math.Sqrt(0.1)
		}
		if s.State != breaker.StateHalfOpen || math.Abs(s.AdmittedShare-want) > 1e-9 {
			t.Fatalf("at %v: share %v want %v (%+v)", tc.at, s.AdmittedShare, want, s)
		}
		offer(t, b, clk, 10, nil)
	}
	clk.Set(start.Add(10 * time.Second))
	mustState(t, b, clk, breaker.StateClosed)
}

func TestAdaptive(t *testing.T) {
	b, clk := newTest(t, func(c *breaker.Config) {
		c.HalfOpenPolicy = breaker.HalfOpenAdaptive
		c.AdaptiveInterval = time.Second
		c.AdaptiveMinShare = 0.1
		c.AdaptiveIncrease = 0.05
		c.AdaptiveBackoff = 0.5
		c.AdaptiveHold = 2
		c.MinimumCalls = 5
	})
	rec := &recorder{}
	b.AddListener(rec.add)
	passProbes(t, b, clk)
	share := func() float64 { return math.Round(b.SnapshotAt(clk.Now()).AdmittedShare*1000) / 1000 }
	interval := func(fail func(i int) bool) float64 {
		offer(t, b, clk, 100, fail)
		clk.Advance(time.Second)
		return share()
	}
	if got := share(); got != 0.1 {
		t.Fatalf("starts at %v", got)
	}
	// search: clean intervals double the share
	var seen []float64
	for range 3 {
		seen = append(seen, interval(nil))
	}
	if want := []float64{0.2, 0.4, 0.8}; fmt.Sprint(seen) != fmt.Sprint(want) {
		t.Fatalf("growth %v want %v", seen, want)
	}
	// one failure alone is no evidence of a rate: the share stays
	admit(t, b, clk, 1, true)
	if got := share(); got != 0.8 {
		t.Fatalf("after one failure: share %v want 0.8", got)
	}
	// a second failure (2 of 6, above the tolerance) is a loss: the loss
	// level is the goodput 0.8 × (1 - 2/6), the share backs off to half of it
	admit(t, b, clk, 4, false)
	admit(t, b, clk, 1, true)
	if got := share(); got != 0.267 {
		t.Fatalf("after the loss: share %v want 0.267 (0.5 × 0.533)", got)
	}
	// failures of calls admitted before the decrease would not cut it again
	// (one decrease per share); it holds for AdaptiveHold clean intervals,
	// then probes at the loss level + AdaptiveIncrease
	if got := interval(nil); got != 0.267 {
		t.Fatalf("holding: share %v want 0.267", got)
	}
	if got := interval(nil); got != 0.583 {
		t.Fatalf("probe: share %v want 0.583 (0.533 + 0.05)", got)
	}
	// one failure above the loss level confirms it: back to the hold level
	admit(t, b, clk, 1, true)
	if got := share(); got != 0.267 {
		t.Fatalf("after a failed probe: share %v want 0.267", got)
	}
	// the capacity returns: hold, a clean probe, then doubling to 100 %,
	// and one clean interval at 100 % closes
	seen = nil
	for i := 0; i < 10 && b.StateAt(clk.Now()) == breaker.StateHalfOpen; i++ {
		seen = append(seen, interval(nil))
	}
	if want := []float64{0.267, 0.583, 1, 1}; fmt.Sprint(seen) != fmt.Sprint(want) {
		t.Fatalf("recovery %v want %v", seen, want)
	}
	mustState(t, b, clk, breaker.StateClosed)
	if last := rec.ts[len(rec.ts)-1]; !strings.Contains(last.Reason, "100%") {
		t.Fatalf("close %+v", last)
	}
}

// TestAdaptiveLossWhileHolding: failures at the hold level, below the loss
// level, mean the capacity fell further; they need evidence of a rate.
func TestAdaptiveLossWhileHolding(t *testing.T) {
	b, clk := newTest(t, func(c *breaker.Config) {
		c.HalfOpenPolicy = breaker.HalfOpenAdaptive
		c.AdaptiveInterval = time.Second
		c.MinimumCalls = 5
	})
	passProbes(t, b, clk)
	for range 3 { // 0.1 -> 0.8
		offer(t, b, clk, 100, nil)
		clk.Advance(time.Second)
	}
	share := func() float64 { return math.Round(b.SnapshotAt(clk.Now()).AdmittedShare*1000) / 1000 }
	admit(t, b, clk, 2, true) // 2 of 2: loss level max(0, 0.4) = 0.4
	if got := share(); got != 0.2 {
		t.Fatalf("after the loss: %v want 0.2", got)
	}
	admit(t, b, clk, 1, true) // one failure while holding: no evidence
	if got := share(); got != 0.2 {
		t.Fatalf("one failure while holding: %v want 0.2", got)
	}
	admit(t, b, clk, 1, true) // 2 of 2: the level falls to the goodput
	if got := share(); got != 0.1 {
		t.Fatalf("second loss: %v want the minimum 0.1", got)
	}
}

// admit offers calls until n are admitted, each reported as a failure if
// fail, else as a success.
func admit(t *testing.T, b *breaker.Breaker, clk *breakertest.Clock, n int, fail bool) {
	t.Helper()
	for got := 0; got < n; {
		got += offer(t, b, clk, 1, func(int) bool { return fail })
	}
}

// TestAdaptiveFastFarAboveLoss: once a clean probe shows the capacity has
// grown, a share at least twice the loss level ends its interval after
// MinimumCalls clean outcomes, so full traffic follows within calls, not
// intervals.
func TestAdaptiveFastFarAboveLoss(t *testing.T) {
	b, clk := newTest(t, func(c *breaker.Config) {
		c.HalfOpenPolicy = breaker.HalfOpenAdaptive
		c.AdaptiveInterval = time.Second
		c.AdaptiveHold = 1
		c.MinimumCalls = 5
	})
	passProbes(t, b, clk)
	share := func() float64 { return math.Round(b.SnapshotAt(clk.Now()).AdmittedShare*1000) / 1000 }
	offer(t, b, clk, 100, nil)
	clk.Advance(time.Second) // 0.2
	admit(t, b, clk, 2, true)
	if got := share(); got != 0.1 {
		t.Fatalf("after the loss: %v want 0.1 (loss level 0.1, the share before the doubling)", got)
	}
	offer(t, b, clk, 100, nil)
	clk.Advance(time.Second) // held one clean interval: probe at 0.15
	if got := share(); got != 0.15 {
		t.Fatalf("probe: %v want 0.15", got)
	}
	offer(t, b, clk, 100, nil)
	clk.Advance(time.Second) // a clean probe: 0.3, twice the loss level and more
	if got := share(); got != 0.3 {
		t.Fatalf("after the clean probe: %v want 0.3", got)
	}
	// no more clock: 5 clean outcomes at 0.3 -> 0.6, 5 more -> 1
	var seen []float64
	for i := 0; i < 2; i++ {
		admit(t, b, clk, 5, false)
		seen = append(seen, share())
	}
	if want := []float64{0.6, 1}; fmt.Sprint(seen) != fmt.Sprint(want) {
		t.Fatalf("shares %v want %v", seen, want)
	}
	// closing takes a whole clean interval at 100 %: a burst allowance can
	// serve a few calls beyond a capacity that has not returned
	admit(t, b, clk, 20, false)
	mustState(t, b, clk, breaker.StateHalfOpen)
	offer(t, b, clk, 100, nil)
	clk.Advance(time.Second)
	mustState(t, b, clk, breaker.StateClosed)
}

func TestAdaptiveReopensOnlyAtMinimum(t *testing.T) {
	b, clk := newTest(t, func(c *breaker.Config) {
		c.HalfOpenPolicy = breaker.HalfOpenAdaptive
		c.AdaptiveInterval = time.Second
		c.AdaptiveMinShare = 0.1
		c.MinimumCalls = 5
	})
	passProbes(t, b, clk)
	for range 4 { // grow to 0.45
		offer(t, b, clk, 100, nil)
		clk.Advance(time.Second)
	}
	// the dependency dies: the share falls to the minimum first, then the
	// breaker reopens once failures persist there
	for i := 0; i < 100 && b.StateAt(clk.Now()) == breaker.StateHalfOpen; i++ {
		before := b.SnapshotAt(clk.Now()).AdmittedShare
		offer(t, b, clk, 1, func(int) bool { return true })
		s := b.SnapshotAt(clk.Now())
		if s.State == breaker.StateOpen && before > 0.1+1e-9 {
			t.Fatalf("reopened at share %v, above the minimum", before)
		}
	}
	mustState(t, b, clk, breaker.StateOpen)
}

// TestAdaptiveBelowMinimum: a dependency that serves some calls at the
// minimum share but not all (its capacity is below it) backs the share off
// below the minimum, down to a tenth of it (the floor), instead of
// reopening; at the floor, failures with no success reopen.
func TestAdaptiveBelowMinimum(t *testing.T) {
	b, clk := newTest(t, func(c *breaker.Config) {
		c.HalfOpenPolicy = breaker.HalfOpenAdaptive
		c.AdaptiveInterval = time.Second
		c.AdaptiveMinShare = 0.1
		c.MinimumCalls = 5
	})
	passProbes(t, b, clk)
	share := func() float64 { return math.Round(b.SnapshotAt(clk.Now()).AdmittedShare*1000) / 1000 }
	if got := share(); got != 0.1 {
		t.Fatalf("start: %v want the minimum 0.1", got)
	}
	// at the minimum, every other call fails: a loss with goodput
	for i := range 4 {
		admit(t, b, clk, 1, i%2 == 1)
	}
	mustState(t, b, clk, breaker.StateHalfOpen)
	// loss level max(0.1 × 0.5, 0.1 / 2) = 0.05, backed off to half of it
	if got := share(); got != 0.025 {
		t.Fatalf("after a loss at the minimum with goodput: %v want 0.025", got)
	}
	// below the minimum, two failures and no success back off to the
	// floor, a tenth of the minimum
	admit(t, b, clk, 2, true)
	mustState(t, b, clk, breaker.StateHalfOpen)
	if got := share(); got != 0.01 {
		t.Fatalf("after two failures below the minimum: %v want the floor 0.01", got)
	}
	// at the floor, two failures and no success reopen
	admit(t, b, clk, 1, true)
	mustState(t, b, clk, breaker.StateHalfOpen)
	admit(t, b, clk, 1, true)
	mustState(t, b, clk, breaker.StateOpen)
}

func TestAdaptiveToleratesSporadicErrors(t *testing.T) {
	b, clk := newTest(t, func(c *breaker.Config) {
		c.HalfOpenPolicy = breaker.HalfOpenAdaptive
		c.AdaptiveInterval = time.Second
	})
	passProbes(t, b, clk)
	k := 0
	for i := 0; i < 30 && b.StateAt(clk.Now()) == breaker.StateHalfOpen; i++ {
		offer(t, b, clk, 100, func(int) bool { k++; return k%50 == 0 }) // 2 % errors
		clk.Advance(time.Second)
	}
	mustState(t, b, clk, breaker.StateClosed)
}
