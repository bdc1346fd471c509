// Package sim is a deterministic recovery simulator: it runs the real
// [breaker.Breaker] in front of a simulated dependency that fails and
// recovers, and measures how each half-open strategy of the design notes
// (summarised in the repository's docs/design.md) treats it. It reproduces the notes'
// experiments side by side and lets a user try their own dependency's
// numbers before choosing settings. The command "floodgate sim" prints and
// plots its results.
//
// # Model
//
// Time is virtual, in nanoseconds, in a discrete-event simulation: offered
// calls, call completions and the breaker's own timers are events in one
// queue, run in time order on one goroutine. The queue is the breaker's
// [breaker.TimerClock], so the breaker leaves the open state, expires probes
// and steps its ramp exactly at their deadlines, as it does on the wall
// clock. A [Scenario.Seed] seeds the arrivals, the latencies and the
// breakers' jitter: the same seed gives the same results, byte for byte.
//
// The offered load is [Scenario.Rate] calls per second, spaced uniformly or
// as a Poisson process. The dependency goes through phases ([Scenario.Phases]):
// healthy; an outage in which every call fails (or, with
// [Scenario.SlowOutage], every call is slow); a fragile recovery in which it
// serves [Scenario.FragileCapacity] calls per second (a token bucket with a
// 100 ms burst) and fails the excess, or answers it slowly
// ([Scenario.Overflow]); healthy again. A healthy dependency serves
// [Scenario.Capacity] calls per second the same way (unlimited by default).
// Each phase's latency is log-normal with a given median and P99. The
// dependency decides a call's outcome and latency when the call reaches it.
//
// The simulated caller does what the middleware does: it asks the breaker
// for every offered call ([breaker.Breaker.AllowAt]); a rejected call is
// diverted; an admitted call's outcome and latency are reported when it
// completes ([breaker.Permit.RecordAt]), so calls, probes included, overlap
// in flight as they do in production. Every strategy sees the same arrivals.
//
// By default a diverted call gets a fallback and is gone (the
// probing-strategies note's model). With [Scenario.Backlog] nothing is lost,
// as with floodgate's retry queue: diverted calls, and admitted calls that
// fail, wait in a backlog that is offered to the breaker again while it is
// closed, one call every 1/[Scenario.DrainRate] (the drainer's budget); a
// call the breaker rejects stays in the backlog until the next close. The
// eager strategy releases the whole backlog at once on every close, the
// geofence note's anti-pattern: against a consumer of finite capacity the
// burst overflows it, the slow calls re-trip the breaker, and every fixed
// open window gathers a backlog that overflows it again, so eager flaps for
// as long as one window's backlog is more than the consumer absorbs in a
// burst (the model has no cache that warms up, so in the slow preset that
// is to the end of the run).
//
// # Strategies and metrics
//
// The built-in strategies ([StrategyNames], [StrategyConfig]) are breaker
// configurations that trip alike and differ in the open window and the
// half-open policy: eager (the anti-pattern: a fixed window, no probe cap,
// close on the first success), single-probe, capped-probes, ramp and
// adaptive. [Simulate] runs any other configuration.
//
// [Result] holds the metrics of the issue that asked for this package:
// errors and re-trips after recovery, time to close and to full traffic,
// the most probes in flight, probes and probe bursts during the outage,
// calls diverted, the backlog's peak, redeliveries and time to drain, and a
// series in 100 ms steps of the breaker's state, the
// admitted share and the errors. [WriteTable], [WriteMarkdown] and
// [WriteJSON] print them; package simplot plots them.
//
// Every function is safe for concurrent use: a simulation owns its breaker,
// clock and random sources. [Run] simulates the strategies in parallel.
package sim
