package breaker_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/breaker/breakertest"
)

func TestStateString(t *testing.T) {
	for st, want := range map[breaker.State]string{
		breaker.StateClosed: "closed", breaker.StateOpen: "open", breaker.StateHalfOpen: "half-open",
	} {
		if st.String() != want {
			t.Errorf("%d.String() = %q, want %q", st, st.String(), want)
		}
	}
	var zero breaker.State
	if zero != breaker.StateClosed {
		t.Error("zero State is not closed")
	}
}

// TestClosedTrip is a table of closed-state windows: the outcomes fed in
// order and the call (1-based) at which the breaker must trip (0 = never).
func TestClosedTrip(t *testing.T) {
	S, F, N, W := "S", "F", "N", "W" // success, failure, neutral, slow success
	tests := []struct {
		name   string
		mod    func(*breaker.Config)
		seq    []string
		tripAt int
	}{
		{"below minimum calls never trips", nil, []string{F, F, F}, 0},
		{"trips at minimum calls", nil, []string{F, F, F, F}, 4},
		{"rate at threshold trips", nil, []string{S, S, F, F}, 4},
		{"rate below threshold", nil, []string{S, S, S, F, S, S, F}, 0},
		{"failures slide out of the window", nil,
			[]string{S, S, S, S, F, F, F, S, S, S, S, S, S, S, F, F, F, F}, 0},
		{"window of last N calls", nil,
			[]string{S, S, S, S, S, S, S, S, S, S, F, F, F, F, F}, 15},
		{"neutral outcomes do not count", nil, []string{N, N, N, F, N, F, N, F, F}, 9},
		{"slow successes are not failures in closed", nil, []string{W, W, W, W, W}, 0},
		{"slow-call rate trips when set", func(c *breaker.Config) { c.SlowCallRateThreshold = 0.75 },
			[]string{W, S, W, W}, 4},
		{"consecutive failures trip before minimum", func(c *breaker.Config) {
			c.MinimumCalls = 10
			c.ConsecutiveFailures = 3
		}, []string{S, F, F, S, F, F, F}, 7},
		{"threshold 1.0 needs all failures", func(c *breaker.Config) { c.FailureRateThreshold = 1 },
			[]string{F, F, F, S, F, F, F, F, F, F, F, F, F, F}, 14},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, clk := newTest(t, tt.mod)
			for i, o := range tt.seq {
				clk.Advance(10 * time.Millisecond)
				p, err := b.AllowAt(clk.Now())
				if err != nil {
					t.Fatalf("call %d rejected: %v", i+1, err)
				}
				switch o {
				case S:
					p.RecordAt(clk.Now(), breaker.OutcomeSuccess, time.Millisecond)
				case F:
					p.RecordAt(clk.Now(), breaker.OutcomeFailure, time.Millisecond)
				case N:
					p.RecordAt(clk.Now(), breaker.OutcomeNeutral, time.Millisecond)
				case W:
					p.RecordAt(clk.Now(), breaker.OutcomeSuccess, time.Second)
				}
				st := b.StateAt(clk.Now())
				if i+1 == tt.tripAt {
					if st != breaker.StateOpen {
						t.Fatalf("after call %d: state %v, want open; %+v", i+1, st, b.SnapshotAt(clk.Now()))
					}
					return
				}
				if st != breaker.StateClosed {
					t.Fatalf("tripped at call %d, want %d; %+v", i+1, tt.tripAt, b.SnapshotAt(clk.Now()))
				}
			}
			if tt.tripAt != 0 {
				t.Fatalf("never tripped, want at %d", tt.tripAt)
			}
		})
	}
}

func TestClosedSnapshotCounts(t *testing.T) {
	b, clk := newTest(t, func(c *breaker.Config) { c.MinimumCalls = 10 })
	for _, err := range []error{nil, errBoom, nil, nil, errBoom} {
		call(t, b, clk, err, time.Millisecond)
	}
	call(t, b, clk, nil, time.Second) // slow success
	s := b.SnapshotAt(clk.Now())
	if s.State != breaker.StateClosed || s.Calls != 6 || s.Failures != 2 || s.SlowCalls != 1 || s.AdmittedShare != 1 {
		t.Fatalf("snapshot %+v", s)
	}
	for range 10 {
		call(t, b, clk, nil, time.Millisecond)
	}
	s = b.SnapshotAt(clk.Now())
	if s.Calls != 10 || s.Failures != 0 || s.SlowCalls != 0 {
		t.Fatalf("after sliding: %+v", s)
	}
}

