package metrics

import (
	"context"
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/partner"
	"github.com/floodgate-go/floodgate/retryqueue"
)

// WatchBreaker makes every scrape read b's [breaker.Snapshot] under the
// partner label of partnerKey ([partner.Token] of it), and counts b's
// transitions from now on, through a listener that only increments a
// counter. Pass the partner key the middleware reports b's events under:
// the retry queue's partner ([retryqueue.Queue.Partner],
// [retryqueue.DefaultPartner] unless configured), so every series of the
// partner shares one label. Unless [Options.SlowCallDuration] is set,
// b's SlowCallDuration is the partner's slow-call threshold.
//
// It is for breakers wired by hand; a [partner.Registry] is watched with
// [Metrics.WatchRegistry] instead, not beside. It returns
// [ErrAlreadyWatching] for a second breaker of one partner, or when a
// registry is watched.
func (m *Metrics) WatchBreaker(partnerKey string, b *breaker.Breaker) error {
	if m == nil {
		return nil
	}
	if b == nil {
		return errors.New("metrics: WatchBreaker: nil breaker")
	}
	token := partner.Token(partnerKey)
	m.wmu.Lock()
	if m.registry != nil || m.breakers[token] != nil {
		m.wmu.Unlock()
		return ErrAlreadyWatching
	}
	m.breakers[token] = b
	m.wmu.Unlock()
	m.labelFor(token, b)
	b.AddListener(func(t breaker.Transition) {
		m.with(token, b, func(s *series) { m.transition(s.label, t) })
	})
	return nil
}

// WatchRegistry makes every scrape read the [breaker.Snapshot] of each
// partner r holds ([partner.Registry.All]), under the partner's label.
// Partners without a label of their own (beyond [Options.MaxPartners]) are
// summed under [PartnerOther] where a sum means something: the state gauge
// (how many partners are in each state) and probes in flight; their
// admitted ratio, open window, consecutive trips and stale results are
// left out. Reading a snapshot takes each breaker's lock briefly: a
// scrape costs O(partners held).
//
// Wire the registry's hooks to the Metrics too: partner.Config.OnTransition
// to [Metrics.ObserveTransition] (transitions are counted there, not
// here) and partner.Config.OnEvict to [Metrics.Forget] of the partner's
// token. It returns [ErrAlreadyWatching] if a registry or a breaker is
// already watched.
func (m *Metrics) WatchRegistry(r *partner.Registry) error {
	if m == nil {
		return nil
	}
	if r == nil {
		return errors.New("metrics: WatchRegistry: nil registry")
	}
	m.wmu.Lock()
	defer m.wmu.Unlock()
	if m.registry != nil || len(m.breakers) > 0 {
		return ErrAlreadyWatching
	}
	m.registry = r
	return nil
}

// WatchQueue makes every scrape read q's [retryqueue.QueueStats]: its
// publish errors (floodgate_retry_publish_errors_total, without a partner
// label: a queue serves every partner of its service). Its confirmed
// publishes are not exported: each one is a diversion or a dead letter,
// counted per partner by [Metrics.ObserveEvent] (or, for the drain's own
// dead letters, by floodgate_drained_total). It returns
// [ErrAlreadyWatching] if a queue is already watched.
func (m *Metrics) WatchQueue(q *retryqueue.Queue) error {
	if m == nil {
		return nil
	}
	if q == nil {
		return errors.New("metrics: WatchQueue: nil queue")
	}
	m.wmu.Lock()
	defer m.wmu.Unlock()
	if m.queue != nil {
		return ErrAlreadyWatching
	}
	m.queue = q
	return nil
}

// DrainSample is one drain's state, read at scrape time by a source
// passed to [Metrics.WatchDrains].
type DrainSample struct {
	// Partner is the token ([partner.Token]) of the partner drained.
	Partner string
	// Stats are the drain's counters since it started.
	Stats retryqueue.DrainStats
	// Rate is the drain's rate limit, in messages per second.
	Rate float64
	// Backlog is the number of messages waiting for the partner, valid
	// when HasBacklog (false when it could not be read).
	Backlog    uint64
	HasBacklog bool
}

// drainSource reads samples; ctx bounds any request it makes.
type drainSource func(ctx context.Context) []DrainSample

