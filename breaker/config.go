package breaker

import (
	"context"
	"fmt"
	"math"
	"time"
)

// HalfOpenPolicy selects how the half-open state tests a recovering
// dependency. The design notes (summarised in the repository's
// docs/design.md) describe the strategies; [HalfOpenAdaptive] goes beyond
// them.
type HalfOpenPolicy int

const (
	// HalfOpenCappedProbes (the default) admits at most
	// [Config.ProbeConcurrency] probes in flight and closes after
	// [Config.SuccessesToClose] consecutive good probes. Any failed probe
	// reopens with the next, longer window.
	HalfOpenCappedProbes HalfOpenPolicy = iota
	// HalfOpenSingleProbe admits one probe in flight and closes on the first
	// good probe (ProbeConcurrency and SuccessesToClose are ignored).
	HalfOpenSingleProbe
	// HalfOpenRamp first runs the capped probes, then admits a growing share
	// of traffic: the steps [Config.RampSteps], each lasting
	// [Config.RampStepDuration], or, when [Config.RampWindow] > 0, Envoy's
	// slow-start curve. Each step's failure rate is checked; a failing step
	// reopens. It closes when the last step (100 %) passes.
	HalfOpenRamp
	// HalfOpenAdaptive first runs the capped probes, then lets the admitted
	// share follow the measured failures and latency, in the manner of TCP
	// congestion control (slow start, CUBIC's memory of the loss level):
	// from [Config.AdaptiveMinShare] the share doubles every clean
	// [Config.AdaptiveInterval]. A loss (failures above
	// [Config.AdaptiveTolerance], or a latency rise) records the goodput share
	// measured there as the loss level and backs off to
	// [Config.AdaptiveBackoff] times it, a level the dependency serves
	// cleanly; after [Config.AdaptiveHold] clean intervals it probes for one
	// interval at the loss level plus [Config.AdaptiveIncrease]. A failure
	// there backs off again at once (one failure confirms a known level); a
	// clean probe means the capacity has grown, and the share doubles every
	// clean interval, or, from twice the loss level up to 100 %, as soon as
	// [Config.MinimumCalls] outcomes are clean, so full traffic follows
	// within about two intervals of the capacity's return. A capacity below
	// the minimum share (some calls served, some failing there) backs the
	// share off below it, to a tenth of it at the least. It reopens only if
	// failures persist at the minimum share, or nothing succeeds at that
	// tenth; it closes after one clean interval at 100 %. Failures (timeouts, drops) are loss signals and
	// never latency samples.
	HalfOpenAdaptive
)

// String returns "capped-probes", "single-probe", "ramp" or "adaptive".
func (p HalfOpenPolicy) String() string {
	switch p {
	case HalfOpenCappedProbes:
		return "capped-probes"
	case HalfOpenSingleProbe:
		return "single-probe"
	case HalfOpenRamp:
		return "ramp"
	case HalfOpenAdaptive:
		return "adaptive"
	default:
		return fmt.Sprintf("HalfOpenPolicy(%d)", int(p))
	}
}