func TestOpenRejectsThenHalfOpenAfterWindow(t *testing.T) {
	for _, timers := range []bool{true, false} {
		t.Run(fmt.Sprintf("timers=%v", timers), func(t *testing.T) {
			clk := breakertest.NewClock(time.Time{})
			var c breaker.Clock = clk
			if !timers {
				c = breakertest.NowOnly{C: clk}
			}
			b, err := breaker.New(breaker.Config{Name: "p", Clock: c, DisableJitter: true, WindowSize: 4, MinimumCalls: 4})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Stop()
			rec := &recorder{}
			b.AddListener(rec.add)
			trip(t, b, clk)
			_, err = b.Allow()
			var rej *breaker.RejectedError
			if !errors.Is(err, breaker.ErrOpen) || !errors.As(err, &rej) || rej.Breaker != "p" || rej.State != breaker.StateOpen {
				t.Fatalf("Allow while open: %v", err)
			}
			if !strings.HasPrefix(err.Error(), "breaker: open") || !strings.Contains(err.Error(), `"p"`) {
				t.Fatalf("error text %q", err)
			}
			s := b.Snapshot()
			if s.OpenWindow != time.Second || !s.OpenUntil.Equal(clk.Now().Add(time.Second)) || s.ConsecutiveTrips != 1 {
				t.Fatalf("snapshot %+v", s)
			}
			clk.Advance(999 * time.Millisecond)
			if _, err := b.Allow(); !errors.Is(err, breaker.ErrOpen) {
				t.Fatalf("Allow 1ms before the window ends: %v", err)
			}
			clk.Advance(time.Millisecond)
			if timers {
				// the timer moved it, without any call
				if got := rec.path(); !slices.Equal(got, []string{"open", "half-open"}) {
					t.Fatalf("transitions %v", got)
				}
				if rec.ts[1].Reason != "open window ended" || !rec.ts[1].At.Equal(clk.Now()) {
					t.Fatalf("transition %+v", rec.ts[1])
				}
			} else if len(rec.ts) != 1 {
				t.Fatalf("lazy breaker moved without a call: %v", rec.path())
			}
			if st := b.State(); st != breaker.StateHalfOpen {
				t.Fatalf("state %v", st)
			}
		})
	}
}

func TestProbeCapAndClose(t *testing.T) {
	b, clk := newTest(t, nil)
	rec := &recorder{}
	b.AddListener(rec.add)
	trip(t, b, clk)
	clk.Advance(time.Second)
	p1, err1 := b.AllowAt(clk.Now())
	p2, err2 := b.AllowAt(clk.Now())
	_, err3 := b.AllowAt(clk.Now())
	if err1 != nil || err2 != nil || !p1.IsProbe() || !p2.IsProbe() {
		t.Fatalf("probes: %v %v", err1, err2)
	}
	if !errors.Is(err3, breaker.ErrProbeLimit) || errors.Is(err3, breaker.ErrOpen) {
		t.Fatalf("third probe: %v", err3)
	}
	if s := b.SnapshotAt(clk.Now()); s.ProbesInFlight != 2 || s.State != breaker.StateHalfOpen {
		t.Fatalf("snapshot %+v", s)
	}
	p1.DoneAt(clk.Now().Add(10*time.Millisecond), nil)
	p2.DoneAt(clk.Now().Add(10*time.Millisecond), nil)
	if s := b.SnapshotAt(clk.Now()); s.ConsecutiveSuccesses != 2 || s.ProbesInFlight != 0 || s.State != breaker.StateHalfOpen {
		t.Fatalf("after 2 good probes: %+v", s)
	}
	call(t, b, clk, nil, 100*time.Millisecond) // exactly SlowCallDuration is good
	mustState(t, b, clk, breaker.StateClosed)
	want := []string{"open", "half-open", "closed"}
	if !slices.Equal(rec.path(), want) || rec.ts[2].Reason != "3 consecutive good probes" {
		t.Fatalf("transitions %v %+v", rec.path(), rec.ts)
	}
	if s := b.SnapshotAt(clk.Now()); s.ConsecutiveTrips != 0 || s.Calls != 0 {
		t.Fatalf("after clean close: %+v", s)
	}
}

