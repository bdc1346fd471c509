package breaker

import "errors"

// Sentinel errors. Test for them with [errors.Is]; the errors the breaker
// returns wrap them and may carry the breaker's [Config.Name].
var (
	// ErrOpen is returned by [Breaker.Allow] while the breaker is open: the
	// call is rejected without reaching the dependency.
	ErrOpen = errors.New("breaker: open")

	// ErrProbeLimit is returned by [Breaker.Allow] in the half-open state when
	// the call cannot be admitted: the probes in flight have reached
	// [Config.ProbeConcurrency], or (ramp and adaptive policies) the call falls
	// outside the share of traffic being admitted. Errors that match
	// [ErrThrottled] also match ErrProbeLimit.
	ErrProbeLimit = errors.New("breaker: probe limit")

	// ErrThrottled is returned by [Breaker.Allow] in the half-open state of the
	// ramp and adaptive policies for a call outside the admitted share of
	// traffic. It always also matches [ErrProbeLimit], so callers that only know
	// the half-open rejection keep working.
	ErrThrottled = errors.New("breaker: throttled during recovery")

	// ErrInvalidConfig is wrapped by every error from [Config.Validate] and
	// [New]; the message names the field and its allowed range.
	ErrInvalidConfig = errors.New("breaker: invalid config")
)

// RejectedError is the error [Breaker.Allow] returns when it rejects a call.
// It matches its cause ([ErrOpen], [ErrProbeLimit] or [ErrThrottled]) with
// [errors.Is]. The breaker keeps one RejectedError per cause, so rejecting
// does not allocate; treat it as read-only.
type RejectedError struct {
	// Breaker is the [Config.Name] of the breaker that rejected the call.
	Breaker string
	// State is the state in which the call was rejected.
	State State
	// Cause is ErrOpen, ErrProbeLimit or ErrThrottled.
	Cause error
	msg   string
}

func newRejectedError(name string, st State, cause error) *RejectedError {
	msg := cause.Error()
	if name != "" {
		msg += " (breaker " + quote(name) + ")"
	}
	return &RejectedError{Breaker: name, State: st, Cause: cause, msg: msg}
}

// Error returns the cause's message, followed by the breaker's name if it has one.
func (e *RejectedError) Error() string { return e.msg }

// Unwrap returns the cause.
func (e *RejectedError) Unwrap() error { return e.Cause }

// Is reports whether target is the cause; a throttled rejection also matches
// [ErrProbeLimit].
func (e *RejectedError) Is(target error) bool {
	return target == e.Cause || (e.Cause == ErrThrottled && target == ErrProbeLimit)
}

func quote(s string) string { return "\"" + s + "\"" }

// Errors of the fleet seam ([Store], [Fleet]).
var (
	// ErrStaleRevision is returned by [Store.CompareAndSwap] when the stored
	// revision is not the expected one: another writer got there first.
	ErrStaleRevision = errors.New("breaker: stale revision")

	// ErrNoProbeSlot is returned by [Store.AcquireProbe] when every probe
	// slot of the fleet is held.
	ErrNoProbeSlot = errors.New("breaker: no free probe slot")

	// ErrFleetJoined is returned by [JoinFleet] for a breaker that is
	// already in a fleet.
	ErrFleetJoined = errors.New("breaker: already in a fleet")

	// ErrStoreDown is returned by a [MemoryStore] set unreachable with
	// [MemoryStore.SetDown].
	ErrStoreDown = errors.New("breaker: memory store unreachable")
)
