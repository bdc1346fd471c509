package metrics

import (
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/deliver"
	"github.com/floodgate-go/floodgate/middleware"
	"github.com/floodgate-go/floodgate/partner"
	"github.com/floodgate-go/floodgate/retryqueue"
)

// Label names.
const (
	LabelPartner = "partner"
	LabelService = "service"
	LabelState   = "state"
	LabelFrom    = "from"
	LabelTo      = "to"
	LabelOutcome = "outcome"
	LabelReason  = "reason"
	LabelResult  = "result"
)

// Reserved values of the partner label. No partner token is either: a
// partner whose token is "_other" or "_none" (keys that are those very
// strings) is labelled "=5Fother" or "=5Fnone", which [partner.Token]
// never returns, so labels stay distinct per partner.
const (
	// PartnerOther labels the partners beyond [Options.MaxPartners].
	PartnerOther = "_other"
	// PartnerNone labels events of no partner ([middleware.Event.Partner]
	// empty: a message without a partner key and no default partner).
	PartnerNone = "_none"
)

// Values of the outcome label of floodgate_calls_total and (all but
// OutcomeRejected: a rejected call has no latency)
// floodgate_delivery_latency_seconds.
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
	NameAdmittedRatio      = "floodgate_breaker_admitted_ratio"
	NameOpenWindow         = "floodgate_breaker_open_window_seconds"
	NameConsecutiveTrips   = "floodgate_breaker_consecutive_trips"
	NameStaleResults       = "floodgate_breaker_stale_results_total"
	NameFailureRatio       = "floodgate_breaker_failure_ratio"
	NameSlowCallRatio      = "floodgate_breaker_slow_call_ratio"
	NameCalls              = "floodgate_calls_total"
	NameDeliveryLatency    = "floodgate_delivery_latency_seconds"
	NameDiverted           = "floodgate_diverted_total"
	NameDeadLettered       = "floodgate_dead_lettered_total"
	NameNacked             = "floodgate_nacked_total"
	NameDeliveryWarnings   = "floodgate_delivery_warnings_total"
	NameRetryPublishErrors = "floodgate_retry_publish_errors_total"
	NameRetryBacklog       = "floodgate_retry_backlog_messages"
	NameDrained            = "floodgate_drained_total"
	NameDrainRateLimit     = "floodgate_drain_rate_limit_messages_per_second"
)

// Names returns every metric name a [Metrics] can export, sorted. Histogram
// names are given without their _bucket, _sum and _count suffixes.
func Names() []string {
	names := []string{
		NameAdmittedRatio, NameBreakerState, NameConsecutiveTrips, NameOpenWindow,
		NameProbesInFlight, NameStaleResults, NameTransitions, NameFailureRatio, NameSlowCallRatio,
		NameCalls, NameDeadLettered, NameDeliveryLatency, NameDeliveryWarnings, NameDiverted,
		NameDrainRateLimit, NameDrained, NameNacked, NameRetryBacklog,
		NameRetryPublishErrors, NameAS2AsyncReceipts, NameAS2PendingReceipts,
	}
	slices.Sort(names)
	return names
}

// RatioNotJudged is the value of floodgate_breaker_failure_ratio and
// floodgate_breaker_slow_call_ratio while the breaker does not judge its
// rates: its window holds fewer than the breaker's MinimumCalls calls, or
// it is not closed (open, forced open included, or half-open, whose
// policy judges its own steps). As in resilience4j, whose
// circuit breaker metrics report -1 then; a threshold alert
// (ratio >= x, x > 0) never fires on it.
const RatioNotJudged = -1

