package metrics_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/breaker/breakertest"
	"github.com/floodgate-go/floodgate/deliver"
	"github.com/floodgate-go/floodgate/internal/natstest"
	"github.com/floodgate-go/floodgate/jsq"
	"github.com/floodgate-go/floodgate/metrics"
	"github.com/floodgate-go/floodgate/middleware"
	"github.com/floodgate-go/floodgate/partner"
	"github.com/floodgate-go/floodgate/retryqueue"
)

var (
	errPartner503 = &deliver.Error{Kind: deliver.ErrRetryable, Op: "as2 send", StatusCode: 503}
	errRejected   = &deliver.Error{Kind: deliver.ErrPermanent, Op: "as2 send", StatusCode: 400}
)

// served returns metrics on a new registry, served on a loopback port
// for the test's life, and the server's URL.
func served(t *testing.T) (*metrics.Metrics, *prometheus.Registry, string) {
	t.Helper()
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg, metrics.Options{})
	if err != nil {
		t.Fatal(err)
	}
	addr, err := metrics.Start(t.Context(), "127.0.0.1:0", reg)
	if err != nil {
		t.Fatal(err)
	}
	return m, reg, "http://" + addr.String()
}

// scrape GETs /metrics from srv and parses the text exposition.
func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url + metrics.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET /metrics: %s: %s", resp.Status, body)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return fams
}

// value returns the value of the series of family name whose labels
// include want (name, value pairs).
func value(t *testing.T, fams map[string]*dto.MetricFamily, name string, want ...string) float64 {
	t.Helper()
	f := fams[name]
	if f == nil {
		t.Fatalf("metric %s not exported", name)
	}
	for _, m := range f.GetMetric() {
		labels := map[string]string{}
		for _, lp := range m.GetLabel() {
			labels[lp.GetName()] = lp.GetValue()
		}
		if _, ok := labels["partner"]; !ok && name != metrics.NameRetryPublishErrors {
			t.Fatalf("%s series without a partner label: %v", name, labels)
		}
		match := true
		for i := 0; i+1 < len(want); i += 2 {
			if labels[want[i]] != want[i+1] {
				match = false
			}
		}
		if !match {
			continue
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue()
		case m.Gauge != nil:
			return m.Gauge.GetValue()
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount())
		}
	}
	t.Fatalf("metric %s has no series with labels %v", name, want)
	return 0
}

type check struct {
	name   string
	labels []string
	want   float64
}

// expect checks each value, on the series of partner (but for the
// publish errors, which have no partner label).
func expect(t *testing.T, fams map[string]*dto.MetricFamily, stage, partner string, checks []check) {
	t.Helper()
	for _, c := range checks {
		labels := c.labels
		if c.name != metrics.NameRetryPublishErrors {
			labels = append([]string{"partner", partner}, labels...)
		}
		if got := value(t, fams, c.name, labels...); got != c.want {
			t.Errorf("%s: %s%v = %v, want %v", stage, c.name, labels, got, c.want)
		}
	}
}

