package sim

import (
	"fmt"
	"math"
	"time"

	"github.com/floodgate-go/floodgate/breaker"
)

// Arrivals is the arrival process of the offered load.
type Arrivals int

const (
	// ArrivalsPoisson (the default) spaces calls by exponential gaps with mean
	// 1/Rate: independent callers.
	ArrivalsPoisson Arrivals = iota
	// ArrivalsUniform spaces calls exactly 1/Rate apart.
	ArrivalsUniform
)

// String returns "poisson" or "uniform".
func (a Arrivals) String() string {
	switch a {
	case ArrivalsPoisson:
		return "poisson"
	case ArrivalsUniform:
		return "uniform"
	default:
		return fmt.Sprintf("Arrivals(%d)", int(a))
	}
}

// ParseArrivals parses "poisson" or "uniform". For another string it
// returns an error wrapping [ErrInvalidScenario] that names the allowed
// values.
func ParseArrivals(s string) (Arrivals, error) {
	switch s {
	case "poisson":
		return ArrivalsPoisson, nil
	case "uniform":
		return ArrivalsUniform, nil
	}
	return 0, fmt.Errorf("%w: arrivals %q, allowed poisson or uniform", ErrInvalidScenario, s)
}

// Overflow says what happens to an admitted call beyond the dependency's
// capacity in the fragile phase.
type Overflow int

const (
	// OverflowFail (the default): the call fails, as a partner shedding load
	// with 503s does. Its latency is drawn from [Scenario.Healthy].
	OverflowFail Overflow = iota
	// OverflowSlow: the call succeeds, slowly, with a latency drawn from
	// [Scenario.Slow], as a consumer with a cold cache, or with a queue that
	// builds beyond its capacity, does. Such a call counts as an error, and
	// can trip the breaker, only when it is slower than
	// [Scenario.SlowCallDuration]: with the defaults (Slow's P99 900ms,
	// SlowCallDuration 1s) almost none is, so the overflow is invisible
	// unless SlowCallDuration is lowered below Slow's latency.
	OverflowSlow
)

// String returns "fail" or "slow".
func (o Overflow) String() string {
	switch o {
	case OverflowFail:
		return "fail"
	case OverflowSlow:
		return "slow"
	default:
		return fmt.Sprintf("Overflow(%d)", int(o))
	}
}

// ParseOverflow parses "fail" or "slow". For another string it returns an
// error wrapping [ErrInvalidScenario] that names the allowed values.
func ParseOverflow(s string) (Overflow, error) {
	switch s {
	case "fail":
		return OverflowFail, nil
	case "slow":
		return OverflowSlow, nil
	}
	return 0, fmt.Errorf("%w: overflow %q, allowed fail or slow", ErrInvalidScenario, s)
}

// Latency is a log-normal latency distribution given by its median and its
// 99th percentile. P99 == Median means a constant latency.
type Latency struct {
	// Median is the 50th percentile. Range (0, 1h].
	Median time.Duration
	// P99 is the 99th percentile. Range [Median, 1h].
	P99 time.Duration
}

// z99 is the standard normal quantile of 0.99.
const z99 = 2.3263478740408408

// sigma is the log-normal shape parameter that puts P99 at the 99th
// percentile.
func (l Latency) sigma() float64 {
	if l.P99 <= l.Median {
		return 0
	}
	return math.Log(float64(l.P99)/float64(l.Median)) / z99
}