var (
	outcomes      = []string{OutcomeSuccess, OutcomeFailure, OutcomeSlow, OutcomeNeutral, OutcomeRejected}
	timedOutcomes = []string{OutcomeSuccess, OutcomeFailure, OutcomeSlow, OutcomeNeutral} // admitted calls
	divertReasons = []string{string(retryqueue.ReasonOpen), string(retryqueue.ReasonProbeLimit), string(retryqueue.ReasonRamp),
		string(retryqueue.ReasonFailure), string(retryqueue.ReasonOrdering), string(retryqueue.ReasonNotAttempted),
		middleware.ReasonPartnerLimit, middleware.ReasonBulkhead, middleware.ReasonParked}
	deadReasons = []string{retryqueue.DeadReasonPermanent, retryqueue.DeadReasonMalformed,
		retryqueue.DeadReasonMaxAttempts, retryqueue.DeadReasonMaxAge, retryqueue.DeadReasonTooLarge, middleware.DeadReasonMaxDeliver,
		retryqueue.DeadReasonMDNTimeout, retryqueue.DeadReasonRoute, middleware.DeadReasonNoPartner, middleware.DeadReasonPartnerKey, middleware.DeadReasonPartnerConfig,
		middleware.DeadReasonMetadataTooLarge}
	warnReasons     = deliver.WarnReasons()
	transitionPairs = [][2]breaker.State{
		{breaker.StateClosed, breaker.StateOpen}, {breaker.StateOpen, breaker.StateHalfOpen},
		{breaker.StateHalfOpen, breaker.StateOpen}, {breaker.StateHalfOpen, breaker.StateClosed},
	}
	states = []breaker.State{breaker.StateClosed, breaker.StateOpen, breaker.StateHalfOpen}
)

// Metrics exports the metrics of many partners: their breakers, the
// middleware's events, the retry queue and the drains, each series under
// a partner label (see the package documentation). It is a
// [prometheus.Collector] registered by [New]; it describes every metric
// from the start and collects those whose source is present.
//
// Its methods are safe for concurrent use. Every method of a nil *Metrics
// does nothing (the Watch methods return nil), so metrics can be left off
// without changing the wiring.
type Metrics struct {
	opts Options

	calls, diverted, dead, transitions, nacked, warnings *prometheus.CounterVec
	latency                                              *prometheus.HistogramVec

	state, probes, ratio, window, consecutive, stale *prometheus.Desc
	failureRatio, slowRatio                          *prometheus.Desc
	publishErrors, backlog, drained, drainRate       *prometheus.Desc
	receipts                                         *as2Receipts // asynchronous AS2 receipts

	// mu guards labels. It is held (for reading) across every update of a
	// partner's counters, and for writing by Forget, so a forgotten
	// partner's series cannot be recreated by an update in flight.
	mu          sync.RWMutex
	labels      map[string]*series // by label, the partners with a label of their own
	other, none *series

	wmu      sync.Mutex                  // guards the sources below
	breakers map[string]*breaker.Breaker // by token (WatchBreaker)
	registry *partner.Registry
	queue    *retryqueue.Queue
	drains   []drainSource
	drainers map[string]bool // tokens of WatchDrainer
	partial  bool            // a WatchDrains source: it reports running drains only

	dmu       sync.Mutex                       // guards lastDrain
	lastDrain map[string]retryqueue.DrainStats // by label, the drain counters last exported
}

// series are the counters of one partner label, bound once.
type series struct {
	label    string
	slow     time.Duration // slow-call threshold; 0 = none
	outcome  map[string]prometheus.Counter
	diverted map[string]prometheus.Counter
	dead     map[string]prometheus.Counter
	nacked   prometheus.Counter
	warnings map[string]prometheus.Counter  // by reason
	latency  map[string]prometheus.Observer // by outcome
}

