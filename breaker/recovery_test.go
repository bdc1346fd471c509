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
		c.MinimumCalls = 5
	})
	rec := &recorder{}
	b.AddListener(rec.add)
	passProbes(t, b, clk)
	share := func() float64 { return b.SnapshotAt(clk.Now()).AdmittedShare }
	if got := share(); got != 0.1 {
		t.Fatalf("starts at %v", got)
	}
	// clean intervals: additive increase, doubling above the (unknown) ceiling
	var seen []float64
	for range 3 {
		offer(t, b, clk, 100, nil)
		clk.Advance(time.Second)
		seen = append(seen, math.Round(share()*100)/100)
	}
	if want := []float64{0.15, 0.25, 0.45}; fmt.Sprint(seen) != fmt.Sprint(want) {
		t.Fatalf("growth %v want %v", seen, want)
	}
	// a loss backs off at once, to no more than the measured goodput
	for i := 0; share() == 0.45; i++ {
		offer(t, b, clk, 1, func(int) bool { return i%2 == 1 }) // 50 % loss
	}
	if got := share(); got != 0.225 {
		t.Fatalf("after loss: share %v want 0.225", got)
	}
	// failures of calls admitted before the decrease do not cut it again
	// (checked implicitly: one decrease per share); clean intervals regain
	// the ceiling (goodput 0.45*(1-loss)) quickly
	for range 2 {
		offer(t, b, clk, 100, nil)
		clk.Advance(time.Second)
	}
	if got := share(); got < 0.225 || got > 0.45 {
		t.Fatalf("regaining: %v", got)
	}
	// clean all the way to 100 %, then one clean interval closes
	for i := 0; i < 20 && b.StateAt(clk.Now()) == breaker.StateHalfOpen; i++ {
		offer(t, b, clk, 100, nil)
		clk.Advance(time.Second)
	}
	mustState(t, b, clk, breaker.StateClosed)
	if last := rec.ts[len(rec.ts)-1]; !strings.Contains(last.Reason, "100%") {
		t.Fatalf("close %+v", last)
	}
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