// Scenario describes one experiment: the offered load, the dependency's
// phases (healthy, then an outage, then a fragile recovery, then healthy
// again) and the settings every strategy shares (slow-call duration and open
// window ladder). All times are offsets from the start of the run. Every
// field is optional unless it says "Required"; a zero value means its
// default. Use [Preset] for the scenarios of the design notes.
type Scenario struct {
	// Name is optional: a label for output, e.g. the preset's name.
	Name string

	// Rate is required: offered calls per second. Range (0, 100000], and
	// Rate × Duration must be at most 2 million offered calls (see
	// Duration).
	Rate float64

	// Arrivals is optional. Default [ArrivalsPoisson].
	Arrivals Arrivals

	// Duration is required: the length of the run. Range (0, 48h], and it must
	// hold at most 2 million offered calls (Rate × Duration), so that the
	// largest run takes well under a minute: an offered call costs each
	// strategy about 1–2 µs of CPU (up to about 5.5 µs with latencies of
	// seconds, which keep many calls in flight, or with eager dumping a
	// backlog), so 2 million calls take 2–4 s per strategy, 11 s at most,
	// and all five strategies about 17 s of CPU, 45 s at most ([Run] runs
	// them in parallel).
	Duration time.Duration

	// RecoverAt is required: the moment the outage ends, called the recovery.
	// The metrics "after recovery" count from here. Range (0, Duration].
	RecoverAt time.Duration

	// Outage is optional: how long the outage lasts before RecoverAt. During it
	// every call fails (or, with SlowOutage, is slow). Default 0: no outage;
	// range [0, RecoverAt].
	Outage time.Duration

	// SlowOutage is optional. When true the outage is slow rather than down:
	// every call succeeds with a latency drawn from Slow. Default false.
	SlowOutage bool

	// Fragile is optional: how long after RecoverAt the dependency takes only
	// FragileCapacity calls per second. Default 0; range [0, Duration-RecoverAt].
	Fragile time.Duration

	// FragileCapacity is optional: calls per second served normally in the
	// fragile phase; it is a token bucket with a burst of 100 ms of capacity
	// (at least one call). Required (> 0) when Fragile > 0. Range
	// (0, 100000] when Fragile > 0; [0, 100000] when Fragile is 0 (where it
	// is not used).
	FragileCapacity float64

	// Overflow is optional: what happens to calls beyond FragileCapacity, or
	// beyond Capacity. Default [OverflowFail]. With [OverflowSlow] an
	// overflowing call counts as an error, or trips the breaker, only when
	// it is slower than SlowCallDuration; with the default Slow latency
	// (P99 900ms) and SlowCallDuration (1s) it almost never is.
	Overflow Overflow

	// Capacity is optional: calls per second the healthy dependency serves
	// normally (before the outage and after the fragile period); the excess
	// fails or is slow, as Overflow says. Like FragileCapacity it is a token
	// bucket with a burst of 100 ms of capacity. Default 0: unlimited; range
	// [0, 100000].
	Capacity float64

	// Backlog is optional. When true, calls are not lost: a diverted call,
	// and an admitted call that fails, join a retry backlog, which is
	// offered to the breaker again while it is closed, at DrainRate, as
	// floodgate's retry-queue drainer does. The eager strategy instead
	// releases the whole backlog at once on every close (the geofence note's
	// anti-pattern). When false (the probing-strategies note's fallback), a
	// diverted call gets the fallback and is not retried. Default false.
	Backlog bool

	// DrainRate is optional (with Backlog): the calls per second at which
	// the backlog is offered again while the breaker is closed, evenly
	// spaced. Default 50 (the retry-queue drainer's default rate); range
	// (0, 100000].
	DrainRate float64

	// Healthy is optional: the latency of a call served normally, and of a
	// failing call. Default median 20ms, P99 100ms.
	Healthy Latency

	// Slow is optional: the latency of a slow call (a slow outage, or an
	// overflow with [OverflowSlow]). Default median 300ms, P99 900ms.
	Slow Latency

	// SlowCallDuration is optional: every strategy's
	// [breaker.Config.SlowCallDuration]; a call slower than it is a slow
	// call, which trips a closed breaker at a 50 % rate and fails a probe.
	// Errors after recovery count slow calls too. Default 1s; range > 0.
	SlowCallDuration time.Duration

	// OpenWindow is optional: the first open window of every strategy, and
	// the fixed window of eager. Default 1s (geofence note); range
	// (0, 48h]: the simulator's longest run, below the breaker's own
	// bound ([breaker.MaxOpenWindowLimit], a week).
	OpenWindow time.Duration

	// MaxOpenWindow is optional: the cap of the doubling, jittered open
	// window. Default 30s (geofence note), or OpenWindow if larger; with
	// FixedOpenWindow, OpenWindow. Range [OpenWindow, 48h] (the breaker's
	// MaxOpenWindow >= BaseOpenWindow, capped at the simulator's longest
	// run); with FixedOpenWindow exactly OpenWindow (a fixed window does
	// not double).
	MaxOpenWindow time.Duration

	// FixedOpenWindow is optional. When true every strategy opens for
	// exactly OpenWindow, unjittered, at every trip, as the
	// probing-strategies note's code does (reopen_at = now + open_for), and
	// MaxOpenWindow must be OpenWindow (or 0). Default false: floodgate's
	// default, a window doubling from OpenWindow up to MaxOpenWindow,
	// jittered by ±20 %. Eager's window is fixed either way.
	FixedOpenWindow bool

	// TripWindow is optional: when > 0, every strategy judges its failure and
	// slow-call rates over the calls of the last TripWindow (a time-based
	// window, [breaker.Config.WindowDuration]). Default 0: the breaker's
	// default count-based window of the last 20 calls. Range 0 or
	// [10ms, 1h].
	TripWindow time.Duration

	// TripMinCalls is optional: how many calls the window must hold before a
	// rate can trip ([breaker.Config.MinimumCalls]; the adaptive policy also
	// uses it as the evidence it needs at its minimum share). Default 0: the
	// breaker's default, 10. With the count-based window, the window grows
	// to hold TripMinCalls calls when it is larger than 20. Range
	// [0, 1000000]; with a time-based window (TripWindow > 0) the minimum
	// (TripMinCalls, or 10 when 0) must be at most the calls the window
	// holds on average, Rate × TripWindow, or the breaker could never trip.
	TripMinCalls int

	// HealthCheck is optional. When true every strategy except eager polls a
	// health check every second while open; it passes whenever the dependency
	// is not down (a slow dependency passes it). Default false.
	HealthCheck bool

	// Seed is optional: it seeds the arrivals, the latencies and the
	// breakers' jitter. The same seed gives the same results, byte for byte.
	// Default 0 (a valid, fixed seed).
	Seed uint64
}

