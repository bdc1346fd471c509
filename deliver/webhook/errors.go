package webhook

import "errors"

// Configuration errors, returned (wrapped, naming the field) by
// [Config.Validate], [NewSender], [VerifierConfig.Validate] and
// [NewVerifier].
var (
	// ErrURL: Config.URL is not an absolute http or https URL.
	ErrURL = errors.New("webhook: URL must be an absolute http:// or https:// URL")
	// ErrFormat: Config.BodyFormat is not FormatJSON or FormatRaw.
	ErrFormat = errors.New("webhook: unknown format")
	// ErrContentType: Config.ContentType is not a valid media type.
	ErrContentType = errors.New("webhook: content type must be a valid media type")
	// ErrHeader: a name or value in Config.Header is not a valid HTTP header
	// field, or names a header the sender sets itself.
	ErrHeader = errors.New("webhook: invalid extra header")
	// ErrNegative: a duration in Config is negative.
	ErrNegative = errors.New("webhook: must not be negative")
	// ErrScheme: a Scheme is not SchemeStandardWebhooks, SchemeFloodgate or
	// SchemeBoth.
	ErrScheme = errors.New("webhook: unknown signature scheme")
	// ErrSecret: a secret is out of range: a sender's Config.Secret signing
	// Standard Webhooks is not 24 to 64 bytes (Standard Webhooks, "Signature
	// scheme"); a VerifierConfig.Secret is empty; or the string given to
	// [ParseSecret] is not "whsec_" and base64.
	ErrSecret = errors.New("webhook: invalid secret")
	// ErrTolerance: VerifierConfig.Tolerance is outside [MinTolerance,
	// MaxTolerance]. A negative tolerance is refused rather than taken to
	// disable the timestamp check.
	ErrTolerance = errors.New("webhook: tolerance must be within [1s, 1h] (0: the default 5m)")
	// ErrMaxSeen: VerifierConfig.MaxSeen is negative.
	ErrMaxSeen = errors.New("webhook: MaxSeen must be >= 1 (0: the default 65536)")
)

// Errors building a request. [Sender.Send] wraps them in a permanent
// [*deliver.Error].
var (
	// ErrIdempotencyKey: the message id is empty, longer than 255 bytes, or
	// not printable ASCII without spaces, so it cannot be an Idempotency-Key;
	// or, when the request is signed with Standard Webhooks, it holds a "."
	// (the spec's "Signature scheme" forbids it: "id.timestamp.body" would be
	// ambiguous).
	ErrIdempotencyKey = errors.New("webhook: id must be 1 to 255 printable ASCII characters without spaces (and without '.' under Standard Webhooks)")
	// ErrInvalidJSON: in FormatJSON the payload is not valid JSON.
	ErrInvalidJSON = errors.New("webhook: payload is not valid JSON")
)

// Errors of [Verifier.Verify]: why a consumer should reject a request.
// ErrReplay and ErrSeenFull are refusals of a request that may be genuine
// (see their docs for the answer to give); the others are not genuine.
var (
	// ErrNoSignature: the id (Standard Webhooks), timestamp or signature
	// header is missing, or has no "v1" signature.
	ErrNoSignature = errors.New("webhook: request is not signed")
	// ErrWebhookID: the webhook-id header is longer than 255 bytes or not
	// printable ASCII without spaces.
	ErrWebhookID = errors.New("webhook: webhook-id must be 1 to 255 printable ASCII characters without spaces")
	// ErrTimestamp: the timestamp header is not a Unix time in seconds.
	ErrTimestamp = errors.New("webhook: malformed signature timestamp")
	// ErrTimestampTolerance: the timestamp is further from now than the
	// tolerance: a replay, or a clock far off.
	ErrTimestampTolerance = errors.New("webhook: signature timestamp outside the tolerance window")
	// ErrSignatureMismatch: no "v1" signature matches the body, id,
	// timestamp and secret.
	ErrSignatureMismatch = errors.New("webhook: signature does not match")
	// ErrReplay: a request with the same webhook id and timestamp (with the
	// Floodgate scheme, the same timestamp and signature) was accepted
	// within the tolerance: a replay. The sender's own retries carry a new
	// timestamp and pass; a retry within the same second of the previous
	// attempt is refused too, so answer 429 with Retry-After: 1 (the sender
	// retries, a replayer gains nothing).
	ErrReplay = errors.New("webhook: replayed request")
	// ErrSeenFull: the verifier's seen-set holds VerifierConfig.MaxSeen
	// unexpired entries, so a replay could not be detected: the request is
	// refused (fail closed). Answer 503 with a Retry-After; entries expire
	// within twice the tolerance.
	ErrSeenFull = errors.New("webhook: replay protection is full")
)
