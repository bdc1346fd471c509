package deliver

import (
	"errors"
	"strings"
)

// ErrParked is the sentinel of every [*ParkError]: errors.Is(err,
// ErrParked) reports a failure that parks the partner.
var ErrParked = errors.New("deliver: partner parked")

// Reasons of the park errors of this module's senders: the values of
// [ParkError.Reason].
const (
	// ParkAS2Trust: the partner's certificate is not trusted (expired, not
	// yet valid, not the pinned one, not chained to the configured CA), or
	// a receipt the profile requires signed came unsigned.
	ParkAS2Trust = "as2-trust"
)

// ParkError reports a failure that will repeat for every message to this
// partner until an operator changes its configuration: its certificate is
// expired, or not the one pinned. Sending other messages cannot help and
// must not be counted against the partner's health, yet no message may be
// lost. The floodgate middleware forces the partner's breaker open with
// the error's text as its reason (breaker.Breaker.ForceOpenReason, shown
// by "floodgate status"), diverts the message to the retry stream, and
// keeps every later message of the partner there, until an operator fixes
// the configuration and runs "floodgate close" (or "reset"). Other
// partners are not affected.
//
// A ParkError is neither permanent nor a warning: [IsRetryable] is true,
// so a caller without the middleware keeps the message and retries it.
// Its Cause normally holds a retryable [*Error] with the HTTP details.
type ParkError struct {
	// Op names the operation, e.g. "as2 send"; "" when unset.
	Op string
	// Reason is a short, fixed label of why the partner is parked: one of
	// the Park* constants, such as [ParkAS2Trust]. Never text from the
	// partner's answer.
	Reason string
	// Cause says what happened in detail (a certificate's subject and
	// serial, never a key or a secret).
	Cause error
}

// Error returns "<op>: partner parked (<reason>): <cause>", leaving out the
// parts that are unset.
func (e *ParkError) Error() string {
	var b strings.Builder
	if e.Op != "" {
		b.WriteString(e.Op)
		b.WriteString(": ")
	}
	b.WriteString("partner parked")
	if e.Reason != "" {
		b.WriteString(" (")
		b.WriteString(e.Reason)
		b.WriteString(")")
	}
	if e.Cause != nil {
		b.WriteString(": ")
		b.WriteString(e.Cause.Error())
	}
	return b.String()
}

// Is reports whether target is [ErrParked].
func (e *ParkError) Is(target error) bool { return target == ErrParked }

// Unwrap returns Cause.
func (e *ParkError) Unwrap() error { return e.Cause }

// AsPark returns the first [*ParkError] in err's chain, or nil when there
// is none (and for nil). A [*Warning] in the chain wins: a warned success
// never parks.
func AsPark(err error) *ParkError {
	var p *ParkError
	if err != nil && !IsWarning(err) && errors.As(err, &p) {
		return p
	}
	return nil
}
