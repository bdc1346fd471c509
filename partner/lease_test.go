package partner_test

import (
	"sync"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/partner"
)

// TestLeaseRacingReportsFreeOneSlot: copies of one closed-state lease
// reported at once, by every report method, on the breaker's lock-free
// path (a warm window, fast successes), free its bulkhead slot once: the
// lease has no guard of its own and relies on the permit's Try reports,
// of which exactly one wins.
func TestLeaseRacingReportsFreeOneSlot(t *testing.T) {
	r, clk := newTest(t, func(c *partner.Config) { c.Template.Breaker.MinimumCalls = 1 })
	p, l, err := r.Acquire("P")
	if err != nil {
		t.Fatal(err)
	}
	l.Done(nil) // warm
	reports := []func(l partner.Lease){
		func(l partner.Lease) { l.Done(nil) },
		func(l partner.Lease) { l.DoneAt(clk.Now(), nil) },
		func(l partner.Lease) { l.Record(breaker.OutcomeSuccess, 0) },
		func(l partner.Lease) { l.RecordAt(clk.Now(), breaker.OutcomeSuccess, 0) },
	}
	for i := range 5000 {
		l, err := p.AcquireAt(clk.Now())
		if err != nil {
			t.Fatal(err)
		}
		other, err := p.AcquireAt(clk.Now())
		if err != nil {
			t.Fatal(err)
		}
		var start, wg sync.WaitGroup
		start.Add(1)
		for _, report := range reports {
			wg.Go(func() { start.Wait(); report(l) })
		}
		start.Done()
		wg.Wait()
		if n := p.InFlight(); n != 1 {
			t.Fatalf("round %d: InFlight = %d after racing reports of one lease of two, want 1", i, n)
		}
		other.Cancel()
		if n := p.InFlight(); n != 0 {
			t.Fatalf("round %d: InFlight = %d, want 0", i, n)
		}
	}
}

// TestProbeLeaseReportedOnce: a probe's lease frees its slot on its first
// report and only then, also when the probe expired (MaxProbeWait) before
// it was reported, which the breaker already counted: the lease's guard,
// not the permit, tells its first report.
func TestProbeLeaseReportedOnce(t *testing.T) {
	r, clk := newTest(t, func(c *partner.Config) {
		c.Template.Breaker.ProbeConcurrency = 2
		c.Template.Breaker.SuccessesToClose = 3
		c.Template.Breaker.MaxProbeWait = 5 * time.Second
	})
	trip(t, r, "P")
	clk.Advance(time.Second)
	p := mustGet(t, r, "P")
	probe, err := p.AcquireAt(clk.Now())
	if err != nil || !probe.IsProbe() {
		t.Fatalf("probe: %v", err)
	}
	late, err := p.AcquireAt(clk.Now())
	if err != nil || !late.IsProbe() {
		t.Fatalf("second probe: %v", err)
	}
	probe.RecordAt(clk.Now(), breaker.OutcomeSuccess, 0)
	probe.Done(nil)
	if n := p.InFlight(); n != 1 {
		t.Fatalf("InFlight = %d after reporting one probe of two twice, want 1", n)
	}
	clk.Advance(6 * time.Second) // late expires
	p.Breaker().StateAt(clk.Now())
	late.Done(nil)
	if n := p.InFlight(); n != 0 {
		t.Fatalf("InFlight = %d after the expired probe's report, want 0", n)
	}
	late.Cancel()
	if n := p.InFlight(); n != 0 {
		t.Fatalf("InFlight = %d after a second report, want 0", n)
	}
}
