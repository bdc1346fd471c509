package as2partner

import (
	"crypto"
	"crypto/x509"
	"fmt"
	"math"
	"time"

	"github.com/floodgate-go/floodgate/deliver/as2"
)

// Mode is how the partner behaves during a [Phase].
type Mode int

const (
	// Healthy processes every valid request.
	Healthy Mode = iota
	// Down answers every request HTTP 503 Service Unavailable, with no MDN.
	Down
	// Fragile processes up to Phase.Capacity requests per second and treats
	// the excess as Phase.Excess says.
	Fragile
)

// String returns "healthy", "down" or "fragile".
func (m Mode) String() string {
	switch m {
	case Healthy:
		return "healthy"
	case Down:
		return "down"
	case Fragile:
		return "fragile"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// Excess is what a [Fragile] partner does with a request beyond its capacity.
type Excess int

const (
	// Reject503 answers HTTP 503 with no MDN.
	Reject503 Excess = iota
	// Slow waits Phase.SlowLatency, then processes the request.
	Slow
)

// String returns "reject-503" or "slow".
func (e Excess) String() string {
	switch e {
	case Reject503:
		return "reject-503"
	case Slow:
		return "slow"
	}
	return fmt.Sprintf("Excess(%d)", int(e))
}

// Phase is one step of the fault script.
type Phase struct {
	// Name labels the phase in timelines. Optional. Default: the Mode's name.
	Name string
	// Duration is how long the phase lasts at least, from its start.
	// Optional: 0 means forever, and is allowed on the last phase only. The
	// last phase lasts forever whatever its Duration. Must not be negative.
	Duration time.Duration
	// MinRequests makes the phase last also until it has received that many
	// requests (each one answered as this phase says): it ends at the later
	// of its start + Duration and the arrival of its MinRequests-th request,
	// and the later phases start that much later. So an outage is seen by
	// that many calls however slowly the caller runs. Optional. Default 0:
	// Duration alone decides. Must not be negative. Ignored on the last
	// phase, which lasts forever.
	MinRequests int
	// Mode is the behaviour during the phase. Optional. Default Healthy.
	Mode Mode
	// Capacity is the number of messages per second a Fragile partner
	// processes at once. Required for Fragile: a finite number > 0. Ignored
	// otherwise.
	Capacity float64
	// Burst is the token bucket size of a Fragile partner: how many requests
	// above the steady rate it absorbs at once. Optional. Default
	// 1 + Capacity/10 (rounded down). Must not be negative.
	Burst int
	// Excess is what a Fragile partner does beyond capacity. Optional.
	// Default Reject503.
	Excess Excess
	// SlowLatency is how long a Fragile partner with Excess Slow keeps an
	// excess request before processing it. Optional. Default 0. Must not be
	// negative.
	SlowLatency time.Duration
	// Latency is added to every request of the phase before it is handled,
	// whatever the outcome. Optional. Default 0. Must not be negative.
	Latency time.Duration
}

// Clock tells the time of the fault script. Its Now must be safe for
// concurrent use.
type Clock interface {
	Now() time.Time
}

type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }

// DefaultMaxBodySize is the default of Config.MaxBodySize.
const DefaultMaxBodySize = 10 << 20 // 10 MiB

// Config configures a [Partner].
type Config struct {
	// Script is the fault script. Optional. Default: healthy forever.
	Script []Phase
	// AS2ID is the partner's AS2 ID. Requests whose AS2-To names another ID
	// get an MDN with "processed/error: authentication-failed". Optional.
	// Default: any AS2-To is accepted and echoed as the MDN's AS2-From.
	AS2ID string
	// Clock tells the script's time and drives the Fragile rate limit.
	// Optional. Default: the wall clock. Latencies are always real time.
	// The partner reads it once per request, under its lock, so with a
	// clock that never goes back requests are counted (Phase.MinRequests)
	// in the order of their times.
	Clock Clock
	// MaxBodySize bounds a request body, in bytes; a larger one gets HTTP
	// 413. Optional. Default 10 MiB. Must not be negative.
	MaxBodySize int64
	// MaxDecompressedSize bounds the content of a request's compressed-data
	// layers, all together, in bytes (RFC 5402): more (a zlib bomb) gets
	// "processed/error: decompression-failed" after at most this much is
	// read. Optional. Default [as2.DefaultMaxDecompressedSize] (64 MiB).
	// Must not be negative.
	MaxDecompressedSize int64

	// Cert is the partner's certificate and Key its private key. They
	// decrypt application/pkcs7-mime requests (Key must then be RSA), and
	// sign the MDN of every request that asks for a signed receipt
	// (Disposition-Notification-Options, RFC 4130 §7.3). Optional: without
	// them an encrypted request gets "processed/error: decryption-failed"
	// and every MDN is unsigned. Set both or neither; Key must be Cert's.
	Cert *x509.Certificate
	Key  crypto.Signer
	// SenderCert is the sender's signing certificate: a signed request must
	// be signed by exactly this certificate, or it gets "processed/error:
	// authentication-failed". Optional: nil accepts the certificate carried
	// in the signature (integrity only).
	SenderCert *x509.Certificate
	// RequireSigned answers an unsigned request with "processed/error:
	// insufficient-message-security". Optional. Default false.
	RequireSigned bool
	// RequireEncrypted answers an unencrypted request with
	// "processed/error: insufficient-message-security". Optional. Default
	// false.
	RequireEncrypted bool

	// The receipt settings below make the partner answer a processed
	// request imperfectly, as some real partners do (RFC 4130 §7.3, §7.4).
	// Optional. Default false: a complete receipt.

	// NoMDN answers HTTP 200 with an empty body, even when an MDN was asked
	// for: a partner set up for asynchronous receipts or none.
	NoMDN bool
	// UnsignedMDN never signs an MDN, even when a signed one was asked for
	// and the partner has a key.
	UnsignedMDN bool
	// OmitMIC leaves Received-Content-MIC out of the MDN (as pyas2lib does
	// for an encrypt-only message).
	OmitMIC bool
	// WrongMIC returns a Received-Content-MIC that is not the message's (a
	// partner that computes it over other bytes). Ignored with OmitMIC.
	WrongMIC bool

	// Async makes the partner honour Receipt-Delivery-Option: asynchronous
	// MDNs posted to allowed URLs ([AsyncConfig]). Optional. Default: such
	// requests are refused (HTTP 403).
	Async AsyncConfig
}

func (c *Config) setDefaults() {
	if len(c.Script) == 0 {
		c.Script = []Phase{{Mode: Healthy}}
	} else {
		c.Script = append([]Phase(nil), c.Script...)
	}
	for i := range c.Script {
		p := &c.Script[i]
		if p.Name == "" {
			p.Name = p.Mode.String()
		}
		if p.Mode == Fragile && p.Burst == 0 {
			p.Burst = 1 + int(p.Capacity/10)
		}
	}
	if c.Clock == nil {
		c.Clock = wallClock{}
	}
	if c.MaxBodySize == 0 {
		c.MaxBodySize = DefaultMaxBodySize
	}
	c.Async.setDefaults()
	if c.MaxDecompressedSize == 0 {
		c.MaxDecompressedSize = as2.DefaultMaxDecompressedSize
	}
}

// Validate reports whether c, with defaults applied to its zero fields, is
// valid: the check [New] makes. It does not modify c. The error names the
// field and wraps the sentinel that states its allowed range:
// [ErrPhaseDuration], [ErrMinRequests], [ErrMode], [ErrCapacity],
// [ErrLatency], [ErrAS2ID], [ErrMaxBodySize], [ErrKey] or [ErrAsyncURL].
func (c Config) Validate() error {
	c.setDefaults() // copies Script: the caller's phases stay as they are
	return c.validate()
}

// validate requires defaults set.
func (c *Config) validate() error {
	for i, p := range c.Script {
		field := fmt.Sprintf("Config.Script[%d]", i)
		if p.Duration < 0 || (p.Duration == 0 && i < len(c.Script)-1) {
			return fmt.Errorf("%s.Duration %v: %w", field, p.Duration, ErrPhaseDuration)
		}
		if p.MinRequests < 0 {
			return fmt.Errorf("%s.MinRequests %d: %w", field, p.MinRequests, ErrMinRequests)
		}
		if p.Mode < Healthy || p.Mode > Fragile {
			return fmt.Errorf("%s.Mode %v: %w", field, p.Mode, ErrMode)
		}
		if p.Latency < 0 {
			return fmt.Errorf("%s.Latency %v: %w", field, p.Latency, ErrLatency)
		}
		if p.Mode != Fragile {
			continue
		}
		if !(p.Capacity > 0) || math.IsInf(p.Capacity, 0) {
			return fmt.Errorf("%s.Capacity %v: %w", field, p.Capacity, ErrCapacity)
		}
		if p.Burst < 0 {
			return fmt.Errorf("%s.Burst %d: %w", field, p.Burst, ErrCapacity)
		}
		if p.Excess != Reject503 && p.Excess != Slow {
			return fmt.Errorf("%s.Excess %v: %w", field, p.Excess, ErrMode)
		}
		if p.SlowLatency < 0 {
			return fmt.Errorf("%s.SlowLatency %v: %w", field, p.SlowLatency, ErrLatency)
		}
	}
	if c.AS2ID != "" && !as2.ValidAS2ID(c.AS2ID) {
		return fmt.Errorf("Config.AS2ID %q: %w", c.AS2ID, ErrAS2ID)
	}
	if c.MaxBodySize < 0 {
		return fmt.Errorf("Config.MaxBodySize %d: %w", c.MaxBodySize, ErrMaxBodySize)
	}
	if c.MaxDecompressedSize < 0 {
		return fmt.Errorf("Config.MaxDecompressedSize %d: %w", c.MaxDecompressedSize, ErrMaxBodySize)
	}
	switch {
	case c.Cert != nil && c.Key == nil:
		return fmt.Errorf("Config.Key: %w: Cert is set, Key is not", ErrKey)
	case c.Cert == nil && c.Key != nil:
		return fmt.Errorf("Config.Cert: %w: Key is set, Cert is not", ErrKey)
	case c.Cert != nil:
		pub, ok := c.Key.Public().(interface{ Equal(crypto.PublicKey) bool })
		if !ok || !pub.Equal(c.Cert.PublicKey) {
			return fmt.Errorf("Config.Key: %w: not the private key of Cert", ErrKey)
		}
	}
	return c.Async.validate()
}