// TestReopenLadder: every failed probe reopens with the next window; a clean
// close resets the ladder; a good probe alone does not.
func TestReopenLadder(t *testing.T) {
	b, clk := newTest(t, func(c *breaker.Config) {
		c.BaseOpenWindow = time.Second
		c.MaxOpenWindow = 10 * time.Second
	})
	rec := &recorder{}
	b.AddListener(rec.add)
	trip(t, b, clk)
	bad := []struct {
		name string
		do   func(p breaker.Permit)
	}{
		{"error", func(p breaker.Permit) { p.DoneAt(clk.Now(), errBoom) }},
		{"slow success", func(p breaker.Permit) { clk.Advance(101 * time.Millisecond); p.DoneAt(clk.Now(), nil) }},
		{"cancelled ctx", func(p breaker.Permit) { p.DoneAt(clk.Now(), context.Canceled) }},
		{"good then error", nil},
		{"explicit failure", func(p breaker.Permit) { p.RecordAt(clk.Now(), breaker.OutcomeFailure, 0) }},
	}
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 10 * time.Second, 10 * time.Second}
	for i, tc := range bad {
		s := b.SnapshotAt(clk.Now())
		if s.OpenWindow != want[i] || s.ConsecutiveTrips != i+1 {
			t.Fatalf("before %s: window %v trips %d, want %v %d", tc.name, s.OpenWindow, s.ConsecutiveTrips, want[i], i+1)
		}
		clk.Advance(s.OpenWindow)
		mustState(t, b, clk, breaker.StateHalfOpen)
		if tc.do == nil {
			call(t, b, clk, nil, time.Millisecond)
			call(t, b, clk, errBoom, time.Millisecond)
		} else {
			p, err := b.AllowAt(clk.Now())
			if err != nil {
				t.Fatal(err)
			}
			tc.do(p)
		}
		mustState(t, b, clk, breaker.StateOpen)
	}
	s := b.SnapshotAt(clk.Now())
	if s.OpenWindow != want[5] || s.OpenWindowStep != want[5] {
		t.Fatalf("capped window %+v", s)
	}
	clk.Advance(s.OpenWindow)
	for range 3 {
		call(t, b, clk, nil, time.Millisecond)
	}
	mustState(t, b, clk, breaker.StateClosed)
	trip(t, b, clk)
	if s := b.SnapshotAt(clk.Now()); s.OpenWindow != time.Second || s.ConsecutiveTrips != 1 {
		t.Fatalf("after clean close the ladder must restart: %+v", s)
	}
}

