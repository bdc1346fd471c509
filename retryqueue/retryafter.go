package retryqueue

import (
	"errors"
	"time"
)

// RetryAfterError is a failed delivery that carries the partner's
// Retry-After hint (RFC 9110 §10.2.3, delay-seconds or HTTP-date, sent with
// 503 Service Unavailable and with 429 Too Many Requests, RFC 6585 §4): the
// minimum delay before the message is tried again.
//
// When [Queue.Divert] diverts a message with [ReasonFailure], it looks for
// a RetryAfterError in the cause's chain with errors.As (the first one
// found counts) and sets [MetaNotBefore] to the failure time plus the
// larger of [Config.Backoff](attempt) and the hint, the hint capped at
// [Config.MaxRetryAfter] and at the time left until the message's
// [Config.MaxAge] deadline. A hint never shortens the backoff. A
// [ReasonNotAttempted] diversion does the same with the not-attempted
// count ([MetaNotAttempted]) in place of the attempt; its hint is the
// refusing throttle's or bulkhead's own (see the middleware's
// NotAttempted).
//
// The delivery packages' error, *deliver.Error, implements it; the retry
// queue defines the interface so that it depends on no delivery package.
// Implementations must be safe for concurrent use.
type RetryAfterError interface {
	error
	// RetryAfterDelay returns the partner's minimum delay before the next
	// attempt, or 0 when it gave none; a negative value counts as 0.
	RetryAfterDelay() time.Duration
}

// retryAfter returns the hint of the first [RetryAfterError] in cause's
// chain, 0 if there is none or it is not positive.
func retryAfter(cause error) time.Duration {
	var ra RetryAfterError
	if cause == nil || !errors.As(cause, &ra) {
		return 0
	}
	return max(ra.RetryAfterDelay(), 0)
}

// failureDelay returns how long after now a message whose attempt-th
// delivery failed, with the partner's hint (0: none), waits before the
// drain may deliver it again: Backoff(attempt), or the hint when that is
// longer. The hint is capped at MaxRetryAfter and at the time left until
// first+MaxAge, so honouring it never holds a message past the point where
// MaxAge dead-letters it instead of diverting it again; the backoff itself
// is never cut.
func (c *Config) failureDelay(attempt int, hint time.Duration, now, first time.Time) time.Duration {
	backoff := c.Backoff(attempt)
	if hint <= backoff {
		return backoff
	}
	hint = min(hint, c.MaxRetryAfter, first.Add(c.MaxAge).Sub(now))
	return max(backoff, hint)
}

// notAttemptedDelay returns how long after now a message the handler
// refused for the n-th time (n >= 1), with the refusal's hint (0: none),
// waits before the drain may hand it over again: the larger of Backoff(n)
// and the hint capped at MaxRetryAfter, cut at the time left until
// first+MaxAge (never negative). A refusal is no attempt, so nothing is
// owed to it past the deadline: the message comes back then, and if it is
// refused again MaxAge dead-letters it. The cut also keeps [MetaNotBefore]
// within the bound [Queue.Malformed] checks, whatever Backoff(n) is for n
// beyond MaxAttempts.
func (c *Config) notAttemptedDelay(n int, hint time.Duration, now, first time.Time) time.Duration {
	d := max(c.Backoff(n), min(hint, c.MaxRetryAfter))
	return max(0, min(d, first.Add(c.MaxAge).Sub(now)))
}
