package metrics

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/middleware"
	"github.com/floodgate-go/floodgate/retryqueue"
)

// Label names.
const (
	LabelBreaker = "breaker"
	LabelState   = "state"
	LabelFrom    = "from"
	LabelTo      = "to"
	LabelOutcome = "outcome"
	LabelReason  = "reason"
	LabelKind    = "kind"
	LabelResult  = "result"
)

// Values of the outcome label of floodgate_calls_total.
const (
	OutcomeSuccess  = "success"
	OutcomeFailure  = "failure"
	OutcomeSlow     = "slow"
	OutcomeNeutral  = "neutral"
	OutcomeRejected = "rejected"
)

// Metric names. [Names] returns them all.
const (
	NameBreakerState       = "floodgate_breaker_state"
	NameTransitions        = "floodgate_breaker_transitions_total"
	NameProbesInFlight     = "floodgate_breaker_probes_in_flight"
	NameAdmittedShare      = "floodgate_breaker_admitted_share"
	NameOpenWindow         = "floodgate_breaker_open_window_seconds"
	NameConsecutiveTrips   = "floodgate_breaker_consecutive_trips"
	NameTrips              = "floodgate_breaker_trips_total"
	NameStaleResults       = "floodgate_breaker_stale_results_total"
	NameCalls              = "floodgate_calls_total"
	NameDeliveryLatency    = "floodgate_delivery_latency_seconds"
	NameDiverted           = "floodgate_diverted_total"
	NameDeadLettered       = "floodgate_dead_lettered_total"
	NameNacked             = "floodgate_nacked_total"
	NameRetryPublished     = "floodgate_retry_published_total"
	NameRetryPublishErrors = "floodgate_retry_publish_errors_total"
	NameRetryBacklog       = "floodgate_retry_backlog_messages"
	NameDrained            = "floodgate_drained_total"
	NameDrainRateLimit     = "floodgate_drain_rate_limit"
)

// Names returns every metric name a [Metrics] can export, sorted. Histogram
// names are given without their _bucket, _sum and _count suffixes.
func Names() []string {
	names := []string{
		NameAdmittedShare, NameBreakerState, NameConsecutiveTrips, NameOpenWindow,
		NameProbesInFlight, NameStaleResults, NameTransitions, NameTrips,
		NameCalls, NameDeadLettered, NameDeliveryLatency, NameDiverted,
		NameDrainRateLimit, NameDrained, NameNacked, NameRetryBacklog,
		NameRetryPublishErrors, NameRetryPublished,
	}
	slices.Sort(names)
	return names
}

// Metrics exports one breaker's metrics, with its retry queue and drainer.
// It is a [prometheus.Collector] registered by [New]; it describes every
// metric from the start and collects those whose source is present.
//
// Its methods are safe for concurrent use. Every method of a nil *Metrics
// does nothing (the Watch methods return nil), so metrics can be left off
// without changing the wiring.
type Metrics struct {
	opts Options
	slow atomic.Int64 // slow-call threshold in ns; 0 = none

	calls, diverted, dead, transitions *prometheus.CounterVec
	nacked                             prometheus.Counter
	outcome                            map[string]prometheus.Counter // by outcome label, bound in New
	latency                            prometheus.Histogram

	state, probes, share, window, consecutive, trips, stale *prometheus.Desc
	published, publishErrors, backlog, drained, drainRate   *prometheus.Desc

	mu      sync.Mutex
	breaker *breaker.Breaker
	queue   *retryqueue.Queue
	drainer *retryqueue.Drainer
}

