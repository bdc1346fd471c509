package sim

import (
	"time"

	"github.com/floodgate-go/floodgate/breaker"
)

// Never is the value of [Result.TimeToClose] or [Result.TimeToFullTraffic]
// when the moment did not come before the end of the run.
const Never time.Duration = -1

// SeriesStep is the width of one point of [Series]: 100 ms.
const SeriesStep = 100 * time.Millisecond

// Result holds the metrics of one strategy in one scenario. "After
// recovery" means from [Scenario.RecoverAt] on.
type Result struct {
	// Strategy is the strategy's name.
	Strategy string

	// ErrorsAfterRecovery counts the calls admitted after recovery that
	// failed, or succeeded slower than [Scenario.SlowCallDuration].
	ErrorsAfterRecovery int

	// RetripsAfterRecovery counts the transitions into open after recovery,
	// from closed (a re-trip) or from half-open (a failed probe or ramp
	// step), except a trip on the outcome of a call admitted before recovery
	// (a probe sent into the outage that failed just after it ended).
	RetripsAfterRecovery int

	// TimeToClose is the time from recovery to the last transition into
	// closed; 0 if the breaker was closed at recovery and stayed closed;
	// [Never] if it is not closed at the end of the run.
	TimeToClose time.Duration

	// TimeToFullTraffic is the time from recovery until the breaker admits
	// every offered call, without a rejection, to the end of the run; 0 if it
	// did so from recovery on; [Never] if the last offered call was rejected.
	TimeToFullTraffic time.Duration

	// MaxProbesInFlight is the largest number of calls admitted in one
	// half-open period (probes, and ramp or adaptive calls) that were in
	// flight at the dependency at once.
	MaxProbesInFlight int

	// ProbesDuringOutage counts the calls admitted in half-open while the
	// dependency was down (or slow).
	ProbesDuringOutage int

	// ProbeBursts counts the transitions into half-open during the outage:
	// how often the strategy went to test a dependency that was still down.
	ProbeBursts int

	// Diverted counts the calls the breaker rejected over the whole run
	// (open, probe limit or outside the admitted share); the middleware
	// diverts them to the retry queue.
	Diverted int

	// Offered and Admitted count the calls offered and admitted over the
	// whole run (fresh arrivals; Redelivered counts the backlog's).
	Offered, Admitted int

	// Redelivered counts the backlog's calls admitted when the backlog was
	// drained (with [Scenario.Backlog]; 0 without).
	Redelivered int

	// BacklogPeak is the largest number of calls waiting in the backlog
	// (with [Scenario.Backlog]; 0 without).
	BacklogPeak int

	// BacklogLeft is the number of calls still waiting in the backlog at
	// the end of the run.
	BacklogLeft int

	// TimeToDrain is the time from recovery until the backlog last became
	// empty; 0 if it was empty from recovery on (always, without
	// [Scenario.Backlog]); [Never] if calls are left at the end.
	TimeToDrain time.Duration

	// Transitions lists every transition of the breaker, in order.
	Transitions []Transition

	// Series has one point per [SeriesStep] of the run.
	Series Series
}

// Transition is one change of the breaker's state, at an offset from the
// start of the run.
type Transition struct {
	// At is the offset from the start of the run.
	At time.Duration
	// From and To are the states before and after.
	From, To breaker.State
	// Reason is the breaker's reason.
	Reason string
	// Window is the open window when To is open, else 0.
	Window time.Duration
}

// Series is the run seen in steps of [SeriesStep]: point i covers
// [i×Step, (i+1)×Step).
type Series struct {
	// Step is the width of a point: [SeriesStep].
	Step time.Duration
	// State is the breaker's state at the end of each point.
	State []breaker.State
	// Offered, Admitted and Errors count the calls offered, admitted, and
	// completed with a failure or a slow success, in each point.
	Offered, Admitted, Errors []int
	// Share is the breaker's own admitted share at the end of each point
	// ([breaker.Snapshot.AdmittedShare]).
	Share []float64
}

// Len returns the number of points.
func (s *Series) Len() int { return len(s.State) }

// AdmittedShare returns the share of offered calls admitted in point i, in
// [0,1]; when no call was offered in it, the breaker's own share. It panics
// if i is outside [0, Len()).
func (s *Series) AdmittedShare(i int) float64 {
	if s.Offered[i] == 0 {
		return s.Share[i]
	}
	return float64(s.Admitted[i]) / float64(s.Offered[i])
}

// ErrorShare returns the errors in point i as a share of the calls offered
// in it (0 when none was offered). It can exceed 1 when calls admitted
// earlier complete in the point. It panics if i is outside [0, Len()).
func (s *Series) ErrorShare(i int) float64 {
	if s.Offered[i] == 0 {
		return 0
	}
	return float64(s.Errors[i]) / float64(s.Offered[i])
}
