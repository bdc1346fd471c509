package middleware

import (
	"errors"
	"fmt"
	"time"
)

// ErrNotAttempted marks a handler error as a refusal before the partner was
// contacted: a throttle, rate limiter or bulkhead inside the handler had no
// room for the call. Return it wrapped (fmt.Errorf("pool full: %w",
// middleware.ErrNotAttempted)) or as a [*NotAttemptedError] built by
// [NotAttempted], which can carry a Retry-After. The middleware then
// cancels the breaker's permit (the slot, and a fleet's probe lease, is
// freed and nothing is counted, for a probe too: the breaker stays as it
// was) and diverts the message with reason "not-attempted"
// ([retryqueue.ReasonNotAttempted]) without counting an attempt. The
// queue spaces such refusals with a backoff on their own counter
// ([retryqueue.MetaNotAttempted]), so a handler that always refuses
// cannot loop, and [retryqueue.Config.MaxAge] still dead-letters the
// message. It wins over [Config.IsPermanent] and the breaker's Classifier.
var ErrNotAttempted = errors.New("middleware: not attempted")

// NotAttemptedError is a refusal before the partner was contacted, with an
// optional minimum delay before the message is handed over again. It
// matches [ErrNotAttempted] with errors.Is, unwraps to Err, and implements
// [retryqueue.RetryAfterError], so the queue sets the message's
// [retryqueue.MetaNotBefore] to the refusal time plus the larger of the
// backoff and RetryAfter (capped at [retryqueue.Config.MaxRetryAfter] and
// at the MaxAge deadline). Safe for concurrent use once built.
type NotAttemptedError struct {
	// RetryAfter is the refuser's own estimate of when it has room (for
	// example a [golang.org/x/time/rate.Reservation]'s Delay); 0 (or
	// negative) for none. It never shortens the backoff.
	RetryAfter time.Duration
	// Err says why the call was refused; may be nil.
	Err error
}

// NotAttempted returns a [*NotAttemptedError] for cause (may be nil) and
// retryAfter (0: no hint).
func NotAttempted(cause error, retryAfter time.Duration) error {
	return &NotAttemptedError{RetryAfter: retryAfter, Err: cause}
}

// Error returns "middleware: not attempted", then the retry-after hint and
// the cause when set.
func (e *NotAttemptedError) Error() string {
	s := ErrNotAttempted.Error()
	if e.RetryAfter > 0 {
		s += fmt.Sprintf(" (retry after %v)", e.RetryAfter)
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Is reports whether target is [ErrNotAttempted].
func (e *NotAttemptedError) Is(target error) bool { return target == ErrNotAttempted }

// Unwrap returns the cause.
func (e *NotAttemptedError) Unwrap() error { return e.Err }

// RetryAfterDelay returns RetryAfter; it implements
// [retryqueue.RetryAfterError].
func (e *NotAttemptedError) RetryAfterDelay() time.Duration { return e.RetryAfter }

// PanicError is the error a panicking handler is reported with. The call
// counts as a failure and the message is diverted like any retryable
// failure, so its attempts are counted and a message that always panics is
// dead-lettered after the retry queue's MaxAttempts instead of looping.
type PanicError struct {
	// Value is what the handler panicked with.
	Value any
	// Stack is the panicking goroutine's stack.
	Stack []byte
}

// Error returns "handler panicked: " and the panic value.
func (e *PanicError) Error() string { return fmt.Sprintf("handler panicked: %v", e.Value) }

// ErrNoPartner is the cause (in [Event.Err] and the dead letter's
// MetaLastError) of a message dead-lettered with [DeadReasonNoPartner]:
// in per-partner mode, [Config.PartnerKey] returned "" (or panicked) and
// there is no [Config.DefaultPartner], or a drained message's route has no
// known partner key.
var ErrNoPartner = errors.New("middleware: no partner key")

// ErrMetadataTooLarge is the cause (in [Event.Err] and the dead letter's
// MetaLastError) of a message dead-lettered with
// [DeadReasonMetadataTooLarge]: its own metadata is larger than
// [Config.MaxMetadataSize]. The error gives the size, the number of keys
// and the limit; it never quotes a key or value, which may hold a secret.
var ErrMetadataTooLarge = errors.New("middleware: metadata too large")