// TestScrapeAfterTripAndRecovery drives a real breaker (fake clock) through
// the real middleware onto real JetStream streams, scripted: two good calls,
// a slow one, two failures (trip), three messages while open, a half-open
// probe during which a second call is refused for the probe limit, a second
// probe (close) and a permanent error. It scrapes a real HTTP /metrics
// endpoint while open and after recovery and checks names, labels and values.
func TestScrapeAfterTripAndRecovery(t *testing.T) {
	ctx := context.Background()
	url := natstest.URL(t)
	nc := natstest.Conn(t, url)
	js := natstest.JetStream(t, nc)
	clock := breakertest.NewClock(time.Time{})
	b, err := breaker.New(breaker.Config{
		Name: "northwind", Clock: clock,
		WindowSize: 4, MinimumCalls: 4, FailureRateThreshold: 0.5,
		SlowCallDuration: 100 * time.Millisecond,
		BaseOpenWindow:   time.Second, DisableJitter: true,
		ProbeConcurrency: 1, SuccessesToClose: 2,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Stop)
	pub, err := jsq.NewPublisher(jsq.PublisherConfig{Conn: nc, PublishTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	qcfg := retryqueue.Config{Publisher: pub, Service: "svc", RetryTopic: natstest.Name(t, "retry"), DeadLetterTopic: natstest.Name(t, "dead")}
	natstest.DeleteStreams(t, js, qcfg.RetryTopic, qcfg.DeadLetterTopic)
	if err := retryqueue.Provision(ctx, js, qcfg); err != nil {
		t.Fatal(err)
	}
	q, err := retryqueue.New(qcfg)
	if err != nil {
		t.Fatal(err)
	}

	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg, metrics.Options{})
	if err != nil {
		t.Fatal(err)
	}
	onEvent := func(ev middleware.Event) {
		if ev.Partner == "" { // a middleware that does not fill Event.Partner yet
			ev.Partner = partner.Token(q.Partner())
		}
		m.ObserveEvent(ev)
	}
	mw, err := middleware.New(middleware.Config{Breaker: b, Queue: q, Timeout: 5 * time.Second, OnEvent: onEvent})
	if err != nil {
		t.Fatal(err)
	}
	drainer, err := retryqueue.NewDrainer(retryqueue.DrainerConfig{
		JetStream: js, Queue: q, Handler: func(*message.Message) ([]*message.Message, error) { return nil, nil },
		Gate: middleware.DrainGate(b), Rate: 25,
	})
	if err != nil {
		t.Fatal(err)
	}
	// The drainer's durable consumer, as Run would create it; the drainer is
	// not run, so the backlog stays what was diverted.
	if _, err := js.CreateOrUpdateConsumer(ctx, drainer.Stream(), drainer.ConsumerConfig()); err != nil {
		t.Fatal(err)
	}
	for _, err := range []error{m.WatchBreaker(q.Partner(), b), m.WatchQueue(q), m.WatchDrainer(q.Partner(), drainer)} {
		if err != nil {
			t.Fatal(err)
		}
	}
	srv := httptest.NewServer(metrics.Handler(reg))
	t.Cleanup(srv.Close)

	send := func(h message.HandlerFunc) {
		t.Helper()
		msg := message.NewMessage(uuid.NewString(), []byte("ISA*00*...~"))
		msg.Metadata.Set(retryqueue.MetaOriginalTopic, "edi_orders")
		if _, err := mw(h)(msg); err != nil {
			t.Fatalf("handler: %v", err)
		}
	}
	ok := func(*message.Message) ([]*message.Message, error) { return nil, nil }
	slow := func(*message.Message) ([]*message.Message, error) {
		clock.Advance(200 * time.Millisecond) // latency on the breaker's clock
		return nil, nil
	}
	fail := func(*message.Message) ([]*message.Message, error) { return nil, errPartner503 }
	permanent := func(*message.Message) ([]*message.Message, error) { return nil, errRejected }

	send(ok)
	send(ok)
	send(slow)
	send(fail)
	send(fail) // window s, slow, f, f: failure rate 0.5 trips
	if s := b.State(); s != breaker.StateOpen {
		t.Fatalf("state = %s, want open", s)
	}
	send(ok)
	send(ok)
	send(ok) // three rejected while open

	fams := scrape(t, srv.URL)
	expect(t, fams, "open", "default", []check{
		{"floodgate_breaker_state", []string{"state", "open"}, 1},
		{"floodgate_breaker_state", []string{"state", "closed"}, 0},
		{"floodgate_breaker_state", []string{"state", "half-open"}, 0},
		{"floodgate_breaker_admitted_ratio", nil, 0},
		{"floodgate_breaker_open_window_seconds", nil, 1},
		{"floodgate_breaker_consecutive_trips", nil, 1},
		{"floodgate_breaker_transitions_total", []string{"from", "closed", "to", "open"}, 1},
		{"floodgate_calls_total", []string{"outcome", "rejected"}, 3},
		{"floodgate_retry_backlog_messages", nil, 5},
		{"floodgate_breaker_failure_ratio", nil, metrics.RatioNotJudged},
		{"floodgate_breaker_slow_call_ratio", nil, metrics.RatioNotJudged},
	})

	clock.Advance(time.Second) // the open window ends: half-open on the timer
	if s := b.State(); s != breaker.StateHalfOpen {
		t.Fatalf("state = %s, want half-open", s)
	}
	send(func(msg *message.Message) ([]*message.Message, error) {
		if got := value(t, scrape(t, srv.URL), "floodgate_breaker_probes_in_flight", "partner", "default"); got != 1 {
			t.Errorf("probes in flight during a probe = %v, want 1", got)
		}
		send(ok) // the probe cap is 1: refused with the probe limit
		return nil, nil
	})
	send(ok) // second good probe closes
	if s := b.State(); s != breaker.StateClosed {
		t.Fatalf("state = %s, want closed", s)
	}
	send(permanent)

	fams = scrape(t, srv.URL)
	expect(t, fams, "recovered", "default", []check{
		{"floodgate_breaker_state", []string{"state", "closed"}, 1},
		{"floodgate_breaker_state", []string{"state", "open"}, 0},
		{"floodgate_breaker_state", []string{"state", "half-open"}, 0},
		{"floodgate_breaker_admitted_ratio", nil, 1},
		{"floodgate_breaker_probes_in_flight", nil, 0},
		{"floodgate_breaker_open_window_seconds", nil, 1},
		{"floodgate_breaker_consecutive_trips", nil, 0},
		{"floodgate_breaker_stale_results_total", nil, 0},
		{"floodgate_breaker_transitions_total", []string{"from", "closed", "to", "open"}, 1},
		{"floodgate_breaker_transitions_total", []string{"from", "open", "to", "half-open"}, 1},
		{"floodgate_breaker_transitions_total", []string{"from", "half-open", "to", "closed"}, 1},
		{"floodgate_breaker_transitions_total", []string{"from", "half-open", "to", "open"}, 0},
		{"floodgate_calls_total", []string{"outcome", "success"}, 4},
		{"floodgate_calls_total", []string{"outcome", "slow"}, 1},
		{"floodgate_calls_total", []string{"outcome", "failure"}, 2},
		{"floodgate_calls_total", []string{"outcome", "neutral"}, 1},
		{"floodgate_calls_total", []string{"outcome", "rejected"}, 4},
		{"floodgate_diverted_total", []string{"reason", "failure"}, 2},
		{"floodgate_diverted_total", []string{"reason", "open"}, 3},
		{"floodgate_diverted_total", []string{"reason", "probe-limit"}, 1},
		{"floodgate_diverted_total", []string{"reason", "ramp"}, 0},
		{"floodgate_dead_lettered_total", []string{"reason", "permanent"}, 1},
		{"floodgate_dead_lettered_total", []string{"reason", "malformed"}, 0},
		{"floodgate_dead_lettered_total", []string{"reason", "max-attempts"}, 0}, // present before the first
		{"floodgate_dead_lettered_total", []string{"reason", "max-age"}, 0},
		{"floodgate_dead_lettered_total", []string{"reason", "too-large"}, 0},
		{"floodgate_dead_lettered_total", []string{"reason", "max-deliver"}, 0},
		{"floodgate_diverted_total", []string{"reason", "not-attempted"}, 0},
		{"floodgate_nacked_total", nil, 0},
		// admitted calls, by outcome
		{"floodgate_delivery_latency_seconds", []string{"outcome", "success"}, 4},
		{"floodgate_delivery_latency_seconds", []string{"outcome", "slow"}, 1},
		{"floodgate_delivery_latency_seconds", []string{"outcome", "failure"}, 2},
		{"floodgate_delivery_latency_seconds", []string{"outcome", "neutral"}, 1},
		// closed again with an empty window (the permanent error is neutral)
		{"floodgate_breaker_failure_ratio", nil, metrics.RatioNotJudged},
		{"floodgate_breaker_slow_call_ratio", nil, metrics.RatioNotJudged},
		{"floodgate_retry_publish_errors_total", nil, 0},
		{"floodgate_retry_backlog_messages", nil, 6},
		{"floodgate_drained_total", []string{"result", "drained"}, 0},
		{"floodgate_drain_rate_limit_messages_per_second", nil, 25},
	})
	var h *dto.Histogram
	for _, s := range fams["floodgate_delivery_latency_seconds"].GetMetric() {
		if l := s.GetLabel(); l[0].GetValue() == "slow" && l[1].GetValue() == "default" { // outcome, partner
			h = s.GetHistogram()
		}
	}
	if h.GetSampleSum() != 0.2 {
		t.Errorf("slow calls' latency sum = %v s, want 0.2 (the one slow call)", h.GetSampleSum())
	}
	for _, bk := range h.GetBucket() {
		want := uint64(0)
		if bk.GetUpperBound() >= 0.25 {
			want = 1
		}
		if bk.GetCumulativeCount() != want {
			t.Errorf("latency bucket le=%v: %d, want %d", bk.GetUpperBound(), bk.GetCumulativeCount(), want)
		}
	}

	var got []string
	for name, f := range fams {
		got = append(got, name)
		if !strings.HasPrefix(name, "floodgate_") {
			t.Errorf("metric %s lacks the floodgate_ prefix", name)
		}
		if f.GetType() == dto.MetricType_COUNTER && !strings.HasSuffix(name, "_total") {
			t.Errorf("counter %s lacks the _total suffix", name)
		}
	}
	sort.Strings(got)
	if want := metrics.Names(); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("exported families\n %v\nwant Names()\n %v", got, want)
	}
	lint(t, reg) // every family present
}

// lint runs promlint (client_golang's testutil/promlint: units, _total,
// help, names) over everything reg exports and fails on any problem.
func lint(t *testing.T, reg *prometheus.Registry) {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	problems, err := promlint.NewWithMetricFamilies(fams).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
}

// TestEveryNameIsDescribed: Names lists exactly the descriptors the
// collector registers, so the deploy tests can trust it.
func TestEveryNameIsDescribed(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg, metrics.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan *prometheus.Desc, 100)
	m.Describe(ch)
	close(ch)
	var got []string
	for d := range ch {
		got = append(got, metrics.DescName(d))
	}
	sort.Strings(got)
	if strings.Join(got, " ") != strings.Join(metrics.Names(), " ") {
		t.Errorf("described %v\nNames() %v", got, metrics.Names())
	}
}

