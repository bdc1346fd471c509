package metrics_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/breaker/breakertest"
	"github.com/floodgate-go/floodgate/metrics"
	"github.com/floodgate-go/floodgate/middleware"
	"github.com/floodgate-go/floodgate/partner"
	"github.com/floodgate-go/floodgate/retryqueue"
)

var errDown = errors.New("partner down")

// gathered is one Gather, by family name.
type gathered map[string]*dto.MetricFamily

func gather(t *testing.T, reg *prometheus.Registry) gathered {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	g := gathered{}
	for _, f := range fams {
		g[f.GetName()] = f
	}
	return g
}

// get returns the value of the series of name whose labels are exactly
// labels (name, value pairs), and whether it exists.
func (g gathered) get(name string, labels ...string) (float64, bool) {
	for _, m := range g[name].GetMetric() {
		if len(m.GetLabel())*2 != len(labels) {
			continue
		}
		match := true
		for i, lp := range m.GetLabel() { // sorted by name, as given
			if lp.GetName() != labels[2*i] || lp.GetValue() != labels[2*i+1] {
				match = false
			}
		}
		if match {
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue(), true
			case m.Gauge != nil:
				return m.Gauge.GetValue(), true
			case m.Histogram != nil:
				return float64(m.Histogram.GetSampleCount()), true
			}
		}
	}
	return 0, false
}

// partners returns every value of the partner label, with its number of
// series.
func (g gathered) partners() map[string]int {
	out := map[string]int{}
	for _, f := range g {
		for _, m := range f.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == metrics.LabelPartner {
					out[lp.GetValue()]++
				}
			}
		}
	}
	return out
}

type want struct {
	name   string
	labels []string
	v      float64
}

func (g gathered) expect(t *testing.T, stage string, ws ...want) {
	t.Helper()
	for _, w := range ws {
		got, ok := g.get(w.name, w.labels...)
		if !ok {
			t.Errorf("%s: %s%v: no such series", stage, w.name, w.labels)
		} else if got != w.v {
			t.Errorf("%s: %s%v = %v, want %v", stage, w.name, w.labels, got, w.v)
		}
	}
}

func (g gathered) absent(t *testing.T, stage string, partnerLabel string) {
	t.Helper()
	if n := g.partners()[partnerLabel]; n != 0 {
		t.Errorf("%s: %d series with partner=%q, want none", stage, n, partnerLabel)
	}
}

// TestPartnerLabelsCapAndForget: the first MaxPartners partners get a
// label of their own, the next are counted under _other, Forget deletes a
// partner's every series and frees its label for the next partner.
func TestPartnerLabelsCapAndForget(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg, metrics.Options{MaxPartners: 2})
	if err != nil {
		t.Fatal(err)
	}
	ev := func(p string, a middleware.Action, reason string) middleware.Event {
		return middleware.Event{Partner: p, Action: a, Reason: reason}
	}
	m.ObserveEvent(middleware.Event{Partner: "a", Action: middleware.Delivered, Admitted: true, Latency: time.Millisecond})
	m.ObserveEvent(ev("b", middleware.Diverted, "open"))
	m.ObserveEvent(ev("b", middleware.Nacked, ""))
	m.ObserveEvent(ev("c", middleware.Diverted, "open")) // no room: _other
	m.ObserveEvent(ev("d", middleware.DeadLettered, "permanent: 400"))
	m.ObserveEvent(ev("", middleware.DeadLettered, "no-partner"))
	if n := m.Partners(); n != 2 {
		t.Errorf("Partners() = %d, want 2", n)
	}
	g := gather(t, reg)
	g.expect(t, "capped",
		want{metrics.NameCalls, []string{"outcome", "success", "partner", "a"}, 1},
		want{metrics.NameDeliveryLatency, []string{"outcome", "success", "partner", "a"}, 1},
		want{metrics.NameDeliveryLatency, []string{"outcome", "failure", "partner", "a"}, 0}, // present from the start
		want{metrics.NameCalls, []string{"outcome", "rejected", "partner", "b"}, 1},
		want{metrics.NameDiverted, []string{"partner", "b", "reason", "open"}, 1},
		want{metrics.NameCalls, []string{"outcome", "rejected", "partner", "_other"}, 1},
		want{metrics.NameDiverted, []string{"partner", "_other", "reason", "open"}, 1},
		want{metrics.NameDeadLettered, []string{"partner", "_other", "reason", "permanent"}, 1},
		want{metrics.NameDeadLettered, []string{"partner", "_none", "reason", "no-partner"}, 1},
	)
	g.absent(t, "capped", "c")
	g.absent(t, "capped", "d")
	if err := testutil.CollectAndCompare(m, strings.NewReader(`
# HELP floodgate_nacked_total Messages nacked because their diversion or dead letter was not confirmed, or their context was done before admission; the broker redelivers them.
# TYPE floodgate_nacked_total counter
floodgate_nacked_total{partner="_none"} 0
floodgate_nacked_total{partner="_other"} 0
floodgate_nacked_total{partner="a"} 0
floodgate_nacked_total{partner="b"} 1
`), metrics.NameNacked); err != nil {
		t.Error(err)
	}

	m.Forget("a")
	m.Forget("c")  // under _other: nothing of its own
	m.Forget("")   // no partner: nothing
	m.Forget("zz") // never seen
	g = gather(t, reg)
	g.absent(t, "forgotten", "a")
	if n := m.Partners(); n != 1 {
		t.Errorf("Partners() after Forget = %d, want 1", n)
	}
	m.ObserveEvent(ev("c", middleware.Diverted, "open")) // a's label is free: c takes it
	g = gather(t, reg)
	g.expect(t, "after forget",
		want{metrics.NameCalls, []string{"outcome", "rejected", "partner", "c"}, 1},
		want{metrics.NameCalls, []string{"outcome", "rejected", "partner", "_other"}, 1}, // unchanged
		want{metrics.NameCalls, []string{"outcome", "rejected", "partner", "b"}, 1},
	)
	m.ObserveEvent(ev("a", middleware.Diverted, "open")) // a is back, but there is no room now
	gather(t, reg).absent(t, "full again", "a")
	lint(t, reg)
}