// Defaults of the [Config] fields. The open-window ladder (1 s base, 30 s
// cap, factor 2, jitter 0.2, 2 probes, 5 successes) follows the geofence
// design note; the ramp steps (10/25/50/100 %, 2 s per step) follow the
// probing-strategies note.
const (
	DefaultWindowSize           = 20                     // Config.WindowSize, calls
	DefaultMinimumCalls         = 10                     // Config.MinimumCalls, calls
	DefaultWindowBuckets        = 10                     // Config.WindowBuckets
	DefaultFailureRateThreshold = 0.5                    // Config.FailureRateThreshold
	DefaultSlowCallDuration     = 5 * time.Second        // Config.SlowCallDuration
	DefaultBaseOpenWindow       = 1 * time.Second        // Config.BaseOpenWindow
	DefaultMaxOpenWindow        = 30 * time.Second       // Config.MaxOpenWindow
	DefaultBackoffFactor        = 2.0                    // Config.BackoffFactor
	DefaultJitter               = 0.2                    // Config.Jitter, ± fraction
	DefaultProbeConcurrency     = 2                      // Config.ProbeConcurrency, probes in flight
	DefaultSuccessesToClose     = 5                      // Config.SuccessesToClose, consecutive good probes
	DefaultMaxProbeWait         = 30 * time.Second       // Config.MaxProbeWait
	DefaultRampStepDuration     = 2 * time.Second        // Config.RampStepDuration
	DefaultRampMinCalls         = 10                     // Config.RampMinCalls, calls
	DefaultRampAggression       = 1.0                    // Config.RampAggression (linear)
	DefaultRampMinShare         = 0.1                    // Config.RampMinShare
	DefaultAdaptiveMinShare     = 0.1                    // Config.AdaptiveMinShare
	DefaultAdaptiveInterval     = 500 * time.Millisecond // Config.AdaptiveInterval
	DefaultAdaptiveIncrease     = 0.05                   // Config.AdaptiveIncrease, share
	DefaultAdaptiveHold         = 2                      // Config.AdaptiveHold, intervals
	DefaultAdaptiveBackoff      = 0.5                    // Config.AdaptiveBackoff, factor
	DefaultAdaptiveTolerance    = 0.05                   // Config.AdaptiveTolerance, loss rate
	DefaultAdaptiveLatencyRatio = 2.0                    // Config.AdaptiveLatencyRatio
	DefaultHealthCheckInterval  = 1 * time.Second        // Config.HealthCheckInterval

	maxWindowSize    = 1 << 20
	maxWindowBuckets = 1000
	maxProbes        = 1 << 16
	maxRampSteps     = 100
	maxAdaptiveHold  = 1000
)

// MaxOpenWindowLimit bounds Config.BaseOpenWindow and Config.MaxOpenWindow:
// a week, longer than any outage a breaker should wait out unprobed, and
// far from the overflow of a jittered window added to a time.
const MaxOpenWindowLimit = 7 * 24 * time.Hour

// DefaultRampSteps returns the default ramp: 10 %, 25 %, 50 %, 100 %.
func DefaultRampSteps() []float64 { return []float64{0.10, 0.25, 0.50, 1.00} }

