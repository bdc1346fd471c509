// Package breaker is a transport-agnostic circuit breaker with the states
// closed, open and half-open, built for recovering fragile dependencies
// without flapping.
//
// # Model
//
// Closed: every call is admitted. Outcomes go into a sliding window, of the
// last [Config.WindowSize] calls or (when [Config.WindowDuration] > 0) of the
// calls in the last WindowDuration. Once the window holds
// [Config.MinimumCalls] calls, the breaker trips when the failure rate
// reaches [Config.FailureRateThreshold], or the slow-call rate reaches
// [Config.SlowCallRateThreshold] (if set); it also trips after
// [Config.ConsecutiveFailures] failures in a row (if set). [Config.Classifier]
// maps an error to a success, a failure or a neutral outcome; neutral
// outcomes (a permanent partner error, a shutdown) are not counted at all.
// The rates are judged when a failure or slow call is recorded (and for every
// call until the window holds MinimumCalls), so a run of successes never
// takes a lock.
//
// Open: every call is rejected with [ErrOpen] for the open window. The n-th
// consecutive trip opens for min(MaxOpenWindow, BaseOpenWindow ×
// BackoffFactor^(n-1)), jittered uniformly within ±Jitter from a seedable
// source ([Config.OpenWindowStep], [Config.OpenWindow], [JitterDraw]): with
// the defaults 1s, 2s, 4s, 8s, 16s, 30s, 30s, … ± 20 %, the geofence design
// note's ladder. The ladder goes back to its base only on a clean close,
// never on a single good probe. When the window ends the breaker becomes
// half-open by itself, on a timer, even if no call arrives (with a
// [TimerClock], such as the default wall clock; with a plain [Clock], on the
// next call to Allow, State or Snapshot). An optional [Config.HealthCheck],
// polled while open, can end the open state early or hold it open.
//
// Half-open: the [HalfOpenPolicy] decides. All policies first admit at most
// [Config.ProbeConcurrency] probes in flight (rejecting the rest with
// [ErrProbeLimit]) and need [Config.SuccessesToClose] consecutive good
// probes; the single-probe policy uses 1 and 1. A probe is good only if it
// succeeded within [Config.SlowCallDuration]: a slow success is a failure.
// Any failed probe reopens with the next, longer window. Then capped probes
// close; ramp admits a growing share of traffic (10/25/50/100 % by default,
// or Envoy's slow-start curve), checking each step's failure rate; adaptive
// lets the admitted share follow the measured failures and latency (it
// doubles while clean, backs off below the share where loss appeared, and
// probes just above it), reopening only if failures persist at its minimum
// share. Calls outside the
// share are rejected with [ErrThrottled], which also matches [ErrProbeLimit].
//
// Only evidence moves a half-open breaker: a counted outcome (a success or
// failure reported for an admitted call) or a probe expired by
// [Config.MaxProbeWait]. Absence of calls is not evidence: a half-open
// breaker that admits no call stays half-open however long, with its trip
// count unchanged, and admits the next call as a probe. Only a failed probe,
// or one expired by MaxProbeWait, advances the backoff ladder.
//
// Nothing gets stuck: a half-open admission neither reported nor cancelled
// within MaxProbeWait counts as a failure, and frees its slot; a cancelled
// one ([Permit.Cancel], for a call never made or cut short by shutdown)
// frees its slot (in a fleet, its probe lease too) and counts neither way.
//
// # Cross-field rules
//
// [New] and [Config.Validate] (and [JoinFleet], for the fleet's rule)
// reject settings under which the breaker cannot work, with a
// [*ConfigError] naming both fields and the rule. Each field's own range is
// in its doc comment; the rules between fields are these:
//
//	Rule                                   Why
//	MinimumCalls <= WindowSize             (count-based window) the window could never hold enough calls to judge
//	WindowDuration/WindowBuckets >= 1ms    (time-based window) a bucket must be wide enough to rotate
//	BaseOpenWindow <= MaxOpenWindow        the cap of the ladder cannot be below its first step
//	SlowCallDuration <= MaxProbeWait       a probe good by SlowCallDuration must be able to report before it expires
//	MaxProbeWait <= FleetConfig.ProbeLeaseTTL
//	                                       a probe must not outlive its fleet lease, or another replica's probe
//	                                       takes its slot and the fleet exceeds ProbeConcurrency
//	FleetConfig.FallbackProbes <= ProbeConcurrency
//	                                       the fallback cap is a part of the fleet's probe budget
//	RampSteps strictly increasing, last 1  (ramp) the ramp must reach 100 % to close
//
// Defaults follow these rules: MaxOpenWindow defaults to at least
// BaseOpenWindow, MaxProbeWait to at least SlowCallDuration, ProbeLeaseTTL
// to MaxProbeWait (at least 1 s), MinimumCalls to at most WindowSize.
//
// # Permits and generations
//
// The breaker is two-step, to fit ack/nack flows: [Breaker.Allow] returns a
// [Permit], and the outcome is reported later with [Permit.Done] (error and
// measured latency) or [Permit.Record] (explicit outcome and latency). Every
// state change starts a new generation; a result from a call admitted in an
// earlier generation is discarded and counted as stale (the idea of
// gobreaker's generation counter). Reporting a permit twice is harmless: the
// second report is ignored.
//
// # Time
//
// Time is a parameter. The breaker reads [Config.Clock] (default: the wall
// clock), and every time-dependent method has an At variant taking the time
// ([Breaker.AllowAt], [Permit.DoneAt], [Breaker.StateAt], …), as in
// golang.org/x/time/rate. Tests use breakertest.Clock, a fake [TimerClock]
// whose timers fire when it is advanced, and never sleep.
//
// # Concurrency and cost
//
// A Breaker is safe for concurrent use. The closed-state path (Allow, then
// reporting a success) takes no lock, does not allocate, and reads the clock
// only when the configuration needs latency or time in the closed state; its
// one read-modify-write is the CAS that claims a slot. Each permit owns a
// slot of a slot table while in flight. The slot's word counts the outcomes
// reported through it, so successes need no shared counter, and never
// repeats, so a repeated report is recognised however many calls are in
// flight; the slot also holds the permit's 64-bit generation, for the
// staleness rule. A goroutine claims in a home stripe chosen from its stack
// address (no go:linkname). The table grows lazily and never shrinks: home
// stripes double when claims collide (up to 16 per P), and spill stripes,
// searched from a shared cursor, are added when more permits are in flight
// than the home stripes hold. So a claim costs about the same at 1 or 10,000
// in flight, and memory follows the peak in flight (16 B a slot) and the
// contention seen.
//
// An idle closed breaker takes under 1 KB of heap with the default
// configuration, at any GOMAXPROCS, and no goroutine: the state of open and
// half-open is allocated when the breaker first trips, the window's failure
// log (16 B × WindowSize) at the first failure or slow call. Breakers made
// from one [Template] (a breaker per partner) share its configuration
// instead of each holding a copy: about 620 B each when idle. Failures, slow
// calls, successes before the window holds MinimumCalls, and everything
// outside the closed state take one mutex per breaker; once the window holds
// MinimumCalls, these locked reports also sum the slot table (one load per
// slot), so their cost grows with the peak in flight. Listeners
// ([Breaker.AddListener]) are called after the mutex is released, in
// transition order.
//
// # Fleets
//
// [JoinFleet] makes the breakers of one name in several processes share
// their state (closed/open/half-open, open-until, the trip count driving the
// backoff, the ramp start) and one probe budget of ProbeConcurrency leases
// through a [Store] (package breaker/natskv: NATS JetStream Key-Value;
// [MemoryStore]: in memory). The closed path stays local: the only fleet
// code is on the slow paths. See docs/fleet.md in the repository.
package breaker
