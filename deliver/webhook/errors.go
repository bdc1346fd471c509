package webhook

import "errors"

// Configuration errors, returned (wrapped, naming the field) by
// [Config.Validate] and [NewSender].
var (
	// ErrURL: Config.URL is not an absolute http or https URL.
	ErrURL = errors.New("webhook: URL must be an absolute http:// or https:// URL")
	// ErrFormat: Config.Format is not FormatJSON or FormatRaw.
	ErrFormat = errors.New("webhook: unknown format")
	// ErrContentType: Config.ContentType is not a valid media type.
	ErrContentType = errors.New("webhook: content type must be a valid media type")
	// ErrHeader: a name or value in Config.Header is not a valid HTTP header
	// field, or names a header the sender sets itself.
	ErrHeader = errors.New("webhook: invalid extra header")
	// ErrNegative: a duration in Config is negative.
	ErrNegative = errors.New("webhook: must not be negative")
)

// Errors building a request. [Sender.Send] wraps them in a permanent
// [*deliver.Error].
var (
	// ErrIdempotencyKey: the message id is empty, longer than 255 bytes, or
	// not printable ASCII without spaces, so it cannot be an Idempotency-Key.
	ErrIdempotencyKey = errors.New("webhook: id must be 1 to 255 printable ASCII characters without spaces")
	// ErrInvalidJSON: in FormatJSON the payload is not valid JSON.
	ErrInvalidJSON = errors.New("webhook: payload is not valid JSON")
)

// Errors of [Verify]: why a consumer should reject a request.
var (
	// ErrNoSignature: the timestamp or signature header is missing, or has
	// no "v1=" signature.
	ErrNoSignature = errors.New("webhook: request is not signed")
	// ErrTimestamp: the timestamp header is not a Unix time in seconds.
	ErrTimestamp = errors.New("webhook: malformed signature timestamp")
	// ErrTimestampTolerance: the timestamp is further from now than the
	// tolerance: a replay, or a clock far off.
	ErrTimestampTolerance = errors.New("webhook: signature timestamp outside the tolerance window")
	// ErrSignatureMismatch: no "v1=" signature matches the body, timestamp
	// and secret.
	ErrSignatureMismatch = errors.New("webhook: signature does not match")
)