// New builds the metrics and registers them on reg. It returns an error
// wrapping [ErrInvalidOptions] for bad opts, or the registry's error (e.g.
// [prometheus.AlreadyRegisteredError] when reg already holds a Metrics with
// the same [Options.Service]).
func New(reg prometheus.Registerer, opts Options) (*Metrics, error) {
	if reg == nil {
		return nil, errorf("invalid config: %w: a registerer is required", ErrInvalidOptions)
	}
	if err := opts.Validate(); err != nil {
		return nil, errorf("invalid config: %w", err)
	}
	opts = opts.clone()
	opts.setDefaults()
	var cl prometheus.Labels
	if opts.Service != "" {
		cl = prometheus.Labels{LabelService: opts.Service}
	}
	desc := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, append([]string{LabelPartner}, labels...), cl)
	}
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: cl}, append([]string{LabelPartner}, labels...))
	}
	m := &Metrics{
		opts: opts,
		calls: counter(NameCalls, "Calls through the middleware by partner and outcome, as reported to the breaker: success, failure, slow (a success slower than the slow-call threshold), neutral (permanent error, shutdown, not attempted, or neutral by the breaker's classifier), rejected (not admitted by the breaker).",
			LabelOutcome),
		diverted: counter(NameDiverted, "Messages diverted to the retry queue, confirmed by JetStream, by partner and reason: open, probe-limit, ramp, failure, ordering, not-attempted (refused before the partner was contacted), partner-limit, bulkhead, parked (the partner parked: its breaker forced open).",
			LabelReason),
		dead: counter(NameDeadLettered, "Messages the middleware dead-lettered, confirmed by JetStream, by partner and reason: permanent, malformed, max-attempts, max-age, too-large, max-deliver, other.",
			LabelReason),
		transitions: counter(NameTransitions, "Breaker state transitions by partner, from and to state; trips are the transitions to open.",
			LabelFrom, LabelTo),
		warnings: counter(NameDeliveryWarnings, "Messages delivered with a warning (a deliver.Warning: acked and a success for the breaker, so also in floodgate_calls_total as success or slow), by partner and the warning's reason: unconfirmed, mdn-unsigned, mic-missing, mic-mismatch, mdn-warning, other.",
			LabelReason),
		nacked: counter(NameNacked, "Messages nacked because their diversion or dead letter was not confirmed, or their context was done before admission; the broker redelivers them."),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: NameDeliveryLatency, ConstLabels: cl,
			Help:    "Handler time of admitted calls (delivery latency) by partner and outcome (success, failure, slow, neutral, as in floodgate_calls_total), in seconds.",
			Buckets: opts.LatencyBuckets}, []string{LabelPartner, LabelOutcome}),

		state:        desc(NameBreakerState, "Breaker state: 1 for the partner's current state, 0 for the others; for partner=\"_other\", the number of unlabelled partners in each state.", LabelState),
		probes:       desc(NameProbesInFlight, "Half-open admissions not yet reported."),
		ratio:        desc(NameAdmittedRatio, "Ratio of offered calls the breaker admits, 0 to 1: 1 closed, 0 open or probing, the ramp or adaptive share in between."),
		window:       desc(NameOpenWindow, "The current (or last) jittered open window, in seconds."),
		consecutive:  desc(NameConsecutiveTrips, "Trips since the last clean close (the open-window ladder's position)."),
		stale:        desc(NameStaleResults, "Results discarded because their call was admitted in an earlier state period (generation)."),
		failureRatio: desc(NameFailureRatio, "Failure ratio of the closed breaker's sliding window, 0 to 1, as the trip rule compares it to FailureRateThreshold; -1 while not judged (fewer than MinimumCalls calls, or not closed)."),
		slowRatio:    desc(NameSlowCallRatio, "Slow-call ratio of the closed breaker's sliding window, 0 to 1 (calls slower than SlowCallDuration), as the trip rule compares it to SlowCallRateThreshold; -1 while not judged (fewer than MinimumCalls calls, or not closed)."),

		publishErrors: prometheus.NewDesc(NameRetryPublishErrors, "Diversions and dead letters of the retry queue that JetStream did not confirm (the source was nacked).", nil, cl),
		backlog:       desc(NameRetryBacklog, "Retry backlog: messages on the drain's consumer not yet delivered plus delivered and not yet acked."),
		drained:       desc(NameDrained, "Messages the drain handled, by partner and result: drained (acked after the handler), redelivered (handler failed, nakked), deferred (not yet eligible, or turned away by the breaker), dead-lettered (malformed), ack-error.", LabelResult),
		drainRate:     desc(NameDrainRateLimit, "The drain's rate limit, in messages per second."),

		labels:   map[string]*series{},
		breakers: map[string]*breaker.Breaker{},
		drainers: map[string]bool{},

		lastDrain: map[string]retryqueue.DrainStats{},
		receipts:  newAS2Receipts(cl),
	}
	m.other = m.newSeries(PartnerOther, m.defaultSlow())
	m.none = m.newSeries(PartnerNone, m.defaultSlow())
	if err := reg.Register(m); err != nil {
		return nil, err
	}
	return m, nil
}