// Limits on scenarios.
const (
	maxRate     = 100000
	maxDuration = 48 * time.Hour
	maxCalls    = 2_000_000

	// maxOpenWindow caps OpenWindow and MaxOpenWindow: a window longer
	// than the longest run cannot show in any result. The breaker itself
	// only requires BaseOpenWindow > 0 and MaxOpenWindow >= BaseOpenWindow.
	maxOpenWindow = maxDuration

	maxTripMinCalls = 1_000_000
)

func (s *Scenario) setDefaults() {
	if s.Healthy == (Latency{}) {
		s.Healthy = Latency{Median: 20 * time.Millisecond, P99: 100 * time.Millisecond}
	}
	if s.Slow == (Latency{}) {
		s.Slow = Latency{Median: 300 * time.Millisecond, P99: 900 * time.Millisecond}
	}
	if s.SlowCallDuration == 0 {
		s.SlowCallDuration = defaultSlowCallDuration
	}
	if s.OpenWindow == 0 {
		s.OpenWindow = time.Second
	}
	if s.MaxOpenWindow == 0 {
		s.MaxOpenWindow = max(30*time.Second, s.OpenWindow)
		if s.FixedOpenWindow {
			s.MaxOpenWindow = s.OpenWindow
		}
	}
	if s.DrainRate == 0 {
		s.DrainRate = defaultDrainRate
	}
}

// defaultSlowCallDuration is [Scenario.SlowCallDuration]'s default.
const defaultSlowCallDuration = time.Second

// defaultDrainRate is [Scenario.DrainRate]'s default: the retry-queue
// drainer's default rate, in calls per second.
const defaultDrainRate = 50

// WithDefaults returns s with its zero optional fields set to their
// defaults.
func (s Scenario) WithDefaults() Scenario {
	s.setDefaults()
	return s
}

// Validate reports whether the scenario, with defaults applied, can run. It
// does not modify s. Each error is a [*FieldError] matching
// [ErrInvalidScenario] that names the field and the allowed range.
func (s *Scenario) Validate() error {
	c := *s
	c.setDefaults()
	return c.validate()
}