// New builds the metrics for one breaker and registers them on reg. It
// returns an error wrapping [ErrInvalidOptions] for bad opts, or the
// registry's error (e.g. [prometheus.AlreadyRegisteredError] when reg
// already holds metrics for the same breaker label).
func New(reg prometheus.Registerer, opts Options) (*Metrics, error) {
	if reg == nil {
		return nil, fmt.Errorf("invalid config: %w: a registerer is required", ErrInvalidOptions)
	}
	if err := opts.Validate(); err != nil {
		return nil, fmt.Errorf("invalid config: %w", err)
	}
	opts = opts.clone()
	opts.setDefaults()
	cl := prometheus.Labels{LabelBreaker: opts.Breaker}
	desc := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, cl)
	}
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: cl}, labels)
	}
	m := &Metrics{
		opts: opts,
		calls: counter(NameCalls, "Calls through the middleware by outcome, as reported to the breaker: success, failure, slow (a success slower than the slow-call threshold), neutral (permanent error, shutdown, not attempted, or neutral by the breaker's classifier), rejected (not admitted by the breaker).",
			LabelOutcome),
		diverted: counter(NameDiverted, "Messages diverted to the retry queue by reason: open, probe-limit, ramp, failure, ordering, not-attempted (refused by the handler before the partner was contacted).",
			LabelReason),
		dead: counter(NameDeadLettered, "Messages the middleware dead-lettered by reason: permanent, malformed, max-attempts, max-age, too-large, max-deliver, other.",
			LabelReason),
		transitions: counter(NameTransitions, "Breaker state transitions by from and to state.",
			LabelFrom, LabelTo),
		nacked: prometheus.NewCounter(prometheus.CounterOpts{Name: NameNacked, ConstLabels: cl,
			Help: "Messages nacked because their diversion or dead letter was not confirmed; the broker redelivers them."}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: NameDeliveryLatency, ConstLabels: cl,
			Help:    "Handler time of admitted calls (delivery latency), in seconds.",
			Buckets: opts.LatencyBuckets}),

		state:       desc(NameBreakerState, "Breaker state: 1 for the current state, 0 for the others.", LabelState),
		probes:      desc(NameProbesInFlight, "Half-open admissions not yet reported."),
		share:       desc(NameAdmittedShare, "Share of offered calls the breaker admits, 0 to 1: 1 closed, 0 open or probing, the ramp or adaptive share in between."),
		window:      desc(NameOpenWindow, "The current (or last) jittered open window, in seconds."),
		consecutive: desc(NameConsecutiveTrips, "Trips since the last clean close (the open-window ladder's position)."),
		trips:       desc(NameTrips, "Trips since the breaker was created."),
		stale:       desc(NameStaleResults, "Results discarded because their call was admitted in an earlier state period (generation)."),

		published:     desc(NameRetryPublished, "Publishes to the retry or dead-letter stream confirmed by JetStream, by kind: diverted, dead-lettered.", LabelKind),
		publishErrors: desc(NameRetryPublishErrors, "Diversions and dead letters JetStream did not confirm (the source was nacked)."),
		backlog:       desc(NameRetryBacklog, "Retry backlog: messages on the drainer's consumer not yet delivered plus delivered and not yet acked."),
		drained:       desc(NameDrained, "Messages the drainer handled, by result: drained (acked after the handler), redelivered (handler failed, nakked), deferred (not yet eligible, or turned away by the breaker), dead-lettered (malformed), ack-error.", LabelResult),
		drainRate:     desc(NameDrainRateLimit, "The drain's rate limit, in messages per second."),
	}
	m.slow.Store(int64(opts.SlowCallDuration))
	m.outcome = map[string]prometheus.Counter{}
	for _, o := range []string{OutcomeSuccess, OutcomeFailure, OutcomeSlow, OutcomeNeutral, OutcomeRejected} {
		m.outcome[o] = m.calls.WithLabelValues(o)
	}
	for _, r := range []retryqueue.Reason{retryqueue.ReasonOpen, retryqueue.ReasonProbeLimit, retryqueue.ReasonRamp,
		retryqueue.ReasonFailure, retryqueue.ReasonOrdering, retryqueue.ReasonNotAttempted} {
		m.diverted.WithLabelValues(string(r))
	}
	for _, r := range []string{retryqueue.DeadReasonPermanent, retryqueue.DeadReasonMalformed,
		retryqueue.DeadReasonMaxAttempts, retryqueue.DeadReasonMaxAge, retryqueue.DeadReasonTooLarge, middleware.DeadReasonMaxDeliver} {
		m.dead.WithLabelValues(r)
	}
	if err := reg.Register(m); err != nil {
		return nil, err
	}
	return m, nil
}

