package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Header names set by [Sender.Send].
const (
	// HeaderIdempotencyKey carries the message id, the same on every attempt.
	HeaderIdempotencyKey = "Idempotency-Key"
	// HeaderTimestamp carries the Unix time of the attempt, in seconds.
	HeaderTimestamp = "X-Floodgate-Timestamp"
	// HeaderSignature carries "v1=<hex HMAC-SHA256>"; several comma-separated
	// signatures may be present.
	HeaderSignature = "X-Floodgate-Signature"
)

// DefaultTolerance is the tolerance window of [Verify]: a signature whose
// timestamp is more than 5 minutes from the consumer's clock is rejected.
const DefaultTolerance = 5 * time.Minute

// Sign returns the value of the signature header for body sent at
// timestamp (Unix seconds) with secret: "v1=" and the lower-case hex of
// HMAC-SHA256(secret, timestamp + "." + body). It is a pure function, safe
// for concurrent use.
func Sign(secret []byte, timestamp int64, body []byte) string {
	return "v1=" + hex.EncodeToString(mac(secret, strconv.FormatInt(timestamp, 10), body))
}

func mac(secret []byte, timestamp string, body []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(timestamp))
	m.Write([]byte("."))
	m.Write(body)
	return m.Sum(nil)
}

// Verify checks the signature headers of a received request against its
// body and secret, at the current time: the timestamp must be within
// tolerance of now (0 means [DefaultTolerance]; a negative one disables the
// check), and one of the "v1=" signatures must equal [Sign]'s, compared in
// constant time. It returns nil or an error wrapping [ErrNoSignature],
// [ErrTimestamp], [ErrTimestampTolerance] or [ErrSignatureMismatch]. Verify
// is safe for concurrent use.
func Verify(h http.Header, body, secret []byte, tolerance time.Duration) error {
	return VerifyAt(h, body, secret, tolerance, time.Now())
}

// VerifyAt is [Verify] at the time now.
func VerifyAt(h http.Header, body, secret []byte, tolerance time.Duration, now time.Time) error {
	ts := strings.TrimSpace(h.Get(HeaderTimestamp))
	sigs := h.Values(HeaderSignature)
	if ts == "" || len(sigs) == 0 {
		return fmt.Errorf("%w: %s or %s missing", ErrNoSignature, HeaderTimestamp, HeaderSignature)
	}
	secs, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || secs <= 0 {
		return fmt.Errorf("%w: %q", ErrTimestamp, ts)
	}
	if tolerance == 0 {
		tolerance = DefaultTolerance
	}
	if tolerance > 0 {
		skew := now.Sub(time.Unix(secs, 0))
		if skew > tolerance || skew < -tolerance {
			return fmt.Errorf("%w: timestamp %d is %v from now, tolerance %v", ErrTimestampTolerance, secs, skew.Round(time.Second), tolerance)
		}
	}
	want := mac(secret, ts, body)
	found := false
	for _, v := range sigs {
		for _, item := range strings.Split(v, ",") {
			scheme, hexSig, ok := strings.Cut(strings.TrimSpace(item), "=")
			if !ok || scheme != "v1" {
				continue
			}
			found = true
			got, err := hex.DecodeString(hexSig)
			if err == nil && hmac.Equal(got, want) {
				return nil
			}
		}
	}
	if !found {
		return fmt.Errorf("%w: no v1 signature in %s", ErrNoSignature, HeaderSignature)
	}
	return ErrSignatureMismatch
}
