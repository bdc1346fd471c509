package breaker

import (
	"fmt"
	"time"
)

// State is the state of a [Breaker]. The zero value is [StateClosed].
type State int32

const (
	// StateClosed admits every call and judges outcomes over the sliding window.
	StateClosed State = iota
	// StateOpen rejects every call with [ErrOpen] until the open window ends.
	StateOpen
	// StateHalfOpen admits probes (and, for the ramp and adaptive policies, a
	// growing share of traffic) to find out whether the dependency recovered.
	StateHalfOpen
)

// String returns "closed", "open" or "half-open".
func (s State) String() string {
	switch s {
	case StateClosed:
		return "closed"
	case StateOpen:
		return "open"
	case StateHalfOpen:
		return "half-open"
	default:
		return fmt.Sprintf("State(%d)", int32(s))
	}
}

// Outcome is the judgement of one call, made by [Config.Classifier] or given
// to [Permit.Record].
type Outcome int

const (
	// OutcomeSuccess is a call that did what was asked. A success slower than
	// [Config.SlowCallDuration] is a slow call; in half-open it counts as a
	// failure.
	OutcomeSuccess Outcome = iota
	// OutcomeFailure is a call that failed in a way that says the dependency is
	// unhealthy (timeouts, connection errors, 5xx, 429, cancelled probes).
	OutcomeFailure
	// OutcomeNeutral is not counted at all: a permanent error caused by the
	// request itself, or a shutdown cancellation. It only frees the permit.
	OutcomeNeutral
)

// String returns "success", "failure" or "neutral".
func (o Outcome) String() string {
	switch o {
	case OutcomeSuccess:
		return "success"
	case OutcomeFailure:
		return "failure"
	case OutcomeNeutral:
		return "neutral"
	default:
		return fmt.Sprintf("Outcome(%d)", int(o))
	}
}

// Transition describes one change of state. Listeners added with
// [Breaker.AddListener] receive it after the breaker's lock is released.
type Transition struct {
	// From and To are the states before and after.
	From, To State
	// Reason says why, in words, e.g. "failure rate 0.60 >= 0.50 over 10 calls".
	Reason string
	// At is the clock time of the transition. A breaker without timers (a
	// plain Clock) notices time-driven transitions on its next call, and
	// dates them then.
	At time.Time
	// Window is the (jittered) open window when To is StateOpen, else 0.
	Window time.Duration
	// Breaker is the breaker's [Config.Name].
	Breaker string
	// Generation is the state period the breaker entered (it grows by one on
	// every transition).
	Generation uint64
	// ConsecutiveTrips counts the trips since the last clean close, including
	// this one when To is StateOpen.
	ConsecutiveTrips int

	// period is, for a transition out of half-open in a fleet, the shared
	// half-open period the breaker was in (0: unknown), so that the fleet
	// does not apply the verdict of an ended period (fleet.go).
	period uint64
}

// Snapshot is a consistent view of a breaker, taken under its lock by
// [Breaker.Snapshot].
type Snapshot struct {
	// State is the current state; an open breaker whose window ended reports
	// half-open.
	State State
	// Generation is the current state period. It grows by one per transition.
	Generation uint64
	// ConsecutiveTrips counts trips since the last clean close.
	ConsecutiveTrips int
	// OpenWindow is the jittered length of the current (or last) open window.
	OpenWindow time.Duration
	// OpenWindowStep is the unjittered step OpenWindow was drawn around.
	OpenWindowStep time.Duration
	// OpenUntil is when the current open window ends; zero unless open. It is
	// zero too while the breaker is forced open.
	OpenUntil time.Time
	// ProbesInFlight counts half-open admissions not yet reported.
	ProbesInFlight int
	// ConsecutiveSuccesses counts good probes in a row in the current half-open
	// period.
	ConsecutiveSuccesses int
	// Calls, Failures and SlowCalls count the outcomes in the current sliding
	// window (closed state), or in the current step or interval of a ramp or
	// adaptive recovery.
	Calls, Failures, SlowCalls int
	// Stale counts reported results discarded because their call was admitted
	// in an earlier state period. (The late report of a probe that already
	// expired after MaxProbeWait is ignored, not counted: its failure was.)
	Stale uint64
	// AdmittedShare is the share of offered calls being admitted, 0..1: 1 when
	// closed, 0 when open or while only probes are admitted, the current step or
	// share during a ramp or adaptive recovery.
	AdmittedShare float64
	// Forced reports that the breaker was forced open or closed by
	// [Breaker.ForceOpen] or [Breaker.ForceClose] and ignores outcomes until
	// [Breaker.Reset].
	Forced bool
	// Trips counts every trip since the breaker was created.
	Trips uint64
}
