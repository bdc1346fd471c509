package deliver

import (
	"errors"
	"strings"
)

// ErrWarning is the sentinel of every [*Warning]: errors.Is(err,
// ErrWarning) reports a delivery that succeeded with a warning.
var ErrWarning = errors.New("deliver: delivered with a warning")

// Reasons of the warnings of this module's senders: the values of
// [Warning.Reason] that metrics count under their own label (any other
// reason is counted as "other").
const (
	// WarnUnconfirmed: the partner accepted the message (HTTP 2xx) but gave
	// no readable receipt where one was asked for: delivered, unconfirmed.
	WarnUnconfirmed = "unconfirmed"
	// WarnMDNUnsigned: a signed receipt was asked for as optional and the
	// partner answered with an unsigned one (RFC 4130 §7.3 allows it).
	WarnMDNUnsigned = "mdn-unsigned"
	// WarnMICMissing: the receipt says processed but carries no
	// Received-Content-MIC, so it does not prove which content was received.
	WarnMICMissing = "mic-missing"
	// WarnMICMismatch: the receipt says processed but its
	// Received-Content-MIC is not the one computed for the message sent,
	// and the partner's policy downgrades that to a warning.
	WarnMICMismatch = "mic-mismatch"
	// WarnMDNWarning: the receipt's disposition is "processed/warning: ..."
	// (RFC 4130 §7.4.3): the partner processed the message but reports a
	// problem, e.g. a duplicate document.
	WarnMDNWarning = "mdn-warning"
)

// WarnReasons returns the Warn* reasons, in a new slice.
func WarnReasons() []string {
	return []string{WarnUnconfirmed, WarnMDNUnsigned, WarnMICMissing, WarnMICMismatch, WarnMDNWarning}
}

// Warning reports a delivery that succeeded with a flaw: the partner took
// the message, but its answer is imperfect (an unsigned receipt where a
// signed one was asked for, a receipt without a MIC, no receipt at all).
// Sending the message again would deliver it twice, so it is a success:
// [IsWarning] is true, [IsRetryable] and [IsPermanent] are false, and the
// floodgate middleware acks the message, reports a success to the breaker
// and carries the Warning in its event
// ([github.com/floodgate-go/floodgate/middleware.Event.Warning]).
//
// A sender returns it where it would return nil. It must never wrap a
// failure: a *Warning anywhere in an error's chain makes the error a
// success.
type Warning struct {
	// Op names the operation, e.g. "as2 send"; "" when unset.
	Op string
	// Reason is a short, fixed label of what was imperfect: one of the
	// Warn* constants, such as [WarnUnconfirmed], or a constant of the
	// sender's own (counted as "other" by the metrics package). Never
	// text from the partner's answer.
	Reason string
	// Cause says what happened in detail, or nil.
	Cause error
}

// Warn returns a [*Warning] with reason and cause (either may be empty or
// nil).
func Warn(reason string, cause error) error {
	return &Warning{Reason: reason, Cause: cause}
}

// Error returns "<op>: delivered with a warning (<reason>): <cause>",
// leaving out the parts that are unset.
func (w *Warning) Error() string {
	var b strings.Builder
	if w.Op != "" {
		b.WriteString(w.Op)
		b.WriteString(": ")
	}
	b.WriteString("delivered with a warning")
	if w.Reason != "" {
		b.WriteString(" (")
		b.WriteString(w.Reason)
		b.WriteString(")")
	}
	if w.Cause != nil {
		b.WriteString(": ")
		b.WriteString(w.Cause.Error())
	}
	return b.String()
}

// Is reports whether target is [ErrWarning].
func (w *Warning) Is(target error) bool { return target == ErrWarning }

// Unwrap returns Cause.
func (w *Warning) Unwrap() error { return w.Cause }

// AsWarning returns the first [*Warning] in err's chain, or nil when there
// is none (and for nil).
func AsWarning(err error) *Warning {
	var w *Warning
	if err != nil && errors.As(err, &w) {
		return w
	}
	return nil
}

// IsWarning reports whether err is a success with a warning: its chain
// holds a [*Warning]. It returns false for nil.
func IsWarning(err error) bool { return AsWarning(err) != nil }