func TestUnreportedProbeExpires(t *testing.T) {
	for _, timers := range []bool{true, false} {
		t.Run(fmt.Sprintf("timers=%v", timers), func(t *testing.T) {
			clk := breakertest.NewClock(time.Time{})
			var c breaker.Clock = clk
			if !timers {
				c = breakertest.NowOnly{C: clk}
			}
			b, err := breaker.New(breaker.Config{Clock: c, DisableJitter: true, WindowSize: 4, MinimumCalls: 4,
				SlowCallDuration: time.Second, MaxProbeWait: 3 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Stop()
			rec := &recorder{}
			b.AddListener(rec.add)
			trip(t, b, clk)
			clk.Advance(time.Second)
			lost, err := b.AllowAt(clk.Now()) // never reported
			if err != nil {
				t.Fatal(err)
			}
			clk.Advance(3*time.Second - 1)
			if timers {
				if n := len(rec.ts); n != 2 {
					t.Fatalf("transitions before MaxProbeWait: %v", rec.path())
				}
			}
			mustState(t, b, clk, breaker.StateHalfOpen)
			clk.Advance(1)
			if timers && len(rec.ts) != 3 {
				t.Fatalf("timer did not expire the probe: %v", rec.path())
			}
			mustState(t, b, clk, breaker.StateOpen)
			last := rec.ts[len(rec.ts)-1]
			if !strings.Contains(last.Reason, "MaxProbeWait") || last.Window != 2*time.Second {
				t.Fatalf("transition %+v", last)
			}
			// the lost probe's late report was already counted (as a
			// failure): it is ignored
			lost.DoneAt(clk.Now(), nil)
			if s := b.SnapshotAt(clk.Now()); s.Stale != 0 || s.State != breaker.StateOpen || s.Generation != 3 {
				t.Fatalf("snapshot %+v", s)
			}
		})
	}
}

func TestCancelledProbeFreesSlot(t *testing.T) {
	b, clk := newTest(t, func(c *breaker.Config) { c.ProbeConcurrency = 1 })
	trip(t, b, clk)
	clk.Advance(time.Second)
	p, err := b.AllowAt(clk.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.AllowAt(clk.Now()); !errors.Is(err, breaker.ErrProbeLimit) {
		t.Fatalf("want probe limit, got %v", err)
	}
	p.Cancel()
	if s := b.SnapshotAt(clk.Now()); s.ProbesInFlight != 0 || s.ConsecutiveSuccesses != 0 || s.State != breaker.StateHalfOpen {
		t.Fatalf("after cancel %+v", s)
	}
	call(t, b, clk, nil, time.Millisecond)
	if s := b.SnapshotAt(clk.Now()); s.ConsecutiveSuccesses != 1 {
		t.Fatalf("after good probe %+v", s)
	}
}

func TestStaleResultsDiscarded(t *testing.T) {
	b, clk := newTest(t, nil)
	old, err := b.AllowAt(clk.Now()) // admitted while closed
	if err != nil {
		t.Fatal(err)
	}
	trip(t, b, clk)
	clk.Advance(time.Second)
	mustState(t, b, clk, breaker.StateHalfOpen)
	before := b.SnapshotAt(clk.Now())
	old.DoneAt(clk.Now(), errBoom) // a failure from the closed period
	after := b.SnapshotAt(clk.Now())
	if after.State != breaker.StateHalfOpen || after.Generation != before.Generation || after.Stale != before.Stale+1 {
		t.Fatalf("stale failure changed state: before %+v after %+v", before, after)
	}
	old.DoneAt(clk.Now(), errBoom) // twice: ignored
	if s := b.SnapshotAt(clk.Now()); s.Stale != after.Stale {
		t.Fatalf("second stale report counted: %+v", s)
	}
	// a probe admitted in this half-open period, reported after it closed
	probe, _ := b.AllowAt(clk.Now())
	for range 3 {
		call(t, b, clk, nil, time.Millisecond)
	}
	mustState(t, b, clk, breaker.StateClosed)
	probe.DoneAt(clk.Now(), errBoom)
	s := b.SnapshotAt(clk.Now())
	if s.State != breaker.StateClosed || s.Calls != 0 || s.Stale != after.Stale+1 {
		t.Fatalf("stale probe result applied: %+v", s)
	}
}

func TestDoubleReportIgnored(t *testing.T) {
	b, clk := newTest(t, func(c *breaker.Config) { c.MinimumCalls = 2 })
	p, _ := b.AllowAt(clk.Now())
	p.DoneAt(clk.Now(), errBoom)
	p.DoneAt(clk.Now(), errBoom)
	p.RecordAt(clk.Now(), breaker.OutcomeFailure, 0)
	cp := p
	cp.Done(errBoom)
	if s := b.SnapshotAt(clk.Now()); s.Calls != 1 || s.Failures != 1 || s.State != breaker.StateClosed {
		t.Fatalf("double report counted: %+v", s)
	}
	// half-open: a probe reported twice counts once
	trip(t, b, clk)
	clk.Advance(time.Second)
	q, _ := b.AllowAt(clk.Now())
	q.DoneAt(clk.Now(), nil)
	q.DoneAt(clk.Now(), nil)
	q.DoneAt(clk.Now(), nil)
	if s := b.SnapshotAt(clk.Now()); s.ConsecutiveSuccesses != 1 || s.State != breaker.StateHalfOpen {
		t.Fatalf("probe double report: %+v", s)
	}
	var zero breaker.Permit
	zero.Done(nil) // must not panic
	zero.Cancel()
}

func TestListenersAfterUnlockInOrder(t *testing.T) {
	b, clk := newTest(t, nil)
	var got []string
	b.AddListener(func(tr breaker.Transition) {
		// calling the breaker from a listener must not deadlock
		s := b.SnapshotAt(clk.Now())
		got = append(got, fmt.Sprintf("A:%v->%v@%d", tr.From, tr.To, s.Generation))
	})
	remove := b.AddListener(func(tr breaker.Transition) { got = append(got, "B:"+tr.To.String()) })
	trip(t, b, clk)
	clk.Advance(time.Second)
	remove()
	remove()
	b.ForceOpen()
	want := []string{"A:closed->open@1", "B:open", "A:open->half-open@2", "B:half-open", "A:half-open->open@3"}
	if !slices.Equal(got, want) {
		t.Fatalf("got %v\nwant %v", got, want)
	}
}

func TestForceAndReset(t *testing.T) {
	b, clk := newTest(t, nil)
	b.ForceOpen()
	clk.Advance(time.Hour)
	if _, err := b.AllowAt(clk.Now()); !errors.Is(err, breaker.ErrOpen) {
		t.Fatalf("forced open admitted: %v", err)
	}
	if s := b.SnapshotAt(clk.Now()); !s.Forced || !s.OpenUntil.IsZero() || s.ConsecutiveTrips != 0 {
		t.Fatalf("forced snapshot %+v", s)
	}
	b.ForceClose()
	mustState(t, b, clk, breaker.StateClosed)
	trip(t, b, clk)
	trips := b.SnapshotAt(clk.Now()).ConsecutiveTrips
	b.ForceClose()
	trip(t, b, clk)
	if s := b.SnapshotAt(clk.Now()); s.ConsecutiveTrips != trips+1 || s.OpenWindow != 2*time.Second {
		t.Fatalf("ForceClose must keep the ladder: %+v", s)
	}
	b.Reset()
	trip(t, b, clk)
	if s := b.SnapshotAt(clk.Now()); s.ConsecutiveTrips != 1 || s.OpenWindow != time.Second {
		t.Fatalf("Reset must restart the ladder: %+v", s)
	}
}

func TestDefaultClassifier(t *testing.T) {
	b, clk := newTest(t, func(c *breaker.Config) { c.MinimumCalls = 1; c.WindowSize = 1 })
	p, _ := b.AllowAt(clk.Now())
	p.DoneAt(clk.Now(), fmt.Errorf("wrapped: %w", context.Canceled))
	mustState(t, b, clk, breaker.StateOpen)

	b2, clk2 := newTest(t, func(c *breaker.Config) {
		c.MinimumCalls, c.WindowSize = 1, 1
		c.Classifier = func(err error) breaker.Outcome {
			if errors.Is(err, errBoom) {
				return breaker.OutcomeNeutral
			}
			if err != nil {
				return breaker.OutcomeFailure
			}
			return breaker.OutcomeSuccess
		}
	})
	p, _ = b2.AllowAt(clk2.Now())
	p.DoneAt(clk2.Now(), errBoom)
	if s := b2.SnapshotAt(clk2.Now()); s.State != breaker.StateClosed || s.Calls != 0 {
		t.Fatalf("neutral counted: %+v", s)
	}
}

func TestDefaults(t *testing.T) {
	b, err := breaker.New(breaker.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Stop()
	c := b.Config()
	if c.WindowSize != 20 || c.MinimumCalls != 10 || c.FailureRateThreshold != 0.5 || c.BaseOpenWindow != time.Second ||
		c.MaxOpenWindow != 30*time.Second || c.BackoffFactor != 2 || c.Jitter != 0.2 || c.ProbeConcurrency != 2 ||
		c.SuccessesToClose != 5 || c.SlowCallDuration != 5*time.Second || c.MaxProbeWait != 30*time.Second ||
		!slices.Equal(c.RampSteps, []float64{0.1, 0.25, 0.5, 1}) {
		t.Fatalf("defaults %+v", c)
	}
	p, err := b.Allow()
	if err != nil {
		t.Fatal(err)
	}
	p.Done(nil)
	if s := b.Snapshot(); s.State != breaker.StateClosed || s.Calls != 1 {
		t.Fatalf("%+v", s)
	}
}

// TestListenerPanicDoesNotWedge: a panicking listener propagates its panic
// to the caller whose call delivered the transition, and later transitions
// are still delivered.
func TestListenerPanicDoesNotWedge(t *testing.T) {
	b, clk := newTest(t, nil)
	var got []string
	panicked := false
	b.AddListener(func(tr breaker.Transition) {
		got = append(got, tr.To.String())
		if !panicked {
			panicked = true
			panic("listener bug")
		}
	})
	func() {
		defer func() {
			if r := recover(); r != "listener bug" {
				t.Fatalf("recovered %v", r)
			}
		}()
		trip(t, b, clk)
	}()
	clk.Advance(time.Second) // the timer delivers the next transition
	if !slices.Equal(got, []string{"open", "half-open"}) {
		t.Fatalf("delivered %v", got)
	}
}