// newSeries binds the counters of label, creating every series of the
// known label values at zero (so rate() sees the first increment).
func (m *Metrics) newSeries(label string, slow time.Duration) *series {
	s := &series{label: label, slow: slow,
		outcome: map[string]prometheus.Counter{}, diverted: map[string]prometheus.Counter{}, dead: map[string]prometheus.Counter{},
		warnings: map[string]prometheus.Counter{}, nacked: m.nacked.WithLabelValues(label), latency: map[string]prometheus.Observer{}}
	for _, o := range outcomes {
		s.outcome[o] = m.calls.WithLabelValues(label, o)
	}
	for _, o := range timedOutcomes {
		s.latency[o] = m.latency.WithLabelValues(label, o)
	}
	for _, r := range slices.Concat(divertReasons, []string{reasonOther}) {
		s.diverted[r] = m.diverted.WithLabelValues(label, r)
	}
	for _, r := range slices.Concat(deadReasons, []string{reasonOther}) {
		s.dead[r] = m.dead.WithLabelValues(label, r)
	}
	for _, r := range slices.Concat(warnReasons, []string{reasonOther}) {
		s.warnings[r] = m.warnings.WithLabelValues(label, r)
	}
	for _, p := range transitionPairs {
		m.transitions.WithLabelValues(label, p[0].String(), p[1].String())
	}
	return s
}

// Describe sends every metric's descriptor. It implements
// [prometheus.Collector].
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	m.calls.Describe(ch)
	m.diverted.Describe(ch)
	m.dead.Describe(ch)
	m.transitions.Describe(ch)
	m.nacked.Describe(ch)
	m.warnings.Describe(ch)
	m.latency.Describe(ch)
	for _, d := range []*prometheus.Desc{m.state, m.probes, m.ratio, m.window, m.consecutive, m.stale,
		m.failureRatio, m.slowRatio, m.publishErrors, m.backlog, m.drained, m.drainRate} {
		ch <- d
	}
	m.receipts.describe(ch)
}

// Collect reads the watched sources, then sends their values and the
// counters. It implements [prometheus.Collector]. A partner met for the
// first time while there is room takes its label here. Reading a backlog
// is a JetStream request bounded by [Options.ScrapeTimeout]; when it fails
// the backlog series is left out of this scrape.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	m.collectBreakers(ch)
	m.collectDrains(ch)
	m.wmu.Lock()
	q := m.queue
	m.wmu.Unlock()
	if q != nil {
		ch <- prometheus.MustNewConstMetric(m.publishErrors, prometheus.CounterValue, float64(q.Stats().PublishErrors))
	}
	m.calls.Collect(ch)
	m.diverted.Collect(ch)
	m.dead.Collect(ch)
	m.transitions.Collect(ch)
	m.nacked.Collect(ch)
	m.warnings.Collect(ch)
	m.latency.Collect(ch)
	m.receipts.collect(ch)
}

// defaultSlow is the slow-call threshold of a partner whose breaker the
// Metrics does not know.
func (m *Metrics) defaultSlow() time.Duration {
	if m.opts.SlowCallDuration > 0 {
		return m.opts.SlowCallDuration
	}
	return breaker.DefaultSlowCallDuration
}

// slowOf is the slow-call threshold of a partner whose breaker is b (nil
// if unknown).
func (m *Metrics) slowOf(b *breaker.Breaker) time.Duration {
	if m.opts.SlowCallDuration > 0 || b == nil {
		return m.defaultSlow()
	}
	return b.Config().SlowCallDuration
}

