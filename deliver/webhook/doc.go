// Package webhook delivers messages to an HTTP endpoint: one POST per
// message, JSON or raw, with an idempotency key and a signature in the
// headers, and the outcome classified for the floodgate middleware.
//
// # Model
//
// A [Sender] is configured once per endpoint with a [Config] and is safe for
// concurrent use. [Sender.Send] posts one message and returns nil when the
// endpoint answered 2xx, otherwise a [*deliver.Error] classified as in
// [deliver.ClassifyHTTP]:
//
//   - retryable ([deliver.ErrRetryable]): transport errors and timeouts
//     (Config.Timeout or the ctx deadline), HTTP 5xx, 429 and 408. A
//     Retry-After header (seconds or HTTP-date) is carried in
//     [deliver.Error].RetryAfter: the minimum delay before this message is
//     tried again.
//   - permanent ([deliver.ErrPermanent]): every other status (4xx, and 3xx:
//     redirects are not followed), and a message that cannot be sent (an id
//     that cannot be an idempotency key, a payload that is not JSON in
//     [FormatJSON]).
//
// # Headers
//
// Every request carries:
//
//   - Idempotency-Key: the message id (the Watermill message UUID), the same
//     on every attempt, so the consumer can process each message once however
//     often it is delivered (at-least-once delivery, exactly-once effect);
//   - X-Floodgate-Timestamp: the Unix time of the attempt, in seconds;
//   - X-Floodgate-Signature: "v1=" and the hex HMAC-SHA256, keyed with
//     Config.Secret, of the timestamp, ".", and the body (when a secret is
//     configured). Consumers check it with [Verify], which also rejects a
//     timestamp outside a tolerance window, so a captured request cannot be
//     replayed later.
//
// The scheme follows the usual practice of webhook providers (the timestamp
// is signed with the body, several "v1=" signatures may be listed during a
// secret rotation). Package webhooktest holds an in-process consumer with a
// latency fault script, for examples and tests.
package webhook