// Config configures a [Breaker]. The zero value is valid: every field is
// optional and a zero value means its default. A Config is copied by [New];
// changing it afterwards has no effect.
type Config struct {
	// Name is optional. It is used in rejection errors and transitions.
	Name string

	// Clock is optional. Default: the wall clock. A [TimerClock] also drives
	// timers (leaving open without a call, expiring probes, health checks).
	Clock Clock

	// Seed is optional. It seeds the jitter source, so a seeded breaker draws
	// the same open windows every run. Default 0: a random seed.
	Seed uint64

	// WindowSize is optional: the count-based sliding window holds the last
	// WindowSize calls. Default 20; range 1..1<<20. Ignored when
	// WindowDuration > 0.
	WindowSize int

	// WindowDuration is optional. When > 0 the sliding window is time-based:
	// it holds the calls completed in the last WindowDuration, in
	// WindowBuckets buckets (whole buckets expire). Default 0: count-based.
	WindowDuration time.Duration

	// WindowBuckets is optional: the number of buckets of a time-based window.
	// Default 10; range 1..1000, and WindowDuration/WindowBuckets >= 1ms.
	WindowBuckets int

	// MinimumCalls is optional: calls the window must hold before the rates
	// are judged. Default 10 (or WindowSize if smaller); range 1..WindowSize
	// for a count-based window, >= 1 for a time-based one.
	MinimumCalls int

	// FailureRateThreshold is optional: the breaker trips when
	// failures/calls >= this over the window. Default 0.5; range (0,1].
	FailureRateThreshold float64

	// SlowCallDuration is optional: a call that takes longer is a slow call.
	// A slow success is a failure for probes and ramp or adaptive calls
	// (recovering to "responds but slow" is not recovery, per the geofence
	// note). Default 5s; range > 0.
	SlowCallDuration time.Duration

	// SlowCallRateThreshold is optional: when > 0 the breaker also trips when
	// slow calls/calls >= this over the window. Default 0: the slow-call rate
	// does not trip the breaker; range [0,1]. When > 0 (or with a time-based
	// window) [Breaker.Allow] and [Permit.Done] read the clock in the closed
	// state; otherwise the closed path never reads it.
	SlowCallRateThreshold float64

	// ConsecutiveFailures is optional: when > 0 the breaker also trips after
	// that many failures in a row, whatever MinimumCalls says. Default 0:
	// disabled; range >= 0.
	ConsecutiveFailures int

	// BaseOpenWindow is optional: the first open window. Default 1s (geofence
	// note); range (0, MaxOpenWindowLimit].
	BaseOpenWindow time.Duration

	// MaxOpenWindow is optional: the cap of the open window before jitter.
	// Default 30s, or BaseOpenWindow if that is larger; range
	// [BaseOpenWindow, MaxOpenWindowLimit].
	MaxOpenWindow time.Duration

	// BackoffFactor is optional: each consecutive trip multiplies the open
	// window by it, up to MaxOpenWindow. Default 2; range [1, 1000].
	BackoffFactor float64

	// Jitter is optional: each open window is its step times U(1-Jitter,
	// 1+Jitter), so breakers that tripped together do not probe together.
	// Default 0.2; range [0,1). Zero means the default; use DisableJitter for
	// exact windows.
	Jitter float64

	// DisableJitter is optional. When true, open windows are exactly their
	// steps. Default false.
	DisableJitter bool

	// FixedOpenWindow is optional. When true every open window is
	// BaseOpenWindow (jittered) whatever the trip count, for comparison with
	// the exponential ladder. Default false.
	FixedOpenWindow bool

	// ProbeConcurrency is optional: the most probes in flight in half-open.
	// Default 2; range 1..65536.
	ProbeConcurrency int

	// SuccessesToClose is optional: consecutive good probes needed to close
	// (or, for ramp and adaptive, to start admitting a share). It is a
	// separate setting from ProbeConcurrency. Default 5; range 1..65536.
	SuccessesToClose int

	// MaxProbeWait is optional: a half-open admission neither reported nor
	// cancelled within it counts as a failure, so a probe whose outcome is
	// lost cannot hold its slot. Default 30s, or SlowCallDuration if that is
	// larger; range >= SlowCallDuration (a healthy probe must be able to
	// report before it expires).
	//
	// There is no bound on the half-open state itself: a half-open breaker
	// that admits no call stays half-open, with its trip count unchanged,
	// until a probe is counted (absence of calls is not evidence).
	MaxProbeWait time.Duration

	// HalfOpenPolicy is optional: how the half-open state admits calls and
	// decides to close (single probe, capped probes, ramp or adaptive; see
	// [HalfOpenPolicy]). Default [HalfOpenCappedProbes].
	HalfOpenPolicy HalfOpenPolicy

	// RampSteps is optional (ramp policy): the admitted shares, strictly
	// increasing, each in (0,1], ending at 1. Default 0.10, 0.25, 0.50, 1.00.
	RampSteps []float64

	// RampStepDuration is optional (ramp policy): how long each step lasts and,
	// for the curve form, how often the failure rate is checked. Default 2s;
	// range > 0.
	RampStepDuration time.Duration

	// RampMaxFailureRate is optional (ramp policy): a step whose failure rate
	// (slow successes count as failures) reaches this, over at least
	// RampMinCalls calls, reopens the breaker. Default FailureRateThreshold;
	// range (0,1].
	RampMaxFailureRate float64

	// RampMinCalls is optional (ramp policy): calls a step needs before its
	// failure rate can reopen the breaker early. At the end of a step any
	// number of calls is judged. Default 10; range >= 1.
	RampMinCalls int

	// RampWindow is optional (ramp policy). When > 0 the ramp follows Envoy's
	// slow-start curve instead of steps: the share after t is
	// max(RampMinShare, (t/RampWindow)^(1/RampAggression)), closing at
	// t = RampWindow. Default 0: steps.
	RampWindow time.Duration

	// RampAggression is optional (curve form): the curve's aggression; 1 is
	// linear, larger admits more early. Default 1; range (0, 100].
	RampAggression float64

	// RampMinShare is optional (curve form): the share the curve starts at.
	// Default 0.1; range (0,1].
	RampMinShare float64

	// AdaptiveMinShare is optional (adaptive policy): the share it starts at
	// after the probes. Failures that persist here reopen the breaker: a
	// failure rate >= FailureRateThreshold over MinimumCalls calls admitted
	// at this share. When some calls succeed here and others fail (a
	// capacity below this share), the share backs off below it, to
	// AdaptiveMinShare/10 at the least; there, two failures without a
	// success reopen. Default 0.1; range (0,1).
	AdaptiveMinShare float64

	// AdaptiveInterval is optional (adaptive policy): how long the share is
	// judged before it changes; a clean interval doubles it while searching.
	// Default 500ms; range > 0.
	AdaptiveInterval time.Duration

	// AdaptiveIncrease is optional (adaptive policy): how far above the last
	// loss level a probe goes. Default 0.05; range (0,1].
	AdaptiveIncrease float64

	// AdaptiveHold is optional (adaptive policy): the clean intervals the
	// share holds at its backed-off level after a loss before it probes
	// above the loss level; it bounds the failures a dependency that stays
	// at a reduced capacity sees (one per probe) and how long after the
	// capacity returns the share starts to grow: a larger hold makes fewer
	// errors and reaches full traffic later (the README's "Choosing a
	// strategy" measures 2, 3 and 4). Default 2; range [1, 1000].
	AdaptiveHold int

	// AdaptiveBackoff is optional (adaptive policy): the multiplicative
	// decrease on a loss, applied to the goodput share measured at the loss.
	// Default 0.5; range (0,1).
	AdaptiveBackoff float64

	// AdaptiveTolerance is optional (adaptive policy): the loss rate, among
	// the calls admitted since the last change of share, tolerated without
	// backing off (judged from the second loss on; above the last loss level
	// one failure is a loss), so sporadic errors do not hold the share down;
	// an interval is clean when its loss rate is within it. Default 0.05;
	// range [0,1).
	AdaptiveTolerance float64

	// AdaptiveLatencyRatio is optional (adaptive policy): when the mean
	// latency of the successes in an interval exceeds this multiple of their
	// long-run mean, the share backs off as on a loss (the gradient signal;
	// not at the minimum share, where latency alone neither holds nor
	// reopens). The long-run mean follows every interval, so a lasting shift
	// becomes the new normal. Default 2; range >= 1, or < 0 to disable.
	AdaptiveLatencyRatio float64

	// HealthCheck is optional. When set (and the clock has timers), it is
	// called every HealthCheckInterval while the breaker is open: a nil error
	// ends the open state at once (real traffic then confirms recovery through
	// the half-open policy); an error holds the breaker open past its window
	// until a later check passes. Default nil: no health check.
	HealthCheck func(ctx context.Context) error

	// HealthCheckInterval is optional: how often HealthCheck is called while
	// the breaker is open. Default 1s; range > 0.
	HealthCheckInterval time.Duration

	// HealthCheckTimeout is optional: the deadline of each check's ctx.
	// Default HealthCheckInterval; range > 0.
	HealthCheckTimeout time.Duration

	// Classifier is optional: it maps a call's error to its outcome. Default:
	// nil is a success, any other error (context.Canceled included) a failure.
	// Map permanent errors, which say nothing about the dependency's health,
	// to OutcomeNeutral. It must be safe for concurrent use.
	Classifier func(err error) Outcome
}