func TestOptionsAndRegistration(t *testing.T) {
	for _, tc := range []struct {
		opts  metrics.Options
		field string
	}{
		{metrics.Options{Service: "\xff"}, "Service"},
		{metrics.Options{MaxPartners: -1}, "MaxPartners"},
		{metrics.Options{MaxPartners: metrics.MaxPartnersLimit + 1}, "MaxPartners"},
		{metrics.Options{SlowCallDuration: -1}, "SlowCallDuration"},
		{metrics.Options{ScrapeTimeout: -time.Second}, "ScrapeTimeout"},
		{metrics.Options{LatencyBuckets: []float64{}}, "LatencyBuckets"},
		{metrics.Options{LatencyBuckets: []float64{0.1, 0.1}}, "LatencyBuckets[1]"},
		{metrics.Options{LatencyBuckets: []float64{-1}}, "LatencyBuckets[0]"},
	} {
		_, err := metrics.New(prometheus.NewRegistry(), tc.opts)
		if !errors.Is(err, metrics.ErrInvalidOptions) || !strings.Contains(err.Error(), tc.field) || !strings.HasPrefix(err.Error(), "invalid config: ") {
			t.Errorf("%+v: err %v, want invalid config naming %s", tc.opts, err, tc.field)
		}
	}

	reg := prometheus.NewRegistry()
	if _, err := metrics.New(reg, metrics.Options{Service: "orders"}); err != nil {
		t.Fatal(err)
	}
	if _, err := metrics.New(reg, metrics.Options{Service: "invoices"}); err != nil {
		t.Fatalf("a second service on one registry: %v", err)
	}
	var are prometheus.AlreadyRegisteredError
	if _, err := metrics.New(reg, metrics.Options{Service: "orders"}); !errors.As(err, &are) {
		t.Errorf("same service label twice: %v, want AlreadyRegisteredError", err)
	}

	b, err := breaker.New(breaker.Config{Name: "a"})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Stop()
	m, _ := metrics.New(prometheus.NewRegistry(), metrics.Options{})
	if err := m.WatchBreaker("a", b); err != nil {
		t.Fatal(err)
	}
	if err := m.WatchBreaker("a", b); !errors.Is(err, metrics.ErrAlreadyWatching) {
		t.Errorf("second WatchBreaker of one partner: %v", err)
	}
	if err := m.WatchBreaker("b", b); err != nil {
		t.Errorf("a breaker of another partner: %v", err)
	}
	r, err := partner.New(partner.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := m.WatchRegistry(r); !errors.Is(err, metrics.ErrAlreadyWatching) {
		t.Errorf("WatchRegistry beside WatchBreaker: %v", err)
	}

	var off *metrics.Metrics // metrics left off: every call is a no-op
	off.ObserveEvent(middleware.Event{Action: middleware.Delivered})
	off.ObserveTransition(nil, breaker.Transition{})
	off.Forget("a")
	if off.WatchBreaker("a", b) != nil || off.WatchQueue(nil) != nil || off.WatchDrainer("a", nil) != nil ||
		off.WatchRegistry(nil) != nil || off.WatchDrains(nil) != nil || off.Partners() != 0 {
		t.Error("nil *Metrics: Watch returned an error")
	}
}

// TestServe serves a registry on a real listener and stops with ctx.
func TestServe(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg, metrics.Options{})
	if err != nil {
		t.Fatal(err)
	}
	m.ObserveEvent(middleware.Event{Action: middleware.Diverted, Reason: "open"})
	m.ObserveEvent(middleware.Event{Action: middleware.Diverted, Reason: "ordering"})                                                       // never asked the breaker
	m.ObserveEvent(middleware.Event{Action: middleware.Nacked, Admitted: true, Outcome: breaker.OutcomeFailure, Err: errors.New("no ack")}) // handler failed, diversion not confirmed
	m.ObserveEvent(middleware.Event{Action: middleware.DeadLettered, Reason: "malformed: attempt \"x\""})                                   // not a call
	m.ObserveEvent(middleware.Event{Action: middleware.Deferred, Reason: "probe-limit"})                                                    // drained, turned away in place
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- metrics.ServeListener(ctx, ln, reg) }()
	fams := scrape(t, "http://"+ln.Addr().String())
	expect(t, fams, "events", metrics.PartnerNone, []check{
		{"floodgate_calls_total", []string{"outcome", "rejected"}, 2},
		{"floodgate_calls_total", []string{"outcome", "failure"}, 1},
		{"floodgate_calls_total", []string{"outcome", "neutral"}, 0},
		{"floodgate_diverted_total", []string{"reason", "ordering"}, 1},
		{"floodgate_diverted_total", []string{"reason", "probe-limit"}, 0},
		{"floodgate_dead_lettered_total", []string{"reason", "malformed"}, 1},
		{"floodgate_nacked_total", nil, 1},
	})
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Serve after cancel: %v", err)
	}
	if err := metrics.Serve(context.Background(), "256.0.0.1:bad", reg); err == nil {
		t.Error("Serve on a bad address: nil error")
	}

	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	addr, err := metrics.Start(ctx2, "127.0.0.1:0", reg)
	if err != nil {
		t.Fatal(err)
	}
	if got := value(t, scrape(t, "http://"+addr.String()), "floodgate_diverted_total", "partner", metrics.PartnerNone, "reason", "open"); got != 1 {
		t.Errorf("Start: diverted{open} = %v, want 1", got)
	}
	if _, err := metrics.Start(ctx2, addr.String(), reg); err == nil {
		t.Error("Start on a busy address: nil error")
	}
}
