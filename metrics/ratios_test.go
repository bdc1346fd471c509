package metrics_test

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/breaker/breakertest"
	"github.com/floodgate-go/floodgate/metrics"
)

// Issue 15: the failure and slow-call ratios of a closed breaker's window
// are exported at scrape time, as the trip rule judges them, so an alert
// can fire before the breaker trips; -1 (RatioNotJudged) while the window
// holds fewer than MinimumCalls calls and while the breaker is not closed.
func TestWindowRatios(t *testing.T) {
	clock := breakertest.NewClock(time.Time{})
	b, err := breaker.New(breaker.Config{
		Name: "northwind", Clock: clock,
		WindowSize: 4, MinimumCalls: 4, FailureRateThreshold: 0.5,
		SlowCallDuration: 100 * time.Millisecond, SlowCallRateThreshold: 0.5,
		BaseOpenWindow: time.Second, DisableJitter: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Stop)
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg, metrics.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.WatchBreaker("northwind", b); err != nil {
		t.Fatal(err)
	}
	call := func(o breaker.Outcome, latency time.Duration) {
		t.Helper()
		p, err := b.Allow()
		if err != nil {
			t.Fatalf("Allow: %v", err)
		}
		p.Record(o, latency)
	}
	ratios := func(stage string, failure, slow float64) {
		t.Helper()
		gather(t, reg).expect(t, stage,
			want{metrics.NameFailureRatio, []string{"partner", "northwind"}, failure},
			want{metrics.NameSlowCallRatio, []string{"partner", "northwind"}, slow},
		)
	}
	const fast, slow = 10 * time.Millisecond, 200 * time.Millisecond

	ratios("no calls", metrics.RatioNotJudged, metrics.RatioNotJudged)
	call(breaker.OutcomeFailure, fast)
	call(breaker.OutcomeSuccess, slow)
	call(breaker.OutcomeSuccess, fast)
	ratios("3 calls, fewer than MinimumCalls", metrics.RatioNotJudged, metrics.RatioNotJudged)
	call(breaker.OutcomeNeutral, fast) // not counted
	ratios("a neutral call", metrics.RatioNotJudged, metrics.RatioNotJudged)
	call(breaker.OutcomeSuccess, fast)
	ratios("4 calls: F, S, ok, ok", 0.25, 0.25)
	call(breaker.OutcomeSuccess, fast) // the failure leaves the window
	ratios("window S, ok, ok, ok", 0, 0.25)
	call(breaker.OutcomeFailure, slow)
	if s := b.State(); s != breaker.StateClosed {
		t.Fatalf("state %s after a slow failure (ratios 0.25, 0.25), want closed", s)
	}
	ratios("window ok, ok, ok, slow F", 0.25, 0.25)
	call(breaker.OutcomeSuccess, slow) // slow-call ratio 0.5 reaches the threshold: trips
	if s := b.State(); s != breaker.StateOpen {
		t.Fatalf("state %s, want open: slow-call ratio 0.5 reached SlowCallRateThreshold", s)
	}
	ratios("open", metrics.RatioNotJudged, metrics.RatioNotJudged)

	b.Reset()
	for range 4 {
		call(breaker.OutcomeSuccess, fast)
	}
	ratios("reset, 4 good calls", 0, 0)
}