func (s *Scenario) validate() error {
	if !(s.Rate > 0 && s.Rate <= maxRate) {
		return invalid("Rate", s.Rate, fmt.Sprintf("(0, %d] calls/s", maxRate))
	}
	if s.Arrivals != ArrivalsPoisson && s.Arrivals != ArrivalsUniform {
		return invalid("Arrivals", s.Arrivals, "ArrivalsPoisson or ArrivalsUniform")
	}
	if s.Duration <= 0 || s.Duration > maxDuration {
		return invalid("Duration", s.Duration, fmt.Sprintf("(0, %v]", maxDuration))
	}
	if s.Rate*s.Duration.Seconds() > maxCalls {
		return invalid("Duration", s.Duration, fmt.Sprintf("at most %d offered calls (Rate × Duration)", maxCalls))
	}
	if s.RecoverAt <= 0 || s.RecoverAt > s.Duration {
		return invalid("RecoverAt", s.RecoverAt, fmt.Sprintf("(0, Duration (%v)]", s.Duration))
	}
	if s.Outage < 0 || s.Outage > s.RecoverAt {
		return invalid("Outage", s.Outage, fmt.Sprintf("[0, RecoverAt (%v)]", s.RecoverAt))
	}
	if s.Fragile < 0 || s.Fragile > s.Duration-s.RecoverAt {
		return invalid("Fragile", s.Fragile, fmt.Sprintf("[0, Duration-RecoverAt (%v)]", s.Duration-s.RecoverAt))
	}
	if s.Fragile > 0 && !(s.FragileCapacity > 0 && s.FragileCapacity <= maxRate) {
		return invalid("FragileCapacity", s.FragileCapacity, fmt.Sprintf("(0, %d] calls/s when Fragile > 0", maxRate))
	}
	if s.FragileCapacity < 0 || s.FragileCapacity > maxRate || math.IsNaN(s.FragileCapacity) {
		return invalid("FragileCapacity", s.FragileCapacity, fmt.Sprintf("(0, %d] calls/s", maxRate))
	}
	if !(s.Capacity >= 0 && s.Capacity <= maxRate) {
		return invalid("Capacity", s.Capacity, fmt.Sprintf("[0, %d] calls/s (0: unlimited)", maxRate))
	}
	if !(s.DrainRate > 0 && s.DrainRate <= maxRate) {
		return invalid("DrainRate", s.DrainRate, fmt.Sprintf("(0, %d] calls/s", maxRate))
	}
	if s.Overflow != OverflowFail && s.Overflow != OverflowSlow {
		return invalid("Overflow", s.Overflow, "OverflowFail or OverflowSlow")
	}
	for _, l := range []struct {
		name string
		lat  Latency
	}{{"Healthy", s.Healthy}, {"Slow", s.Slow}} {
		if l.lat.Median <= 0 || l.lat.Median > time.Hour {
			return invalid(l.name+".Median", l.lat.Median, "(0, 1h]")
		}
		if l.lat.P99 < l.lat.Median || l.lat.P99 > time.Hour {
			return invalid(l.name+".P99", l.lat.P99, fmt.Sprintf("[Median (%v), 1h]", l.lat.Median))
		}
	}
	if s.SlowCallDuration <= 0 {
		return invalid("SlowCallDuration", s.SlowCallDuration, "> 0")
	}
	if s.OpenWindow <= 0 || s.OpenWindow > maxOpenWindow {
		return invalid("OpenWindow", s.OpenWindow, fmt.Sprintf("(0, %v]", maxOpenWindow))
	}
	if s.MaxOpenWindow < s.OpenWindow || s.MaxOpenWindow > maxOpenWindow {
		return invalid("MaxOpenWindow", s.MaxOpenWindow, fmt.Sprintf("[OpenWindow (%v), %v]", s.OpenWindow, maxOpenWindow))
	}
	if s.FixedOpenWindow && s.MaxOpenWindow != s.OpenWindow {
		return invalid("MaxOpenWindow", s.MaxOpenWindow,
			fmt.Sprintf("OpenWindow (%v) with FixedOpenWindow (a fixed window does not double)", s.OpenWindow))
	}
	if s.TripWindow != 0 && (s.TripWindow < 10*time.Millisecond || s.TripWindow > time.Hour) {
		return invalid("TripWindow", s.TripWindow, "0 (a count-based window of 20 calls) or [10ms, 1h]")
	}
	if s.TripMinCalls < 0 || s.TripMinCalls > maxTripMinCalls {
		return invalid("TripMinCalls", s.TripMinCalls, fmt.Sprintf("[0, %d] calls (0: the breaker's default, 10)", maxTripMinCalls))
	}
	if s.TripWindow > 0 {
		// A time-based window holds Rate × TripWindow calls on average; a
		// larger minimum means the breaker can never trip.
		held := s.Rate * s.TripWindow.Seconds()
		minCalls := s.TripMinCalls
		if minCalls == 0 {
			minCalls = breaker.DefaultMinimumCalls
		}
		if float64(minCalls) > held {
			allowed := fmt.Sprintf("[0, %d] calls with TripWindow %v (at most Rate × TripWindow = %g, the calls the window holds on average; 0 means 10)",
				int(math.Floor(held)), FormatDuration(s.TripWindow), held)
			if held < breaker.DefaultMinimumCalls {
				allowed = fmt.Sprintf("[1, %d] calls with TripWindow %v (at most Rate × TripWindow = %g, the calls the window holds on average; 0 means 10, too many)",
					int(math.Floor(held)), FormatDuration(s.TripWindow), held)
			}
			if held < 1 {
				allowed = fmt.Sprintf("none with TripWindow %v: it holds Rate × TripWindow = %g calls on average, fewer than 1; lengthen TripWindow",
					FormatDuration(s.TripWindow), held)
			}
			return invalid("TripMinCalls", s.TripMinCalls, allowed)
		}
	}
	return nil
}