// WatchDrainer makes every scrape read d's [retryqueue.DrainStats], its
// rate limit and its backlog ([retryqueue.Drainer.Backlog], one JetStream
// request bounded by [Options.ScrapeTimeout]) under the partner label of
// partnerKey: pass the queue's partner, as to [Metrics.WatchBreaker]. (A
// drainer with AllPartners drains the whole service: its series are then
// under the label of whatever key is passed.) It returns
// [ErrAlreadyWatching] for a second drainer of one partner.
func (m *Metrics) WatchDrainer(partnerKey string, d *retryqueue.Drainer) error {
	if m == nil {
		return nil
	}
	if d == nil {
		return errors.New("metrics: WatchDrainer: nil drainer")
	}
	token := partner.Token(partnerKey)
	m.wmu.Lock()
	defer m.wmu.Unlock()
	if m.drainers[token] {
		return ErrAlreadyWatching
	}
	m.drainers[token] = true
	m.drains = append(m.drains, func(ctx context.Context) []DrainSample {
		s := DrainSample{Partner: token, Stats: d.Stats(), Rate: d.Rate()}
		n, err := d.Backlog(ctx)
		s.Backlog, s.HasBacklog = n, err == nil
		return []DrainSample{s}
	})
	return nil
}

// WatchDrains makes every scrape call read (with a context bounded by
// [Options.ScrapeTimeout]) for the state of drains per partner: the seam
// for a drainer of many partners, which reports the drains running now
// ([retryqueue.PartnerDrainer.Partners]). Samples of one partner are
// summed; partners without a label of their own are summed under
// [PartnerOther] for the backlog and the rate limit, and left out of
// floodgate_drained_total (a sum of counters over a changing set of
// partners is no counter). A partner with a label of its own that no
// source reports has no drain running: its backlog and rate limit are
// exported as 0 and its floodgate_drained_total at the values last
// exported (0 before its first drain), so its series exist before its
// first drain and between drains. (Counts a drain made after the last
// scrape before it stopped are not seen; a new drain's counters start
// from 0, which Prometheus's rate() reads as a counter reset.) read must
// be safe for concurrent use and return promptly. It may be called more
// than once, adding sources.
func (m *Metrics) WatchDrains(read func(ctx context.Context) []DrainSample) error {
	if m == nil {
		return nil
	}
	if read == nil {
		return errors.New("metrics: WatchDrains: nil source")
	}
	m.wmu.Lock()
	defer m.wmu.Unlock()
	m.drains = append(m.drains, read)
	m.partial = true
	return nil
}

// watched is one breaker read at scrape time.
type watched struct {
	token string
	b     *breaker.Breaker
	p     *partner.Partner // nil for WatchBreaker's
}

func (m *Metrics) collectBreakers(ch chan<- prometheus.Metric) {
	m.wmu.Lock()
	var ws []watched
	for tok, b := range m.breakers {
		ws = append(ws, watched{token: tok, b: b})
	}
	r := m.registry
	m.wmu.Unlock()
	if r != nil {
		for p := range r.All() {
			ws = append(ws, watched{token: p.Token(), b: p.Breaker(), p: p})
		}
	}
	gauge := func(desc *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, v, labels...)
	}
	var otherStates [3]int
	otherProbes, others := 0, 0
	for _, w := range ws {
		s := w.b.Snapshot()
		label, ok := m.labelFor(w.token, w.b)
		if ok && w.p != nil && w.p.Evicted() {
			// Evicted while this scrape ran: its OnEvict may have
			// forgotten it before the label was taken again.
			if _, held := r.Lookup(w.p.Key()); !held {
				m.Forget(w.token)
			}
			continue
		}
		if !ok {
			others++
			otherStates[stateIndex(s.State)]++
			otherProbes += s.ProbesInFlight
			continue
		}
		for i, st := range states {
			gauge(m.state, bool01(i == stateIndex(s.State)), label, st.String())
		}
		gauge(m.probes, float64(s.ProbesInFlight), label)
		gauge(m.ratio, s.AdmittedShare, label)
		gauge(m.window, s.OpenWindow.Seconds(), label)
		gauge(m.consecutive, float64(s.ConsecutiveTrips), label)
		ch <- prometheus.MustNewConstMetric(m.stale, prometheus.CounterValue, float64(s.Stale), label)
		fail, slow := windowRatios(s, w.b.Config().MinimumCalls)
		gauge(m.failureRatio, fail, label)
		gauge(m.slowRatio, slow, label)
	}
	if others > 0 {
		for i, st := range states {
			gauge(m.state, float64(otherStates[i]), PartnerOther, st.String())
		}
		gauge(m.probes, float64(otherProbes), PartnerOther)
	}
}