// labelOf is the partner label of token: the token itself, PartnerNone for
// "", an escaped form for a token equal to a reserved value, and, for a
// string that is no token (a caller's own Event.Partner), its token, so
// the label is always a valid label value of at most partner.MaxTokenLen
// bytes.
func labelOf(token string) string {
	switch {
	case token == "":
		return PartnerNone
	case token == PartnerOther, token == PartnerNone:
		return "=5F" + token[1:]
	case !isToken(token):
		return labelOf(partner.Token(token))
	}
	return token
}

// isToken reports whether s could be returned by partner.Token.
func isToken(s string) bool {
	if len(s) == 0 || len(s) > partner.MaxTokenLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '=') {
			return false
		}
	}
	return true
}

// with runs fn with the series of token under the read lock: the
// partner's own, claimed now if there is room, else the PartnerOther one.
// b is the partner's breaker if the caller has it (for the slow-call
// threshold of a new label).
func (m *Metrics) with(token string, b *breaker.Breaker, fn func(*series)) {
	label := labelOf(token)
	m.mu.RLock()
	s := m.lookupLocked(label)
	if s == nil && len(m.labels) < m.opts.MaxPartners {
		m.mu.RUnlock()
		m.claim(label, token, b)
		m.mu.RLock()
		s = m.lookupLocked(label)
	}
	if s == nil {
		s = m.other
	}
	fn(s)
	m.mu.RUnlock()
}

// labelFor returns the label of token, claimed now if there is room, and
// false when the partner is counted under PartnerOther.
func (m *Metrics) labelFor(token string, b *breaker.Breaker) (string, bool) {
	var label string
	ok := false
	m.with(token, b, func(s *series) { label, ok = s.label, s != m.other })
	return label, ok
}

// lookupLocked requires mu held.
func (m *Metrics) lookupLocked(label string) *series {
	if label == PartnerNone {
		return m.none
	}
	return m.labels[label]
}

// claim gives label its series if there is still room. It finds the
// partner's breaker first (without the lock) for its slow-call threshold.
func (m *Metrics) claim(label, token string, b *breaker.Breaker) {
	if b == nil {
		b = m.findBreaker(token)
	}
	slow := m.slowOf(b)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.labels[label] == nil && len(m.labels) < m.opts.MaxPartners {
		m.labels[label] = m.newSeries(label, slow)
	}
}

// findBreaker returns the breaker of the partner of token among the
// watched sources, or nil.
func (m *Metrics) findBreaker(token string) *breaker.Breaker {
	m.wmu.Lock()
	b, r := m.breakers[token], m.registry
	m.wmu.Unlock()
	if b != nil || r == nil || !isToken(token) {
		return b
	}
	if !partner.IsHashed(token) {
		if key, err := partner.Decode(token); err == nil {
			if p, ok := r.Lookup(key); ok {
				return p.Breaker()
			}
		}
		return nil
	}
	for p := range r.All() { // a hashed token: once per label claimed
		if p.Token() == token {
			return p.Breaker()
		}
	}
	return nil
}

// Forget deletes every series of the partner of token and frees its label
// for another partner; use it as (or call it from) partner.Config.OnEvict
// with [partner.Partner.Token]. A partner counted under PartnerOther has
// no series of its own: Forget does nothing for it, nor for the empty
// token. The partner's next event, transition or scrape creates its
// series afresh (counters from zero) if there is room then.
func (m *Metrics) Forget(token string) {
	if m == nil || token == "" {
		return
	}
	label := labelOf(token)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.labels[label] == nil {
		return
	}
	delete(m.labels, label)
	match := prometheus.Labels{LabelPartner: label}
	m.calls.DeletePartialMatch(match)
	m.diverted.DeletePartialMatch(match)
	m.dead.DeletePartialMatch(match)
	m.transitions.DeletePartialMatch(match)
	m.nacked.DeletePartialMatch(match)
	m.warnings.DeletePartialMatch(match)
	m.latency.DeletePartialMatch(match)
	m.dmu.Lock()
	delete(m.lastDrain, label)
	m.dmu.Unlock()
}

// Partners returns the number of partners with a label of their own (at
// most [Options.MaxPartners]).
func (m *Metrics) Partners() int {
	if m == nil {
		return 0
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	return len(m.labels)
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
