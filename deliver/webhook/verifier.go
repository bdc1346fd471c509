package webhook

import (
	"crypto/sha256"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Tolerance of a [Verifier]: how far a request's timestamp may be from the
// consumer's clock, either way.
const (
	// DefaultTolerance is the tolerance when VerifierConfig.Tolerance is 0:
	// 5 minutes, the reference libraries' (Standard Webhooks).
	DefaultTolerance = 5 * time.Minute
	// MinTolerance is the smallest tolerance: timestamps are whole seconds.
	MinTolerance = time.Second
	// MaxTolerance is the largest tolerance, floodgate's rule: a larger
	// window all but disables the timestamp check and grows the seen-set.
	MaxTolerance = time.Hour
)

// DefaultMaxSeen is VerifierConfig.MaxSeen when 0: 65,536 requests in the
// replay seen-set, about 9 MiB.
const DefaultMaxSeen = 1 << 16

// VerifierConfig configures a [Verifier].
type VerifierConfig struct {
	// Secret is the key the sender signs with. Required: at least one
	// byte. Decode a "whsec_" secret with [ParseSecret]; any other secret
	// is used as raw bytes.
	Secret []byte
	// Scheme is the signature headers accepted: SchemeStandardWebhooks,
	// SchemeFloodgate, or SchemeBoth (either; Standard Webhooks when its
	// webhook-signature header is present). Optional. Default
	// SchemeStandardWebhooks.
	Scheme Scheme
	// Tolerance is how far the signed timestamp may be from now, either
	// way, in [MinTolerance, MaxTolerance] (1s to 1h). Optional. Default
	// DefaultTolerance (5m). The timestamp check cannot be disabled: a
	// negative Tolerance is an error.
	Tolerance time.Duration
	// MaxSeen bounds the replay seen-set, in requests: at most MaxSeen
	// accepted requests are remembered, each until its timestamp plus the
	// Tolerance (at most twice the Tolerance after it arrived), in about
	// 140 bytes each whatever the id's length. When it is full of
	// unexpired entries, Verify refuses requests with [ErrSeenFull] rather
	// than forget one. Only requests with a valid signature enter the set,
	// so only a holder of the secret can fill it. Size it to the peak request rate times the
	// Tolerance, with headroom. Optional. Default DefaultMaxSeen (65,536).
	// Must not be negative.
	MaxSeen int
	// Now tells the time for [Verifier.Verify]. Optional. Default time.Now.
	Now func() time.Time
}

func (c *VerifierConfig) setDefaults() {
	if c.Tolerance == 0 {
		c.Tolerance = DefaultTolerance
	}
	if c.MaxSeen == 0 {
		c.MaxSeen = DefaultMaxSeen
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	c.Secret = append([]byte(nil), c.Secret...)
}

// Validate reports whether c, with defaults applied to its zero fields, is
// valid: the check [NewVerifier] makes. It does not modify c. The error
// names the field and wraps the sentinel that states its allowed range:
// [ErrSecret], [ErrScheme], [ErrTolerance] or [ErrMaxSeen].
func (c VerifierConfig) Validate() error {
	c.setDefaults()
	if len(c.Secret) == 0 {
		return fmt.Errorf("VerifierConfig.Secret: %w: required", ErrSecret)
	}
	if !c.Scheme.valid() {
		return fmt.Errorf("VerifierConfig.Scheme %v: %w", c.Scheme, ErrScheme)
	}
	if c.Tolerance < MinTolerance || c.Tolerance > MaxTolerance {
		return fmt.Errorf("VerifierConfig.Tolerance %v: %w", c.Tolerance, ErrTolerance)
	}
	if c.MaxSeen < 0 {
		return fmt.Errorf("VerifierConfig.MaxSeen %d: %w", c.MaxSeen, ErrMaxSeen)
	}
	return nil
}

// Verifier checks the signature headers of received webhook requests, for
// a consumer. Create it with [NewVerifier]. It is safe for concurrent use.
//
// A request passes when its timestamp is within the tolerance of now, one
// of its signatures matches (compared in constant time), and it is not a
// replay. The replay protection is a seen-set in memory: a request is a
// replay when one with the same webhook id and timestamp (with
// [SchemeFloodgate], which signs no id: the same timestamp and signature)
// passed within the tolerance; an older copy fails the timestamp check.
// Signatures cover the id and the timestamp, so a replay cannot change
// them, while the sender's retries of a message keep its id and carry a
// new timestamp (spec "Webhook metadata"). The set belongs to one
// process: replicas behind a load balancer each keep their own.
//
// Replay protection is not idempotency: a consumer still applies each
// message's effect once by its webhook id, which stays the same across
// retries (spec "Verifying signatures"), for as long as retries last.
type Verifier struct {
	cfg  VerifierConfig
	seen *seenSet
}

// NewVerifier validates cfg, applies its defaults and returns a Verifier.
// The error, if any, is "invalid config: ..." wrapping the error of
// [VerifierConfig.Validate], which names the field.
func NewVerifier(cfg VerifierConfig) (*Verifier, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("invalid config: %w", err)
	}
	cfg.setDefaults()
	return &Verifier{cfg: cfg, seen: newSeenSet(cfg.MaxSeen)}, nil
}

// Verify is [Verifier.VerifyAt] at VerifierConfig.Now().
func (v *Verifier) Verify(h http.Header, body []byte) error {
	return v.VerifyAt(h, body, v.cfg.Now())
}

// VerifyAt checks the signature headers h of a request with body, received
// at now. It returns nil for a request to process, and records it in the
// seen-set; otherwise an error wrapping, in the order checked:
//
//   - [ErrNoSignature]: a header is missing, or holds no "v1" signature;
//   - [ErrWebhookID]: the webhook-id is not 1 to 255 printable ASCII
//     characters without spaces;
//   - [ErrTimestamp]: the timestamp is not a positive Unix time in seconds;
//   - [ErrTimestampTolerance]: the timestamp is more than the tolerance
//     from now;
//   - [ErrSignatureMismatch]: no "v1" signature matches;
//   - [ErrReplay]: the same request passed within the tolerance;
//   - [ErrSeenFull]: the seen-set is full (VerifierConfig.MaxSeen).
//
// With [SchemeBoth], a request with a webhook-signature header is checked
// by Standard Webhooks, any other by [SchemeFloodgate]. VerifyAt is safe
// for concurrent use; errors never quote the secret or a signature.
func (v *Verifier) VerifyAt(h http.Header, body []byte, now time.Time) error {
	standard := v.cfg.Scheme == SchemeStandardWebhooks ||
		v.cfg.Scheme == SchemeBoth && len(h.Values(HeaderWebhookSignature)) > 0
	var (
		tsName, sigName = HeaderTimestamp, HeaderSignature
		id              string
	)
	if standard {
		tsName, sigName = HeaderWebhookTimestamp, HeaderWebhookSignature
		id = h.Get(HeaderWebhookID)
	}
	ts := strings.TrimSpace(h.Get(tsName))
	sigs := h.Values(sigName)
	if ts == "" || len(sigs) == 0 || standard && id == "" {
		return fmt.Errorf("%w: %s missing", ErrNoSignature, requiredHeaders(standard))
	}
	if standard && !validKey(id) {
		return fmt.Errorf("%w: %d bytes", ErrWebhookID, len(id))
	}
	secs, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || secs <= 0 {
		return fmt.Errorf("%w: %.32q", ErrTimestamp, ts)
	}
	sent := time.Unix(secs, 0)
	if skew := now.Sub(sent); skew > v.cfg.Tolerance || skew < -v.cfg.Tolerance {
		return fmt.Errorf("%w: timestamp %d is %v from now, tolerance %v", ErrTimestampTolerance, secs, skew.Round(time.Second), v.cfg.Tolerance)
	}
	var match, found bool
	// The replay keys: a request is a replay when the first is recorded.
	// Under SchemeBoth a request verified by Standard Webhooks records the
	// floodgate key too, unchecked (the sender signs both with one
	// timestamp), so the same request with its webhook-signature stripped
	// is a replay, while another message (another webhook-id) with the same
	// body in the same second is not.
	var keys [][sha256.Size]byte
	floodgateKey := func(mac []byte) [sha256.Size]byte {
		return sha256.Sum256(append([]byte("floodgate\x00"+ts+"\x00"), mac...))
	}
	if standard {
		want := macStandard(v.cfg.Secret, id, ts, body)
		match, found = matchStandard(sigs, want)
		keys = append(keys, sha256.Sum256([]byte("standard-webhooks\x00"+id+"\x00"+ts)))
		if v.cfg.Scheme == SchemeBoth {
			keys = append(keys, floodgateKey(macFloodgate(v.cfg.Secret, ts, body)))
		}
	} else {
		want := macFloodgate(v.cfg.Secret, ts, body)
		match, found = matchFloodgate(sigs, want)
		keys = append(keys, floodgateKey(want))
	}
	if !found {
		return fmt.Errorf("%w: no v1 signature in %s", ErrNoSignature, sigName)
	}
	if !match {
		return ErrSignatureMismatch
	}
	if err := v.seen.add(sent.Add(v.cfg.Tolerance).UnixNano(), now.UnixNano(), keys[0], keys[1:]...); err != nil {
		if standard {
			return fmt.Errorf("%w: webhook-id %q, timestamp %d", err, id, secs)
		}
		return fmt.Errorf("%w: timestamp %d", err, secs)
	}
	return nil
}

// Seen returns the number of requests in the replay seen-set, expired ones
// not yet purged included (they are purged by the next Verify). Safe for
// concurrent use.
func (v *Verifier) Seen() int { return v.seen.len() }

func requiredHeaders(standard bool) string {
	if standard {
		return HeaderWebhookID + ", " + HeaderWebhookTimestamp + " or " + HeaderWebhookSignature
	}
	return HeaderTimestamp + " or " + HeaderSignature
}