// OutageStart is when the outage begins: RecoverAt - Outage.
func (s *Scenario) OutageStart() time.Duration { return s.RecoverAt - s.Outage }

// Phase is one stretch of the dependency's behaviour.
type Phase struct {
	// Name is "healthy", "down", "slow" (a slow outage) or "fragile".
	Name string
	// Start and End bound the phase, as offsets from the start of the run.
	Start, End time.Duration
	// Down means every call fails.
	Down bool
	// Capacity is the calls per second served normally; 0 means unlimited.
	Capacity float64
	// Latency is the latency of a call served normally (and of a failure).
	Latency Latency
	// Overflow says what happens beyond Capacity.
	Overflow Overflow
}

// Phases returns the dependency's phases in time order, covering the run
// without gaps: healthy, then the outage (down, or slow with SlowOutage),
// then fragile, then healthy. Phases of zero length are left out. Defaults
// are applied to a copy of s.
func (s Scenario) Phases() []Phase {
	s.setDefaults()
	var ps []Phase
	add := func(p Phase) {
		if p.End > p.Start {
			ps = append(ps, p)
		}
	}
	os, rec := s.OutageStart(), s.RecoverAt
	add(Phase{Name: "healthy", Start: 0, End: os, Capacity: s.Capacity, Latency: s.Healthy, Overflow: s.Overflow})
	if s.SlowOutage {
		add(Phase{Name: "slow", Start: os, End: rec, Latency: s.Slow})
	} else {
		add(Phase{Name: "down", Start: os, End: rec, Down: true, Latency: s.Healthy})
	}
	add(Phase{Name: "fragile", Start: rec, End: rec + s.Fragile, Capacity: s.FragileCapacity,
		Latency: s.Healthy, Overflow: s.Overflow})
	add(Phase{Name: "healthy", Start: rec + s.Fragile, End: s.Duration, Capacity: s.Capacity,
		Latency: s.Healthy, Overflow: s.Overflow})
	return ps
}

// PresetNames returns the names accepted by [Preset]: "fragile",
// "fragile-defaults", "slow" and "long-outage".
func PresetNames() []string {
	return []string{"fragile", "fragile-defaults", "slow", "long-outage"}
}

