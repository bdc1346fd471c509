package breaker_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/breaker"
)

// tryForms are the Try reports of a permit, each a success, by name.
var tryForms = []struct {
	name   string
	report func(p breaker.Permit, now time.Time) bool
}{
	{"TryDone", func(p breaker.Permit, _ time.Time) bool { return p.TryDone(nil) }},
	{"TryDoneAt", func(p breaker.Permit, now time.Time) bool { return p.TryDoneAt(now, nil) }},
	{"TryRecord", func(p breaker.Permit, _ time.Time) bool { return p.TryRecord(breaker.OutcomeSuccess, 0) }},
	{"TryRecordAt", func(p breaker.Permit, now time.Time) bool {
		return p.TryRecordAt(now, breaker.OutcomeSuccess, 0)
	}},
}

// TestTryReportReleasesOnce: of the reports of one closed-state permit,
// in turn, only the first says it released the permit, by every Try form,
// on the locked path (window not yet warm), the lock-free one (warm), for
// a failure and a neutral outcome, and for a permit made stale by a trip;
// the zero Permit's never does.
func TestTryReportReleasesOnce(t *testing.T) {
	for _, f := range tryForms {
		t.Run(f.name, func(t *testing.T) {
			b, clk := newTest(t, nil)
			for i := range 8 { // MinimumCalls 4: locked path, then lock-free
				p, err := b.AllowAt(clk.Now())
				if err != nil {
					t.Fatal(err)
				}
				if !f.report(p, clk.Now()) {
					t.Fatalf("call %d: first report did not release the permit", i)
				}
				for j := range 3 {
					if f.report(p, clk.Now()) {
						t.Fatalf("call %d: report %d released the permit again", i, j+2)
					}
				}
			}
			if s := b.SnapshotAt(clk.Now()); s.Calls != 8 || s.Failures != 0 {
				t.Errorf("calls = %d, failures %d; want 8, 0 (snapshot %+v)", s.Calls, s.Failures, s)
			}
		})
	}
	b, clk := newTest(t, nil)
	for _, o := range []breaker.Outcome{breaker.OutcomeFailure, breaker.OutcomeNeutral} {
		p, err := b.AllowAt(clk.Now())
		if err != nil {
			t.Fatal(err)
		}
		if !p.TryRecordAt(clk.Now(), o, 0) || p.TryRecordAt(clk.Now(), o, 0) || p.TryRecord(o, 0) {
			t.Errorf("outcome %v: want exactly the first report to release", o)
		}
	}
	stale, err := b.AllowAt(clk.Now())
	if err != nil {
		t.Fatal(err)
	}
	trip(t, b, clk)
	if !stale.TryDoneAt(clk.Now(), nil) || stale.TryDoneAt(clk.Now(), nil) {
		t.Error("stale permit: want exactly the first report to release")
	}
	var zero breaker.Permit
	if zero.TryDone(nil) || zero.TryDoneAt(clk.Now(), nil) || zero.TryRecord(breaker.OutcomeSuccess, 0) ||
		zero.TryRecordAt(clk.Now(), breaker.OutcomeSuccess, 0) {
		t.Error("the zero Permit released")
	}
}

// TestTryReportRacingReleasesOnce: reports of one closed-state permit
// racing each other on the lock-free path (a warm window, fast successes)
// release it exactly once, whichever wins. RecordAt's plain store there
// could let two win; package partner frees a bulkhead slot per release.
func TestTryReportRacingReleasesOnce(t *testing.T) {
	b, clk := newTest(t, func(c *breaker.Config) { c.MinimumCalls = 1 })
	call(t, b, clk, nil, 0) // warm
	const racers = 4
	for i := range 10000 {
		p, err := b.AllowAt(clk.Now())
		if err != nil {
			t.Fatal(err)
		}
		var released atomic.Int32
		var start, wg sync.WaitGroup
		start.Add(1)
		for range racers {
			wg.Go(func() {
				start.Wait()
				if p.TryRecordAt(clk.Now(), breaker.OutcomeSuccess, 0) {
					released.Add(1)
				}
			})
		}
		start.Done()
		wg.Wait()
		if n := released.Load(); n != 1 {
			t.Fatalf("round %d: %d racing reports released the permit, want 1", i, n)
		}
	}
}

// TestTryReportProbe: a probe's first report releases it and a second does
// not; a probe that expired (MaxProbeWait) before its report is released
// by the expiry, so even its first report says false (why package partner
// keeps a guard for probes).
func TestTryReportProbe(t *testing.T) {
	b, clk := newTest(t, nil)
	trip(t, b, clk)
	clk.Advance(time.Second) // the open window
	p, err := b.AllowAt(clk.Now())
	if err != nil || !p.IsProbe() {
		t.Fatalf("want a probe: %v, %v", p.IsProbe(), err)
	}
	if !p.TryRecordAt(clk.Now(), breaker.OutcomeNeutral, 0) || p.TryRecordAt(clk.Now(), breaker.OutcomeNeutral, 0) {
		t.Error("probe: want exactly the first report to release")
	}
	late, err := b.AllowAt(clk.Now())
	if err != nil || !late.IsProbe() {
		t.Fatalf("want a probe: %v, %v", late.IsProbe(), err)
	}
	clk.Advance(6 * time.Second) // MaxProbeWait 5s
	b.StateAt(clk.Now())         // the expiry
	if late.TryDoneAt(clk.Now(), nil) {
		t.Error("expired probe: its report released it; the expiry did")
	}
}