// ConfigError is returned (wrapped) for an invalid setting. It matches
// [ErrInvalidConfig] with [errors.Is].
type ConfigError struct {
	// Field is the Config field at fault.
	Field string
	// Value is its value.
	Value any
	// Allowed describes the allowed range.
	Allowed string
}

// Error names the field, its value and the allowed range.
func (e *ConfigError) Error() string {
	return fmt.Sprintf("breaker: invalid config: %s = %v, allowed %s", e.Field, e.Value, e.Allowed)
}

// Is reports whether target is ErrInvalidConfig.
func (e *ConfigError) Is(target error) bool { return target == ErrInvalidConfig }

func invalid(field string, value any, allowed string) error {
	return &ConfigError{Field: field, Value: value, Allowed: allowed}
}

// setDefaults replaces zero values by their defaults.
func (c *Config) setDefaults() {
	if c.WindowSize == 0 {
		c.WindowSize = DefaultWindowSize
	}
	if c.WindowBuckets == 0 {
		c.WindowBuckets = DefaultWindowBuckets
	}
	if c.MinimumCalls == 0 {
		c.MinimumCalls = DefaultMinimumCalls
		if c.WindowDuration <= 0 && c.WindowSize > 0 && c.WindowSize < c.MinimumCalls {
			c.MinimumCalls = c.WindowSize
		}
	}
	if c.FailureRateThreshold == 0 {
		c.FailureRateThreshold = DefaultFailureRateThreshold
	}
	if c.SlowCallDuration == 0 {
		c.SlowCallDuration = DefaultSlowCallDuration
	}
	if c.BaseOpenWindow == 0 {
		c.BaseOpenWindow = DefaultBaseOpenWindow
	}
	if c.MaxOpenWindow == 0 {
		c.MaxOpenWindow = max(DefaultMaxOpenWindow, c.BaseOpenWindow)
	}
	if c.BackoffFactor == 0 {
		c.BackoffFactor = DefaultBackoffFactor
	}
	if c.Jitter == 0 && !c.DisableJitter {
		c.Jitter = DefaultJitter
	}
	if c.ProbeConcurrency == 0 {
		c.ProbeConcurrency = DefaultProbeConcurrency
	}
	if c.SuccessesToClose == 0 {
		c.SuccessesToClose = DefaultSuccessesToClose
	}
	if c.MaxProbeWait == 0 {
		c.MaxProbeWait = max(DefaultMaxProbeWait, c.SlowCallDuration)
	}
	if c.RampSteps == nil {
		c.RampSteps = DefaultRampSteps()
	}
	if c.RampStepDuration == 0 {
		c.RampStepDuration = DefaultRampStepDuration
	}
	if c.RampMaxFailureRate == 0 {
		c.RampMaxFailureRate = c.FailureRateThreshold
	}
	if c.RampMinCalls == 0 {
		c.RampMinCalls = DefaultRampMinCalls
	}
	if c.RampAggression == 0 {
		c.RampAggression = DefaultRampAggression
	}
	if c.RampMinShare == 0 {
		c.RampMinShare = DefaultRampMinShare
	}
	if c.AdaptiveMinShare == 0 {
		c.AdaptiveMinShare = DefaultAdaptiveMinShare
	}
	if c.AdaptiveInterval == 0 {
		c.AdaptiveInterval = DefaultAdaptiveInterval
	}
	if c.AdaptiveIncrease == 0 {
		c.AdaptiveIncrease = DefaultAdaptiveIncrease
	}
	if c.AdaptiveHold == 0 {
		c.AdaptiveHold = DefaultAdaptiveHold
	}
	if c.AdaptiveBackoff == 0 {
		c.AdaptiveBackoff = DefaultAdaptiveBackoff
	}
	if c.AdaptiveTolerance == 0 {
		c.AdaptiveTolerance = DefaultAdaptiveTolerance
	}
	if c.AdaptiveLatencyRatio == 0 {
		c.AdaptiveLatencyRatio = DefaultAdaptiveLatencyRatio
	}
	if c.HealthCheckInterval == 0 {
		c.HealthCheckInterval = DefaultHealthCheckInterval
	}
	if c.HealthCheckTimeout == 0 && c.HealthCheckInterval > 0 {
		c.HealthCheckTimeout = c.HealthCheckInterval
	}
}

