package deliver

import "errors"

// ErrLocal marks a failure on our side, not the partner's: the exchange
// with the partner went well (it answered 2xx), then a local step the
// delivery needs failed, for example storing an asynchronous receipt's
// pending record (as2.ErrPendingStore). Wrap it in the cause of a
// retryable [*Error] (fmt.Errorf("%w: ...", ErrLocal)).
//
// The message is not delivered: [IsRetryable] stays true, so it is kept
// and sent again (at-least-once). The floodgate middleware diverts it for
// failure, its attempt counted, but reports the call to the breaker as
// neutral: a partner that answered well is never tripped, nor its trip
// count raised, for our own store's outage. [IsPermanent] wins over it.
var ErrLocal = errors.New("deliver: local failure, not the partner's")