// Describe sends every metric's descriptor. It implements
// [prometheus.Collector].
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	m.calls.Describe(ch)
	m.diverted.Describe(ch)
	m.dead.Describe(ch)
	m.transitions.Describe(ch)
	m.nacked.Describe(ch)
	m.latency.Describe(ch)
	for _, d := range []*prometheus.Desc{m.state, m.probes, m.share, m.window, m.consecutive, m.trips, m.stale,
		m.published, m.publishErrors, m.backlog, m.drained, m.drainRate} {
		ch <- d
	}
}

// Collect sends the counters and, for each watched source, its values read
// now. It implements [prometheus.Collector]. Reading the backlog is a
// JetStream request bounded by [Options.ScrapeTimeout]; when it fails the
// backlog series is left out of this scrape.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	m.calls.Collect(ch)
	m.diverted.Collect(ch)
	m.dead.Collect(ch)
	m.transitions.Collect(ch)
	m.nacked.Collect(ch)
	m.latency.Collect(ch)

	m.mu.Lock()
	b, q, d := m.breaker, m.queue, m.drainer
	m.mu.Unlock()
	gauge := func(desc *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, v, labels...)
	}
	counter := func(desc *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.CounterValue, v, labels...)
	}
	if b != nil {
		s := b.Snapshot()
		for _, st := range []breaker.State{breaker.StateClosed, breaker.StateOpen, breaker.StateHalfOpen} {
			gauge(m.state, bool01(s.State == st), st.String())
		}
		gauge(m.probes, float64(s.ProbesInFlight))
		gauge(m.share, s.AdmittedShare)
		gauge(m.window, s.OpenWindow.Seconds())
		gauge(m.consecutive, float64(s.ConsecutiveTrips))
		counter(m.trips, float64(s.Trips))
		counter(m.stale, float64(s.Stale))
	}
	if q != nil {
		s := q.Stats()
		counter(m.published, float64(s.Diverted), "diverted")
		counter(m.published, float64(s.DeadLettered), "dead-lettered")
		counter(m.publishErrors, float64(s.PublishErrors))
	}
	if d != nil {
		s := d.Stats()
		counter(m.drained, float64(s.Drained), "drained")
		counter(m.drained, float64(s.Redelivered), "redelivered")
		counter(m.drained, float64(s.Deferred), "deferred")
		counter(m.drained, float64(s.DeadLettered), "dead-lettered")
		counter(m.drained, float64(s.AckErrors), "ack-error")
		gauge(m.drainRate, d.Rate())
		ctx, cancel := context.WithTimeout(context.Background(), m.opts.ScrapeTimeout)
		n, err := d.Backlog(ctx)
		cancel()
		if err == nil {
			gauge(m.backlog, float64(n))
		}
	}
}

