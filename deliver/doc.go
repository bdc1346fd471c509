// Package deliver holds what every floodgate sender shares: the classification
// of a failed delivery as retryable or permanent.
//
// A sender (the AS2 sender in [github.com/floodgate-go/floodgate/deliver/as2],
// later a webhook sender) returns nil when the partner accepted the message,
// and otherwise an error that the middleware routes by kind:
//
//   - retryable ([ErrRetryable]): the partner may accept the same message
//     later. Timeouts, connection errors, HTTP 5xx, 429 and 408, and a 2xx
//     without a usable receipt. The middleware diverts the message to the
//     retry queue and reports a failure to the breaker.
//   - permanent ([ErrPermanent]): sending the same bytes again cannot
//     succeed. Other HTTP 4xx, an MDN with an error or failed disposition.
//     The middleware sends the message to the dead-letter subject.
//
// [Error] carries the kind together with the operation, the HTTP status, the
// MDN disposition, a Retry-After hint and the cause. [IsPermanent] and
// [IsRetryable] decide for any error: an error nobody classified is treated
// as retryable, so an unknown failure never loses a message.
package deliver
