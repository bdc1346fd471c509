package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
)

// Header names set by [Sender.Send]. The Standard Webhooks names are
// spelled as in the specification ("Webhook headers"); HTTP header names
// are case-insensitive and net/http sends them canonicalised
// (Webhook-Id).
const (
	// HeaderIdempotencyKey carries the message id, the same on every
	// attempt. Sent with every scheme.
	HeaderIdempotencyKey = "Idempotency-Key"

	// HeaderWebhookID carries the message id, the same on every attempt
	// (Standard Webhooks).
	HeaderWebhookID = "webhook-id"
	// HeaderWebhookTimestamp carries the Unix time of the attempt, in
	// seconds (Standard Webhooks).
	HeaderWebhookTimestamp = "webhook-timestamp"
	// HeaderWebhookSignature carries "v1,<base64 HMAC-SHA256>"; several
	// signatures may be listed, separated by spaces (Standard Webhooks).
	HeaderWebhookSignature = "webhook-signature"

	// HeaderTimestamp carries the Unix time of the attempt, in seconds
	// ([SchemeFloodgate]).
	HeaderTimestamp = "X-Floodgate-Timestamp"
	// HeaderSignature carries "v1=<hex HMAC-SHA256>"; several
	// comma-separated signatures may be present ([SchemeFloodgate]).
	HeaderSignature = "X-Floodgate-Signature"
)

// Scheme is a set of signature headers.
type Scheme int

const (
	// SchemeStandardWebhooks, the default, is the Standard Webhooks
	// specification (github.com/standard-webhooks/standard-webhooks,
	// spec/standard-webhooks.md, "Signature scheme" and "Webhook headers"):
	// webhook-id, webhook-timestamp and webhook-signature "v1,<base64>",
	// the HMAC-SHA256 of "id.timestamp.body".
	SchemeStandardWebhooks Scheme = iota
	// SchemeFloodgate is floodgate v0.1's scheme: X-Floodgate-Timestamp
	// and X-Floodgate-Signature "v1=<hex>", the HMAC-SHA256 of
	// "timestamp.body". The id is not signed.
	SchemeFloodgate
	// SchemeBoth, for a migration: a [Sender] sends both sets of headers
	// (one secret signs both); a [Verifier] accepts either, Standard
	// Webhooks when its headers are present.
	SchemeBoth
)

// String returns "standard-webhooks", "floodgate" or "both".
func (s Scheme) String() string {
	switch s {
	case SchemeStandardWebhooks:
		return "standard-webhooks"
	case SchemeFloodgate:
		return "floodgate"
	case SchemeBoth:
		return "both"
	}
	return fmt.Sprintf("Scheme(%d)", int(s))
}

func (s Scheme) valid() bool    { return s >= SchemeStandardWebhooks && s <= SchemeBoth }
func (s Scheme) standard() bool { return s == SchemeStandardWebhooks || s == SchemeBoth }
func (s Scheme) floodgate() bool {
	return s == SchemeFloodgate || s == SchemeBoth
}

// Secret lengths for signing with Standard Webhooks ("Signature scheme":
// random, between 24 bytes and 64 bytes).
const (
	// MinSecretLen is the shortest Config.Secret, in bytes, with Standard
	// Webhooks.
	MinSecretLen = 24
	// MaxSecretLen is the longest Config.Secret, in bytes, with Standard
	// Webhooks.
	MaxSecretLen = 64
)

// secretPrefix marks a symmetric secret in its serialised form (Standard
// Webhooks, "Signature scheme", "Secret serialization").
const secretPrefix = "whsec_"

// ParseSecret decodes a secret in the Standard Webhooks form "whsec_" and
// the base64 (standard alphabet, padding optional, unused trailing bits
// ignored, as Python's reference library does) of the key bytes, as
// webhook producers hand them to consumers; the prefix may be left out, as
// the reference libraries allow. It returns the key bytes for
// Config.Secret or VerifierConfig.Secret, or an error wrapping [ErrSecret]
// for an empty key or bad base64 (the message does not quote the secret).
// A secret that is not in this form (a shared passphrase of the
// [SchemeFloodgate] era) is used as raw bytes: []byte(s), without
// ParseSecret.
func ParseSecret(s string) ([]byte, error) {
	enc := strings.TrimRight(strings.TrimPrefix(s, secretPrefix), "=")
	key, err := base64.RawStdEncoding.DecodeString(enc)
	if err != nil {
		return nil, fmt.Errorf("%w: not \"whsec_\" and base64", ErrSecret)
	}
	if len(key) == 0 {
		return nil, fmt.Errorf("%w: empty", ErrSecret)
	}
	return key, nil
}

// FormatSecret returns key in the Standard Webhooks form: "whsec_" and its
// padded base64. [ParseSecret] reverses it.
func FormatSecret(key []byte) string {
	return secretPrefix + base64.StdEncoding.EncodeToString(key)
}

// Sign returns the Standard Webhooks signature of body sent as the message
// id at timestamp (Unix seconds) with the key secret: "v1," and the base64
// of HMAC-SHA256(secret, id + "." + timestamp + "." + body), the value of
// the webhook-signature header (spec "Signature scheme"). It does not
// check id; [Sender] refuses ids holding ".". It is a pure function, safe
// for concurrent use.
func Sign(secret []byte, id string, timestamp int64, body []byte) string {
	return "v1," + base64.StdEncoding.EncodeToString(macStandard(secret, id, strconv.FormatInt(timestamp, 10), body))
}

// SignFloodgate returns the [SchemeFloodgate] signature of body sent at
// timestamp (Unix seconds) with secret: "v1=" and the lower-case hex of
// HMAC-SHA256(secret, timestamp + "." + body), the value of
// X-Floodgate-Signature. It is a pure function, safe for concurrent use.
func SignFloodgate(secret []byte, timestamp int64, body []byte) string {
	return "v1=" + hex.EncodeToString(macFloodgate(secret, strconv.FormatInt(timestamp, 10), body))
}

func macStandard(secret []byte, id, timestamp string, body []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(id))
	m.Write([]byte("."))
	m.Write([]byte(timestamp))
	m.Write([]byte("."))
	m.Write(body)
	return m.Sum(nil)
}

func macFloodgate(secret []byte, timestamp string, body []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(timestamp))
	m.Write([]byte("."))
	m.Write(body)
	return m.Sum(nil)
}

// matchStandard reports whether one of the space-separated "v1,<base64>"
// signatures in values equals want (constant-time per signature), and
// whether there was any "v1" signature at all. Other versions ("v1a",
// asymmetric) are skipped.
func matchStandard(values []string, want []byte) (match, found bool) {
	for _, v := range values {
		for _, item := range strings.Fields(v) {
			version, sig, ok := strings.Cut(item, ",")
			if !ok || version != "v1" {
				continue
			}
			found = true
			got, err := base64.StdEncoding.Strict().DecodeString(sig)
			if err == nil && hmac.Equal(got, want) {
				match = true
			}
		}
	}
	return match, found
}

// matchFloodgate is matchStandard for comma-separated "v1=<hex>".
func matchFloodgate(values []string, want []byte) (match, found bool) {
	for _, v := range values {
		for _, item := range strings.Split(v, ",") {
			version, sig, ok := strings.Cut(strings.TrimSpace(item), "=")
			if !ok || version != "v1" {
				continue
			}
			found = true
			got, err := hex.DecodeString(sig)
			if err == nil && hmac.Equal(got, want) {
				match = true
			}
		}
	}
	return match, found
}