// Preset returns a scenario of the design notes (summarised in the
// repository's docs/design.md), with Seed 1:
//
//   - "fragile" (probing-strategies note): 100 calls/s; the dependency is
//     down from 10s to 20s, then for 10s takes only 30 calls/s (the excess
//     fails), then is fully healthy; 60s in all. The breakers are the
//     note's: a fixed, unjittered open window (its code reopens at
//     now + open_for) of 5s, tripping on the failure rate over the last
//     second once it holds 80 calls. The note gives neither number; these
//     two reproduce its single probe (118 errors, 2 re-trips, full traffic
//     after 13 s; seed 1 gives 118, 2, 12.1 s) and then its ramp comes out
//     near the note's too (36, 1, 17 s; seed 1 gives 46, 1, 17.8 s).
//   - "fragile-defaults": the same dependency behind floodgate's default
//     breaker: a window of the last 20 calls (at least 10) and an open
//     window doubling from 1s up to 30s, jittered. It trips sooner and waits
//     out more of the fragile period, so every strategy makes fewer errors
//     than against the note's breaker.
//   - "slow" (geofence note): 100 calls/s to a consumer answering in 2ms
//     (P99 5ms), whose latency is median 300ms, P99 900ms from 15s until
//     t = 20s, then 2ms (P99 5ms) again. The consumer serves 200 calls/s
//     normally and the excess slowly (a queue builds); calls are not lost:
//     diverted ones wait in a retry backlog that is re-offered once closed,
//     at 50 calls/s, or all at once by eager (the note's "dumps the full
//     backlog" onto a consumer that cannot take it). The 5s slow spell puts
//     the doubling windows at the note's 1s, 2s, 4s. Slow-call duration
//     50ms (the note's probe threshold); 80s in all.
//   - "long-outage" (EDI note): 10 calls/s to a partner that is down for 4h;
//     first open window 30s, doubling up to 10m, so a fixed 30s window
//     (eager) probes 480 times while the doubling one probes far fewer.
//
// It returns an error wrapping [ErrUnknownPreset] for another name.
func Preset(name string) (Scenario, error) {
	switch name {
	case "fragile":
		return Scenario{
			Name: name, Rate: 100, Duration: 60 * time.Second,
			RecoverAt: 20 * time.Second, Outage: 10 * time.Second,
			Fragile: 10 * time.Second, FragileCapacity: 30, Overflow: OverflowFail,
			OpenWindow: 5 * time.Second, MaxOpenWindow: 5 * time.Second, FixedOpenWindow: true,
			TripWindow: time.Second, TripMinCalls: 80,
			Seed: 1,
		}.WithDefaults(), nil
	case "fragile-defaults":
		return Scenario{
			Name: name, Rate: 100, Duration: 60 * time.Second,
			RecoverAt: 20 * time.Second, Outage: 10 * time.Second,
			Fragile: 10 * time.Second, FragileCapacity: 30, Overflow: OverflowFail,
			Seed: 1,
		}.WithDefaults(), nil
	case "slow":
		return Scenario{
			Name: name, Rate: 100, Duration: 80 * time.Second,
			RecoverAt: 20 * time.Second, Outage: 5 * time.Second, SlowOutage: true,
			Capacity: 200, Overflow: OverflowSlow, Backlog: true, DrainRate: defaultDrainRate,
			Healthy:          Latency{Median: 2 * time.Millisecond, P99: 5 * time.Millisecond},
			Slow:             Latency{Median: 300 * time.Millisecond, P99: 900 * time.Millisecond},
			SlowCallDuration: 50 * time.Millisecond,
			Seed:             1,
		}.WithDefaults(), nil
	case "long-outage":
		return Scenario{
			Name: name, Rate: 10, Duration: 4*time.Hour + 16*time.Minute,
			RecoverAt: 4*time.Hour + time.Minute, Outage: 4 * time.Hour,
			OpenWindow: 30 * time.Second, MaxOpenWindow: 10 * time.Minute,
			Seed: 1,
		}.WithDefaults(), nil
	}
	return Scenario{}, fmt.Errorf("%w: %q, allowed %v", ErrUnknownPreset, name, PresetNames())
}
