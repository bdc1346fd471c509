// Package metrics exports floodgate's state as Prometheus metrics, built on
// github.com/prometheus/client_golang. Nothing is registered unless asked:
// [New] registers one collector on a registry the caller passes, and the
// Watch methods attach the sources it reads at scrape time. The breaker,
// partner, middleware and retryqueue packages do not import Prometheus;
// this package reads them through their public API
// ([breaker.Breaker.Snapshot], [partner.Registry.All], [middleware.Event],
// [retryqueue.Queue.Stats], [retryqueue.Drainer.Stats] and
// [retryqueue.Drainer.Backlog]).
//
// # Wiring
//
// One [Metrics] serves every partner of a service. With a partner registry:
//
//	reg := prometheus.NewRegistry()
//	m, err := metrics.New(reg, metrics.Options{})
//	// partner.Config{..., OnTransition: m.ObserveTransition,
//	//	OnEvict: func(p *partner.Partner) { m.Forget(p.Token()) }}
//	// middleware.Config{..., OnEvent: m.ObserveEvent}
//	m.WatchRegistry(partners)
//	m.WatchQueue(q)
//	addr, err := metrics.Start(ctx, ":9090", reg) // serves /metrics until ctx is done
//
// With one breaker wired by hand, name its partner as the queue does:
//
//	m.WatchBreaker(q.Partner(), b)
//	m.WatchDrainer(q.Partner(), d)
//
// Every method of a nil *Metrics does nothing, so a program can keep the
// calls in place and leave metrics off.
//
// # The partner label
//
// Every series but floodgate_retry_publish_errors_total has a partner
// label: the partner's token ([partner.Token], ASCII, at most 64 bytes, so
// always a valid label value, whatever bytes the key had). Its cardinality
// is bounded: at most [Options.MaxPartners] partners (default 100) have a
// label of their own, taken first come while there is room and freed by
// [Metrics.Forget], which deletes the partner's series (wire it to
// partner.Config.OnEvict). The other partners' events and transitions are
// counted under [PartnerOther] ("_other"); the scrape-time gauges sum them
// there where a sum means something (see [Metrics.WatchRegistry] and
// [Metrics.WatchDrains]). Events of no partner (an empty
// [middleware.Event.Partner]) are under [PartnerNone] ("_none"). Neither
// reserved value counts against the cap. With [Options.Service] every
// series also has a constant service label.
//
// # Metrics
//
// Every name has the floodgate_ prefix; units are seconds, ratios are 0..1,
// rates are per second, and counters end in _total. Each count is exported
// once. [Names] lists them; the table is in the project's README.
//
// Read at scrape time from each partner's [breaker.Snapshot]:
//
//	floodgate_breaker_state{partner,state}                gauge, 1 for the current state, 0 for the others
//	floodgate_breaker_probes_in_flight{partner}           gauge
//	floodgate_breaker_admitted_ratio{partner}             gauge, 0..1 ratio of offered calls admitted
//	floodgate_breaker_open_window_seconds{partner}        gauge, the current (or last) jittered open window
//	floodgate_breaker_consecutive_trips{partner}          gauge, trips since the last clean close
//	floodgate_breaker_stale_results_total{partner}        counter, results discarded as from an earlier generation
//	floodgate_breaker_failure_ratio{partner}              gauge, 0..1 failure ratio of the closed window, -1 while not judged
//	floodgate_breaker_slow_call_ratio{partner}            gauge, 0..1 slow-call ratio of the closed window, -1 while not judged
//
// The two window ratios are what the trip rule compares to the breaker's
// FailureRateThreshold and SlowCallRateThreshold, so an alert on them fires
// before the breaker trips (deploy/prometheus/alerts.yml has examples).
// They are [RatioNotJudged] (-1, as resilience4j reports) while the
// window holds fewer than MinimumCalls calls and while the breaker is not
// closed: the series exist from the first scrape, and a threshold alert
// never fires on too little evidence.
//
// Counted by a transition listener ([Metrics.ObserveTransition], or the
// one [Metrics.WatchBreaker] adds); trips are the transitions to open:
//
//	floodgate_breaker_transitions_total{partner,from,to}  counter
//
// Counted from [middleware.Event] by [Metrics.ObserveEvent] (live and drained
// calls alike, since the drainer runs the same guarded handler):
//
//	floodgate_calls_total{partner,outcome}                counter: success, failure, slow, neutral, rejected
//	floodgate_delivery_latency_seconds{partner,outcome}   histogram of admitted calls' handler time: success, failure, slow, neutral
//	floodgate_diverted_total{partner,reason}              counter: open, probe-limit, ramp, failure, ordering, not-attempted, partner-limit, bulkhead, parked, other
//	floodgate_dead_lettered_total{partner,reason}         counter: permanent, malformed, max-attempts, max-age, too-large, max-deliver, route-mismatch, no-partner, partner-key-too-long, partner-config, metadata-too-large, other
//	floodgate_nacked_total{partner}                       counter: outcomes that could not be made durable
//	floodgate_delivery_warnings_total{partner,reason}     counter: unconfirmed, mdn-unsigned, mic-missing, mic-mismatch, mdn-warning, other
//
// Read at scrape time from the retry queue and the drains:
//
//	floodgate_retry_publish_errors_total                  counter, the queue's publishes JetStream did not confirm
//	floodgate_retry_backlog_messages{partner}             gauge, the drain consumer's pending + ack-pending
//	floodgate_drained_total{partner,result}               counter: drained, redelivered, deferred, dead-lettered, ack-error
//	floodgate_drain_rate_limit_messages_per_second{partner} gauge, the drain's rate limit
//
// A call's outcome follows what the middleware reported to the breaker
// ([middleware.Event.Outcome]): a delivered call is a success, or slow when
// its latency exceeded the partner's slow-call threshold; an admitted call
// that failed is a failure or, by the breaker's Classifier, neutral (or
// even a success); a permanent error (dead-lettered), a call cut short by
// shutdown and a call the handler refused before contacting the partner
// (diverted for not-attempted, [middleware.ErrNotAttempted]) are neutral;
// a call the breaker refused (diverted for open, probe-limit or ramp, or a
// drained message turned away and left in the backlog) is rejected; only
// the diverted ones count in floodgate_diverted_total. Messages diverted
// for ordering, dead-lettered as malformed, or nacked because their
// context was done before admission never asked the breaker and are not
// calls. floodgate_calls_total is the breaker's view of a call,
// floodgate_diverted_total and floodgate_dead_lettered_total the
// message's fate: two dimensions of one event, not one count twice. A
// message delivered with a warning ([middleware.Event.Warning]) is a
// success (or slow) in floodgate_calls_total and counts once more in
// floodgate_delivery_warnings_total, by the warning's reason: the
// Prometheus way is a separate counter rather than another outcome value,
// so sum(floodgate_calls_total) stays the number of calls and "success"
// keeps meaning what the breaker counted.
package metrics
