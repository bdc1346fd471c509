// Package deliver holds what every floodgate sender shares: the classification
// of a failed delivery as retryable or permanent, and the warning of a
// delivery that succeeded imperfectly.
//
// A sender (the AS2 sender in [github.com/floodgate-go/floodgate/deliver/as2],
// later a webhook sender) returns nil when the partner accepted the message,
// and otherwise an error that the middleware routes by kind:
//
//   - retryable ([ErrRetryable]): the partner may accept the same message
//     later. Timeouts, connection errors, HTTP 5xx, 429 and 408. The
//     middleware diverts the message to the
//     retry queue and reports a failure to the breaker.
//   - permanent ([ErrPermanent]): sending the same bytes again cannot
//     succeed. Other HTTP 4xx, an MDN with an error or failed disposition.
//     The middleware sends the message to the dead-letter subject.
//   - a warning ([ErrWarning], [*Warning]): the partner took the message but
//     its answer is imperfect (an AS2 2xx without a receipt, an unsigned or
//     MIC-less receipt). It is a success: sending again would deliver twice.
//     The middleware acks the message, reports a success to the breaker and
//     carries the warning in its event and metrics.
//
// [Error] carries the kind together with the operation, the HTTP status, the
// MDN disposition, a Retry-After hint and the cause. [IsPermanent] and
// [IsRetryable] decide for any error: an error nobody classified is treated
// as retryable, so an unknown failure never loses a message.
package deliver