func bool01(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// ObserveEvent counts one middleware event; use it as (or call it from)
// [middleware.Config.OnEvent]. It does not block: it only increments
// counters and observes the latency histogram. See the package documentation for
// how an event maps to an outcome.
func (m *Metrics) ObserveEvent(ev middleware.Event) {
	if m == nil {
		return
	}
	if ev.Admitted {
		m.latency.Observe(ev.Latency.Seconds())
	}
	if ev.Admitted {
		m.outcome[m.admitted(ev)].Inc()
	}
	switch ev.Action {
	case middleware.Diverted:
		switch r := retryqueue.Reason(ev.Reason); {
		case ev.Admitted:
		case r == retryqueue.ReasonOpen, r == retryqueue.ReasonProbeLimit, r == retryqueue.ReasonRamp:
			m.outcome[OutcomeRejected].Inc()
		}
		m.diverted.WithLabelValues(divertReason(ev.Reason)).Inc()
	case middleware.DeadLettered:
		m.dead.WithLabelValues(deadReason(ev.Reason)).Inc()
	case middleware.Nacked:
		m.nacked.Inc()
	case middleware.Deferred: // a drained message turned away, left in place
		m.outcome[OutcomeRejected].Inc()
	}
}

// admitted is the outcome label of an admitted call: what the middleware
// reported to the breaker ([middleware.Event.Outcome]), a success above the
// slow-call threshold counted as slow.
func (m *Metrics) admitted(ev middleware.Event) string {
	switch ev.Outcome {
	case breaker.OutcomeFailure:
		return OutcomeFailure
	case breaker.OutcomeNeutral:
		return OutcomeNeutral
	}
	if slow := time.Duration(m.slow.Load()); slow > 0 && ev.Latency > slow {
		return OutcomeSlow
	}
	return OutcomeSuccess
}

// divertReason keeps the reason label to the known diversion reasons.
func divertReason(r string) string {
	if retryqueue.Reason(r).Valid() {
		return r
	}
	return "other"
}

// deadReason maps a dead-letter reason to its bounded category: the
// DeadReason constants the middleware and queue set, or "other" for a
// reason of the caller's own; a "category: detail" reason maps to its
// category, so error texts never become label values.
func deadReason(r string) string {
	cat, _, _ := strings.Cut(r, ":")
	switch cat = strings.TrimSpace(cat); cat {
	case retryqueue.DeadReasonPermanent, retryqueue.DeadReasonMalformed,
		retryqueue.DeadReasonMaxAttempts, retryqueue.DeadReasonMaxAge, retryqueue.DeadReasonTooLarge, middleware.DeadReasonMaxDeliver:
		return cat
	}
	return "other"
}

// WatchBreaker makes every scrape read b's [breaker.Snapshot] (state, probes
// in flight, admitted share, open window, trips, stale results) and counts
// b's transitions from now on, through a listener that only increments a
// counter. Unless [Options.SlowCallDuration] was set, b's SlowCallDuration
// becomes the slow-call threshold of [Metrics.ObserveEvent]. It returns
// [ErrAlreadyWatching] if a breaker is already watched.
func (m *Metrics) WatchBreaker(b *breaker.Breaker) error {
	if m == nil {
		return nil
	}
	if b == nil {
		return errors.New("metrics: WatchBreaker: nil breaker")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.breaker != nil {
		return ErrAlreadyWatching
	}
	m.breaker = b
	if m.opts.SlowCallDuration == 0 {
		m.slow.Store(int64(b.Config().SlowCallDuration))
	}
	for _, p := range [][2]breaker.State{
		{breaker.StateClosed, breaker.StateOpen}, {breaker.StateOpen, breaker.StateHalfOpen},
		{breaker.StateHalfOpen, breaker.StateOpen}, {breaker.StateHalfOpen, breaker.StateClosed},
	} {
		m.transitions.WithLabelValues(p[0].String(), p[1].String())
	}
	b.AddListener(func(t breaker.Transition) {
		m.transitions.WithLabelValues(t.From.String(), t.To.String()).Inc()
	})
	return nil
}

// WatchQueue makes every scrape read q's [retryqueue.QueueStats]. It returns
// [ErrAlreadyWatching] if a queue is already watched.
func (m *Metrics) WatchQueue(q *retryqueue.Queue) error {
	if m == nil {
		return nil
	}
	if q == nil {
		return errors.New("metrics: WatchQueue: nil queue")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.queue != nil {
		return ErrAlreadyWatching
	}
	m.queue = q
	return nil
}

// WatchDrainer makes every scrape read d's [retryqueue.DrainStats], its rate
// limit, and its backlog ([retryqueue.Drainer.Backlog], one JetStream
// request bounded by [Options.ScrapeTimeout]). It returns
// [ErrAlreadyWatching] if a drainer is already watched.
func (m *Metrics) WatchDrainer(d *retryqueue.Drainer) error {
	if m == nil {
		return nil
	}
	if d == nil {
		return errors.New("metrics: WatchDrainer: nil drainer")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.drainer != nil {
		return ErrAlreadyWatching
	}
	m.drainer = d
	return nil
}

// DescName returns the fully-qualified metric name of d.
func DescName(d *prometheus.Desc) string {
	s := d.String() // Desc{fqName: "name", help: ...}
	_, rest, ok := strings.Cut(s, `fqName: "`)
	if !ok {
		return ""
	}
	name, _, _ := strings.Cut(rest, `"`)
	return name
}