// Validate reports whether c, with defaults applied to its zero fields, is
// valid: the check [New] makes. It does not modify c. The error wraps
// [ErrInvalidConfig] (as a [*ConfigError]) and names the field and its
// allowed range.
func (c Config) Validate() error {
	c.setDefaults()
	return c.validate()
}

func badRate(f float64) bool { return math.IsNaN(f) || math.IsInf(f, 0) }

// validate checks a configuration whose defaults are set.
func (c *Config) validate() error {
	if c.WindowDuration < 0 {
		return invalid("WindowDuration", c.WindowDuration, "0 (count-based) or > 0 (time-based)")
	}
	if c.WindowDuration == 0 {
		if c.WindowSize < 1 || c.WindowSize > maxWindowSize {
			return invalid("WindowSize", c.WindowSize, fmt.Sprintf("1..%d", maxWindowSize))
		}
		if c.MinimumCalls < 1 || c.MinimumCalls > c.WindowSize {
			return invalid("MinimumCalls", c.MinimumCalls, fmt.Sprintf("1..WindowSize (%d)", c.WindowSize))
		}
	} else {
		if c.WindowBuckets < 1 || c.WindowBuckets > maxWindowBuckets {
			return invalid("WindowBuckets", c.WindowBuckets, fmt.Sprintf("1..%d", maxWindowBuckets))
		}
		if c.WindowDuration/time.Duration(c.WindowBuckets) < time.Millisecond {
			return invalid("WindowDuration", c.WindowDuration, "WindowDuration/WindowBuckets >= 1ms")
		}
		if c.MinimumCalls < 1 {
			return invalid("MinimumCalls", c.MinimumCalls, ">= 1")
		}
	}
	if badRate(c.FailureRateThreshold) || c.FailureRateThreshold <= 0 || c.FailureRateThreshold > 1 {
		return invalid("FailureRateThreshold", c.FailureRateThreshold, "(0,1]")
	}
	if c.SlowCallDuration <= 0 {
		return invalid("SlowCallDuration", c.SlowCallDuration, "> 0")
	}
	if badRate(c.SlowCallRateThreshold) || c.SlowCallRateThreshold < 0 || c.SlowCallRateThreshold > 1 {
		return invalid("SlowCallRateThreshold", c.SlowCallRateThreshold, "[0,1] (0 disables)")
	}
	if c.ConsecutiveFailures < 0 {
		return invalid("ConsecutiveFailures", c.ConsecutiveFailures, ">= 0 (0 disables)")
	}
	if c.BaseOpenWindow <= 0 || c.BaseOpenWindow > MaxOpenWindowLimit {
		return invalid("BaseOpenWindow", c.BaseOpenWindow, fmt.Sprintf("(0, %v]", MaxOpenWindowLimit))
	}
	if c.MaxOpenWindow < c.BaseOpenWindow || c.MaxOpenWindow > MaxOpenWindowLimit {
		return invalid("MaxOpenWindow", c.MaxOpenWindow, fmt.Sprintf("[BaseOpenWindow (%v), %v]", c.BaseOpenWindow, MaxOpenWindowLimit))
	}
	if badRate(c.BackoffFactor) || c.BackoffFactor < 1 || c.BackoffFactor > 1000 {
		return invalid("BackoffFactor", c.BackoffFactor, "[1, 1000]")
	}
	if badRate(c.Jitter) || c.Jitter < 0 || c.Jitter >= 1 {
		return invalid("Jitter", c.Jitter, "[0,1)")
	}
	if c.ProbeConcurrency < 1 || c.ProbeConcurrency > maxProbes {
		return invalid("ProbeConcurrency", c.ProbeConcurrency, fmt.Sprintf("1..%d", maxProbes))
	}
	if c.SuccessesToClose < 1 || c.SuccessesToClose > maxProbes {
		return invalid("SuccessesToClose", c.SuccessesToClose, fmt.Sprintf("1..%d", maxProbes))
	}
	if c.MaxProbeWait <= 0 {
		return invalid("MaxProbeWait", c.MaxProbeWait, "> 0")
	}
	if c.MaxProbeWait < c.SlowCallDuration {
		return invalid("MaxProbeWait", c.MaxProbeWait, fmt.Sprintf(
			">= SlowCallDuration (%v) (rule SlowCallDuration <= MaxProbeWait: a probe within SlowCallDuration must be able to report before it expires)", c.SlowCallDuration))
	}
	if c.HalfOpenPolicy < HalfOpenCappedProbes || c.HalfOpenPolicy > HalfOpenAdaptive {
		return invalid("HalfOpenPolicy", c.HalfOpenPolicy, "HalfOpenCappedProbes, HalfOpenSingleProbe, HalfOpenRamp or HalfOpenAdaptive")
	}
	if len(c.RampSteps) == 0 || len(c.RampSteps) > maxRampSteps {
		return invalid("RampSteps", c.RampSteps, fmt.Sprintf("1..%d steps", maxRampSteps))
	}
	prev := 0.0
	for i, s := range c.RampSteps {
		if badRate(s) || s <= prev || s > 1 {
			return invalid(fmt.Sprintf("RampSteps[%d]", i), s, fmt.Sprintf("(%v, 1], strictly increasing", prev))
		}
		prev = s
	}
	if prev != 1 {
		return invalid("RampSteps", c.RampSteps, "last step = 1 (100 %)")
	}
	if c.RampStepDuration <= 0 {
		return invalid("RampStepDuration", c.RampStepDuration, "> 0")
	}
	if badRate(c.RampMaxFailureRate) || c.RampMaxFailureRate <= 0 || c.RampMaxFailureRate > 1 {
		return invalid("RampMaxFailureRate", c.RampMaxFailureRate, "(0,1]")
	}
	if c.RampMinCalls < 1 {
		return invalid("RampMinCalls", c.RampMinCalls, ">= 1")
	}
	if c.RampWindow < 0 {
		return invalid("RampWindow", c.RampWindow, "0 (steps) or > 0 (curve)")
	}
	if badRate(c.RampAggression) || c.RampAggression <= 0 || c.RampAggression > 100 {
		return invalid("RampAggression", c.RampAggression, "(0, 100]")
	}
	if badRate(c.RampMinShare) || c.RampMinShare <= 0 || c.RampMinShare > 1 {
		return invalid("RampMinShare", c.RampMinShare, "(0,1]")
	}
	if badRate(c.AdaptiveMinShare) || c.AdaptiveMinShare <= 0 || c.AdaptiveMinShare >= 1 {
		return invalid("AdaptiveMinShare", c.AdaptiveMinShare, "(0,1)")
	}
	if c.AdaptiveInterval <= 0 {
		return invalid("AdaptiveInterval", c.AdaptiveInterval, "> 0")
	}
	if badRate(c.AdaptiveIncrease) || c.AdaptiveIncrease <= 0 || c.AdaptiveIncrease > 1 {
		return invalid("AdaptiveIncrease", c.AdaptiveIncrease, "(0,1]")
	}
	if c.AdaptiveHold < 1 || c.AdaptiveHold > maxAdaptiveHold {
		return invalid("AdaptiveHold", c.AdaptiveHold, fmt.Sprintf("[1, %d] intervals", maxAdaptiveHold))
	}
	if badRate(c.AdaptiveBackoff) || c.AdaptiveBackoff <= 0 || c.AdaptiveBackoff >= 1 {
		return invalid("AdaptiveBackoff", c.AdaptiveBackoff, "(0,1)")
	}
	if badRate(c.AdaptiveTolerance) || c.AdaptiveTolerance < 0 || c.AdaptiveTolerance >= 1 {
		return invalid("AdaptiveTolerance", c.AdaptiveTolerance, "[0,1)")
	}
	if badRate(c.AdaptiveLatencyRatio) || (c.AdaptiveLatencyRatio >= 0 && c.AdaptiveLatencyRatio < 1) {
		return invalid("AdaptiveLatencyRatio", c.AdaptiveLatencyRatio, ">= 1, or < 0 to disable")
	}
	if c.HealthCheckInterval <= 0 {
		return invalid("HealthCheckInterval", c.HealthCheckInterval, "> 0")
	}
	if c.HealthCheckTimeout <= 0 {
		return invalid("HealthCheckTimeout", c.HealthCheckTimeout, "> 0")
	}
	return nil
}