// TestHostilePartnerKeys: whatever bytes a partner key has, its label is
// a valid label value (scrapes never fail or panic), distinct partners
// have distinct labels, and a partner keyed "_other" or "_none" is not
// mixed with the reserved series.
func TestHostilePartnerKeys(t *testing.T) {
	keys := []string{
		"\xff\xfe\xfd", strings.Repeat("k", 4096), strings.Repeat("\xff", 4096), strings.Repeat("é", 2048),
		".", "*", ">", " a b ", "a.b", "a_b", "a=2Eb", "_other", "_none", "=", "\x00", "ACME-RETAIL",
	}
	r, err := partner.New(partner.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg, metrics.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.WatchRegistry(r); err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		p, err := r.Get(k)
		if err != nil {
			t.Fatalf("Get(%q): %v", k, err)
		}
		m.ObserveEvent(middleware.Event{Partner: p.Token(), Action: middleware.Diverted, Reason: "open"})
	}
	// A caller's own Event.Partner that is no token: labelled by its token.
	m.ObserveEvent(middleware.Event{Partner: "\xff\xfe\xfd", Action: middleware.Diverted, Reason: "open"})

	g := gather(t, reg) // fails on an invalid label value
	labels := g.partners()
	for l := range labels {
		if !utf8.ValidString(l) || len(l) == 0 || len(l) > partner.MaxTokenLen {
			t.Errorf("partner label %q: not a short valid UTF-8 value", l)
		}
	}
	if got, want := len(labels), len(keys)+2; got != want { // + _other, _none
		t.Errorf("%d partner labels, want %d (one per key, _other, _none): %v", got, want, labels)
	}
	for _, k := range keys {
		l := partner.Token(k)
		if k == "_other" || k == "_none" {
			l = "=5F" + k[1:]
		}
		w := 1.0
		if k == "\xff\xfe\xfd" {
			w = 2
		}
		g.expect(t, "key "+strings.ToValidUTF8(k[:min(len(k), 8)], "?"),
			want{metrics.NameDiverted, []string{"partner", l, "reason", "open"}, w},
			want{metrics.NameBreakerState, []string{"partner", l, "state", "closed"}, 1},
		)
	}
	g.expect(t, "reserved",
		want{metrics.NameDiverted, []string{"partner", "_other", "reason", "open"}, 0},
		want{metrics.NameDiverted, []string{"partner", "_none", "reason", "open"}, 0},
	)
	lint(t, reg)
}

