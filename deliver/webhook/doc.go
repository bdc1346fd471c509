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
// Every request carries Idempotency-Key: the message id (the Watermill
// message UUID), the same on every attempt, so the consumer can process
// each message once however often it is delivered (at-least-once delivery,
// exactly-once effect). With a Config.Secret it is signed by the
// [Scheme] of Config.Scheme:
//
//   - [SchemeStandardWebhooks], the default, follows the Standard Webhooks
//     specification (github.com/standard-webhooks/standard-webhooks,
//     spec/standard-webhooks.md): webhook-id (the message id again),
//     webhook-timestamp (the Unix time of the attempt, in seconds) and
//     webhook-signature: "v1," and the base64 HMAC-SHA256 of
//     "id.timestamp.body" ([Sign]). Secrets are handed out as
//     "whsec_<base64>" ([FormatSecret], [ParseSecret]). Any consumer
//     library of the specification verifies these requests; the package's
//     tests check [Sign] and [Verifier] against the reference libraries'
//     published test vectors (testdata/).
//   - [SchemeFloodgate], floodgate's earlier scheme: X-Floodgate-Timestamp,
//     and X-Floodgate-Signature: "v1=" and the hex HMAC-SHA256 of
//     "timestamp.body" ([SignFloodgate]).
//   - [SchemeBoth] sends both, for a migration.
//
// # Verifying
//
// A consumer checks requests with a [Verifier]: the timestamp must be
// within a tolerance of its clock (5 minutes by default, 1 s to 1 h; the
// check cannot be turned off), one signature must match, compared in
// constant time, and the request must not be a replay of one accepted
// within the tolerance (a bounded seen-set keyed on the webhook id and
// timestamp). Package webhooktest holds an in-process consumer with a
// latency fault script, for examples and tests.
//
// # Migrating from the X-Floodgate headers
//
// The specification's "Migrating to Standard Webhooks" adds its headers
// next to the existing ones, with the same secret. So:
//
//  1. Senders set Scheme: SchemeBoth; consumers of the old headers keep
//     working.
//  2. Each consumer switches to Standard Webhooks: a [Verifier] with
//     SchemeBoth (or SchemeStandardWebhooks) and the same secret as raw
//     bytes, or any Standard Webhooks library given [FormatSecret] of it.
//  3. Senders drop to the default SchemeStandardWebhooks. A secret shorter
//     than 24 bytes must be replaced first (the specification asks for 24
//     to 64), and message ids must not hold ".".
//
// A sender that must keep the old headers sets Scheme: SchemeFloodgate.
package webhook
