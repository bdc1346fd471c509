package deliver

import (
	"errors"
	"strconv"
	"strings"
	"time"
)

// ErrRetryable marks a failed delivery that may succeed if the same message
// is sent again later: the message is kept and retried (at-least-once).
var ErrRetryable = errors.New("deliver: retryable")

// ErrPermanent marks a failed delivery that cannot succeed by sending the same
// message again: the message goes to the dead letter.
var ErrPermanent = errors.New("deliver: permanent")

// Error describes a failed delivery.
//
// errors.Is(err, ErrRetryable) or errors.Is(err, ErrPermanent) reports its
// Kind, and errors.Is / errors.As reach Cause through Unwrap. The zero Kind
// (nil) is treated as retryable by [IsRetryable].
type Error struct {
	// Kind is ErrRetryable or ErrPermanent.
	Kind error
	// Op names the operation that failed, e.g. "as2 send".
	Op string
	// StatusCode is the HTTP status of the response, or 0 if none was received.
	StatusCode int
	// Disposition is the MDN disposition as received (e.g.
	// "automatic-action/MDN-sent-automatically; processed/error:
	// authentication-failed"), or "" if no MDN was parsed.
	Disposition string
	// RetryAfter is the partner's Retry-After hint, or 0 if it gave none.
	// It is a minimum delay before the next attempt, never a promise.
	RetryAfter time.Duration
	// Cause is the underlying error, or nil.
	Cause error
}

// Error returns "<op>: <kind> (HTTP <status>, disposition "<d>", retry after
// <d>): <cause>", leaving out the parts that are unset.
func (e *Error) Error() string {
	var b strings.Builder
	if e.Op != "" {
		b.WriteString(e.Op)
		b.WriteString(": ")
	}
	switch e.Kind {
	case ErrPermanent:
		b.WriteString("permanent failure")
	default:
		b.WriteString("retryable failure")
	}
	var details []string
	if e.StatusCode != 0 {
		details = append(details, "HTTP "+strconv.Itoa(e.StatusCode))
	}
	if e.Disposition != "" {
		details = append(details, "disposition "+strconv.Quote(e.Disposition))
	}
	if e.RetryAfter > 0 {
		details = append(details, "retry after "+e.RetryAfter.String())
	}
	if len(details) > 0 {
		b.WriteString(" (")
		b.WriteString(strings.Join(details, ", "))
		b.WriteString(")")
	}
	if e.Cause != nil {
		b.WriteString(": ")
		b.WriteString(e.Cause.Error())
	}
	return b.String()
}

// Is reports whether target is the error's Kind, so that
// errors.Is(err, ErrPermanent) works on any chain holding an *Error.
func (e *Error) Is(target error) bool {
	return target != nil && target == e.Kind
}

// Unwrap returns Cause.
func (e *Error) Unwrap() error { return e.Cause }

// RetryAfterDelay returns RetryAfter: the partner's minimum delay before the
// next attempt, 0 when it gave none (and for a nil *Error). With it *Error
// implements [github.com/floodgate-go/floodgate/retryqueue.RetryAfterError],
// so a message diverted after this failure is not drained again before
// then (within the retry queue's MaxRetryAfter cap).
func (e *Error) RetryAfterDelay() time.Duration {
	if e == nil {
		return 0
	}
	return e.RetryAfter
}