// TestWatchRegistry: breaker gauges and transitions per partner from a
// partner registry, the partners beyond the cap summed under _other, and
// eviction (OnEvict -> Forget) deleting a partner's series.
func TestWatchRegistry(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg, metrics.Options{MaxPartners: 2})
	if err != nil {
		t.Fatal(err)
	}
	clk := breakertest.NewClock(time.Time{})
	r, err := partner.New(partner.Config{
		Template: partner.PartnerConfig{Breaker: breaker.Config{
			WindowSize: 4, MinimumCalls: 4, DisableJitter: true, BaseOpenWindow: time.Second,
			SuccessesToClose: 1, ProbeConcurrency: 1,
		}},
		Override: func(key string, c *partner.PartnerConfig) {
			if key == "b" {
				c.Breaker.SlowCallDuration = 100 * time.Millisecond
			}
		},
		IdleAfter: time.Minute, SweepInterval: time.Second, Clock: clk,
		OnTransition: m.ObserveTransition,
		OnEvict:      func(p *partner.Partner) { m.Forget(p.Token()) },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := m.WatchRegistry(r); err != nil {
		t.Fatal(err)
	}
	if err := m.WatchRegistry(r); !errors.Is(err, metrics.ErrAlreadyWatching) {
		t.Errorf("second WatchRegistry: %v", err)
	}
	call := func(key string, err error, latency time.Duration) {
		t.Helper()
		p, l, aerr := r.Acquire(key)
		if aerr != nil {
			t.Fatalf("Acquire(%s): %v", key, aerr)
		}
		l.Done(err)
		o := breaker.OutcomeSuccess
		if err != nil {
			o = breaker.OutcomeFailure
		}
		m.ObserveEvent(middleware.Event{Partner: p.Token(), Action: middleware.Delivered, Admitted: true, Outcome: o, Latency: latency})
	}
	// a and b take the two labels; c and d are counted under _other.
	for range 4 {
		call("a", errDown, time.Millisecond) // trips a
	}
	call("b", nil, 200*time.Millisecond) // slow for b's own threshold
	call("c", nil, 200*time.Millisecond) // not slow for the default 5 s
	call("d", nil, time.Millisecond)
	if err := r.With("c", func(p *partner.Partner) { p.Breaker().ForceOpen() }); err != nil {
		t.Fatal(err)
	}

	g := gather(t, reg)
	g.expect(t, "open",
		want{metrics.NameBreakerState, []string{"partner", "a", "state", "open"}, 1},
		want{metrics.NameBreakerState, []string{"partner", "a", "state", "closed"}, 0},
		want{metrics.NameBreakerState, []string{"partner", "b", "state", "closed"}, 1},
		want{metrics.NameBreakerState, []string{"partner", "_other", "state", "open"}, 1},   // c
		want{metrics.NameBreakerState, []string{"partner", "_other", "state", "closed"}, 1}, // d
		want{metrics.NameBreakerState, []string{"partner", "_other", "state", "half-open"}, 0},
		want{metrics.NameProbesInFlight, []string{"partner", "_other"}, 0},
		want{metrics.NameAdmittedRatio, []string{"partner", "a"}, 0},
		want{metrics.NameAdmittedRatio, []string{"partner", "b"}, 1},
		want{metrics.NameOpenWindow, []string{"partner", "a"}, 1},
		want{metrics.NameConsecutiveTrips, []string{"partner", "a"}, 1},
		want{metrics.NameStaleResults, []string{"partner", "a"}, 0},
		want{metrics.NameTransitions, []string{"from", "closed", "partner", "a", "to", "open"}, 1},
		want{metrics.NameTransitions, []string{"from", "closed", "partner", "b", "to", "open"}, 0},
		want{metrics.NameTransitions, []string{"from", "closed", "partner", "_other", "to", "open"}, 1}, // c forced
		want{metrics.NameCalls, []string{"outcome", "failure", "partner", "a"}, 4},
		want{metrics.NameCalls, []string{"outcome", "slow", "partner", "b"}, 1},
		want{metrics.NameCalls, []string{"outcome", "success", "partner", "_other"}, 2},
	)
	for _, name := range []string{metrics.NameAdmittedRatio, metrics.NameOpenWindow, metrics.NameConsecutiveTrips, metrics.NameStaleResults} {
		if _, ok := g.get(name, "partner", "_other"); ok {
			t.Errorf("%s{partner=_other} exported: not a meaningful sum", name)
		}
	}
	lint(t, reg)

	// a recovers; a and b go idle and are evicted; c (forced open) stays.
	clk.Advance(time.Second)
	call("a", nil, time.Millisecond) // the probe closes a
	r.Sweep()
	clk.Advance(2 * time.Minute)
	if n := r.Sweep(); n != 3 { // a, b, d
		t.Fatalf("evicted %d, want 3 (a, b, d)", n)
	}
	g = gather(t, reg)
	g.absent(t, "evicted", "a")
	g.absent(t, "evicted", "b")
	// c takes a freed label at this scrape; nothing is left for _other.
	g = gather(t, reg)
	g.expect(t, "after eviction",
		want{metrics.NameBreakerState, []string{"partner", "c", "state", "open"}, 1},
		want{metrics.NameCalls, []string{"outcome", "success", "partner", "c"}, 0}, // counted under _other before
	)
	if _, ok := g.get(metrics.NameBreakerState, "partner", "_other", "state", "open"); ok {
		t.Error("_other state exported with no partner beyond the cap")
	}
	if n := m.Partners(); n != 1 {
		t.Errorf("Partners() = %d, want 1 (c)", n)
	}
}

// TestWatchDrains: drain samples per partner, summed per label; beyond the
// cap the backlog and rate are summed under _other and the counters left
// out.
func TestWatchDrains(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg, metrics.Options{MaxPartners: 1})
	if err != nil {
		t.Fatal(err)
	}
	err = m.WatchDrains(func(ctx context.Context) []metrics.DrainSample {
		if _, ok := ctx.Deadline(); !ok {
			t.Error("drain source called without a deadline")
		}
		return []metrics.DrainSample{
			{Partner: "x", Stats: retryqueue.DrainStats{Drained: 3, Deferred: 1}, Rate: 5, Backlog: 7, HasBacklog: true},
			{Partner: "x", Stats: retryqueue.DrainStats{Drained: 2}, Rate: 1, Backlog: 1, HasBacklog: true},
			{Partner: "y", Stats: retryqueue.DrainStats{Drained: 9}, Rate: 2, Backlog: 4, HasBacklog: true},
			{Partner: "z", Rate: 3}, // backlog unknown
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	g := gather(t, reg)
	g.expect(t, "drains",
		want{metrics.NameDrained, []string{"partner", "x", "result", "drained"}, 5},
		want{metrics.NameDrained, []string{"partner", "x", "result", "deferred"}, 1},
		want{metrics.NameRetryBacklog, []string{"partner", "x"}, 8},
		want{metrics.NameDrainRateLimit, []string{"partner", "x"}, 6},
		want{metrics.NameRetryBacklog, []string{"partner", "_other"}, 4},
		want{metrics.NameDrainRateLimit, []string{"partner", "_other"}, 5},
	)
	if _, ok := g.get(metrics.NameDrained, "partner", "_other", "result", "drained"); ok {
		t.Error("drained_total{partner=_other} exported: a sum over a changing set is no counter")
	}
	lint(t, reg)
}

// Issue 15: a drainer of many partners reports only the drains running
// now; a labelled partner without one keeps its drain series (backlog and
// rate limit 0, counters as last exported, 0 before its first drain), so
// dashboard queries have series before and between drains. Forget drops
// them.
func TestWatchDrainsBetweenDrains(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg, metrics.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var running []metrics.DrainSample
	set := func(s ...metrics.DrainSample) { mu.Lock(); running = s; mu.Unlock() }
	if err := m.WatchDrains(func(context.Context) []metrics.DrainSample {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(running)
	}); err != nil {
		t.Fatal(err)
	}
	m.ObserveEvent(middleware.Event{Partner: "acme", Action: middleware.Diverted, Reason: "open"})
	gather(t, reg).expect(t, "before any drain",
		want{metrics.NameDrained, []string{"partner", "acme", "result", "drained"}, 0},
		want{metrics.NameRetryBacklog, []string{"partner", "acme"}, 0},
		want{metrics.NameDrainRateLimit, []string{"partner", "acme"}, 0},
	)
	set(metrics.DrainSample{Partner: "acme", Stats: retryqueue.DrainStats{Drained: 4, Redelivered: 1}, Rate: 5, Backlog: 3, HasBacklog: true})
	gather(t, reg).expect(t, "draining",
		want{metrics.NameDrained, []string{"partner", "acme", "result", "drained"}, 4},
		want{metrics.NameRetryBacklog, []string{"partner", "acme"}, 3},
		want{metrics.NameDrainRateLimit, []string{"partner", "acme"}, 5},
	)
	set()
	gather(t, reg).expect(t, "drain stopped",
		want{metrics.NameDrained, []string{"partner", "acme", "result", "drained"}, 4},
		want{metrics.NameDrained, []string{"partner", "acme", "result", "redelivered"}, 1},
		want{metrics.NameRetryBacklog, []string{"partner", "acme"}, 0},
		want{metrics.NameDrainRateLimit, []string{"partner", "acme"}, 0},
	)
	m.Forget("acme")
	g := gather(t, reg)
	g.absent(t, "forgotten", "acme")
	lint(t, reg)
}