// windowRatios returns the failure and slow-call ratios (0..1) of a
// breaker's sliding window from its snapshot s, as the breaker's trip rule
// judges them against FailureRateThreshold and SlowCallRateThreshold
// (package breaker: Failures/Calls and SlowCalls/Calls of the closed
// window), or [RatioNotJudged] for both when the rule does not judge them:
// s is not closed (forced open included), or the window holds fewer than
// minCalls (the breaker's MinimumCalls) calls. A slow call is one whose
// reported latency exceeded SlowCallDuration; a call reported without a
// latency is never slow.
func windowRatios(s breaker.Snapshot, minCalls int) (failure, slow float64) {
	if s.State != breaker.StateClosed || s.Calls <= 0 || s.Calls < minCalls {
		return RatioNotJudged, RatioNotJudged
	}
	return float64(s.Failures) / float64(s.Calls), float64(s.SlowCalls) / float64(s.Calls)
}

func stateIndex(s breaker.State) int {
	for i, st := range states {
		if st == s {
			return i
		}
	}
	return 0
}

func bool01(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// drainAgg sums the samples of one label.
type drainAgg struct {
	stats      retryqueue.DrainStats
	rate       float64
	backlog    uint64
	hasBacklog bool
	idle       bool // no drain running: counters as last exported
}

func (m *Metrics) collectDrains(ch chan<- prometheus.Metric) {
	m.wmu.Lock()
	srcs := append([]drainSource(nil), m.drains...)
	partial := m.partial
	m.wmu.Unlock()
	if len(srcs) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), m.opts.ScrapeTimeout)
	defer cancel()
	aggs := map[string]*drainAgg{}
	var order []string
	for _, src := range srcs {
		for _, s := range src(ctx) {
			label, ok := m.labelFor(s.Partner, nil)
			if !ok {
				label = PartnerOther
			}
			a := aggs[label]
			if a == nil {
				a = &drainAgg{}
				aggs[label] = a
				order = append(order, label)
			}
			a.stats.Drained += s.Stats.Drained
			a.stats.Redelivered += s.Stats.Redelivered
			a.stats.Deferred += s.Stats.Deferred
			a.stats.DeadLettered += s.Stats.DeadLettered
			a.stats.AckErrors += s.Stats.AckErrors
			a.rate += s.Rate
			if s.HasBacklog {
				a.backlog += s.Backlog
				a.hasBacklog = true
			}
		}
	}
	if partial { // the labelled partners with no drain running
		m.mu.RLock()
		for label := range m.labels {
			if aggs[label] == nil {
				aggs[label] = &drainAgg{hasBacklog: true, idle: true}
				order = append(order, label)
			}
		}
		m.mu.RUnlock()
	}
	m.dmu.Lock()
	defer m.dmu.Unlock()
	for _, label := range order {
		a := aggs[label]
		if a.idle {
			a.stats = m.lastDrain[label]
		} else if label != PartnerOther {
			m.lastDrain[label] = a.stats
		}
		ch <- prometheus.MustNewConstMetric(m.drainRate, prometheus.GaugeValue, a.rate, label)
		if a.hasBacklog {
			ch <- prometheus.MustNewConstMetric(m.backlog, prometheus.GaugeValue, float64(a.backlog), label)
		}
		if label == PartnerOther {
			continue
		}
		for _, c := range []struct {
			result string
			n      uint64
		}{
			{"drained", a.stats.Drained}, {"redelivered", a.stats.Redelivered}, {"deferred", a.stats.Deferred},
			{"dead-lettered", a.stats.DeadLettered}, {"ack-error", a.stats.AckErrors},
		} {
			ch <- prometheus.MustNewConstMetric(m.drained, prometheus.CounterValue, float64(c.n), label, c.result)
		}
	}
}
