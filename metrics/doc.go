// Package metrics exports floodgate's state as Prometheus metrics, built on
// github.com/prometheus/client_golang. Nothing is registered unless asked:
// [New] registers one collector for one breaker on a registry the caller
// passes, and the Watch methods attach the sources it reads at scrape time.
// The breaker, middleware and retryqueue packages do not import Prometheus;
// this package reads them through their public API ([breaker.Breaker.Snapshot],
// [breaker.Breaker.AddListener], [middleware.Event], [retryqueue.Queue.Stats],
// [retryqueue.Drainer.Stats] and [retryqueue.Drainer.Backlog]).
//
// # Wiring
//
//	reg := prometheus.NewRegistry()
//	m, err := metrics.New(reg, metrics.Options{Breaker: b.Name()})
//	// middleware.Config{..., OnEvent: m.ObserveEvent}
//	m.WatchBreaker(b)
//	m.WatchQueue(q)
//	m.WatchDrainer(d)
//	addr, err := metrics.Start(ctx, ":9090", reg) // serves /metrics until ctx is done
//
// Every method of a nil *Metrics does nothing, so a program can keep the
// calls in place and leave metrics off.
//
// # Metrics
//
// Every name has the floodgate_ prefix and every series a breaker label
// (a constant label, [Options.Breaker]); units are seconds and counters end
// in _total. [Names] lists them; the table is in the project's README.
//
// Read at scrape time from [breaker.Breaker.Snapshot] (after WatchBreaker):
//
//	floodgate_breaker_state{state}               gauge, 1 for the current state, 0 for the others
//	floodgate_breaker_probes_in_flight           gauge
//	floodgate_breaker_admitted_share             gauge, 0..1 share of offered calls admitted
//	floodgate_breaker_open_window_seconds        gauge, the current (or last) jittered open window
//	floodgate_breaker_consecutive_trips          gauge, trips since the last clean close
//	floodgate_breaker_trips_total                counter
//	floodgate_breaker_stale_results_total        counter, results discarded as from an earlier generation
//
// Counted by a breaker listener (after WatchBreaker):
//
//	floodgate_breaker_transitions_total{from,to} counter
//
// Counted from [middleware.Event] by [Metrics.ObserveEvent] (live and drained
// calls alike, since the drainer runs the same guarded handler):
//
//	floodgate_calls_total{outcome}               counter: success, failure, slow, neutral, rejected
//	floodgate_delivery_latency_seconds           histogram of admitted calls' handler time
//	floodgate_diverted_total{reason}             counter: open, probe-limit, ramp, failure, ordering, not-attempted
//	floodgate_dead_lettered_total{reason}        counter: permanent, malformed, max-attempts, max-age, too-large, max-deliver, other
//	floodgate_nacked_total                       counter: outcomes that could not be made durable
//
// Read at scrape time from the retry queue and the drainer:
//
//	floodgate_retry_published_total{kind}        counter: diverted, dead-lettered (confirmed by JetStream)
//	floodgate_retry_publish_errors_total         counter
//	floodgate_retry_backlog_messages             gauge, the drainer consumer's pending + ack-pending
//	floodgate_drained_total{result}              counter: drained, redelivered, deferred, dead-lettered, ack-error
//	floodgate_drain_rate_limit                   gauge, the drain's rate limit in messages per second
//
// A call's outcome follows what the middleware reported to the breaker
// ([middleware.Event.Outcome]): a delivered call is a success, or slow when
// its latency exceeded the slow-call threshold; an admitted call that
// failed is a failure or, by the breaker's Classifier, neutral (or even a
// success); a permanent error (dead-lettered), a call cut short by shutdown
// and a call the handler refused before contacting the partner (diverted
// for not-attempted, [middleware.ErrNotAttempted]) are neutral; a call the
// breaker refused (diverted for open, probe-limit or ramp, or a drained
// message turned away and left in the backlog) is rejected; only the
// diverted ones count in floodgate_diverted_total. Messages diverted for
// ordering, dead-lettered as malformed, or nacked because their context was
// done before admission never asked the breaker and are not calls.
//
// The queue's own counters (floodgate_retry_published_total) include the
// diversions [retryqueue.Queue.Divert] turned into dead letters
// (max-attempts, max-age), which the middleware reports as diverted.
package metrics
