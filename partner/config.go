package partner

import (
	"fmt"
	"time"

	"github.com/floodgate-go/floodgate/breaker"
)

// Defaults of the Config and PartnerConfig fields.
const (
	DefaultMaxPartners   = 10000            // Config.MaxPartners, partners
	DefaultIdleAfter     = 10 * time.Minute // Config.IdleAfter
	DefaultSweepInterval = time.Minute      // Config.SweepInterval
	DefaultMaxKeyLen     = 8 << 10          // Config.MaxKeyLen, bytes
	DefaultMaxInFlight   = 16               // PartnerConfig.MaxInFlight, calls
)

// Limits of the Config and PartnerConfig fields.
const (
	MaxPartnersLimit = 1 << 24 // Config.MaxPartners
	MaxKeyLenLimit   = 1 << 20 // Config.MaxKeyLen, bytes
	MaxInFlightLimit = 1 << 20 // PartnerConfig.MaxInFlight, calls
)

// PartnerConfig configures one partner: its breaker and its bulkhead.
type PartnerConfig struct {
	// Breaker configures the partner's breaker. Optional: the zero value
	// takes the breaker's defaults (see [breaker.Config]). Name defaults to
	// the partner's [Token]; Clock defaults to [Config.Clock].
	Breaker breaker.Config

	// MaxInFlight is the partner's bulkhead: the most calls in flight to
	// the partner at once; [Registry.Acquire] returns [ErrBulkheadFull]
	// beyond it. Optional. Default 16; range 1..MaxInFlightLimit (1<<20).
	MaxInFlight int
}

func (c *PartnerConfig) setDefaults() {
	if c.MaxInFlight == 0 {
		c.MaxInFlight = DefaultMaxInFlight
	}
}

// Validate reports whether c, with defaults applied to its zero fields, is
// valid. It does not modify c. The error wraps [ErrInvalidConfig] (and,
// for the breaker, [breaker.ErrInvalidConfig]) and names the field and its
// allowed range.
func (c PartnerConfig) Validate() error {
	c.setDefaults()
	return c.validate("")
}

// validate requires defaults set. field prefixes the field names in the
// message ("Template.", or a partner's token and a colon).
func (c *PartnerConfig) validate(field string) error {
	if c.MaxInFlight < 1 || c.MaxInFlight > MaxInFlightLimit {
		return fmt.Errorf("%w: %sMaxInFlight must be in 1..%d, got %d", ErrInvalidConfig, field, MaxInFlightLimit, c.MaxInFlight)
	}
	if err := c.Breaker.Validate(); err != nil {
		return fmt.Errorf("%w: %sBreaker: %w", ErrInvalidConfig, field, err)
	}
	return nil
}

// Config configures a [Registry]. The zero value is valid: every field is
// optional. New copies it; changing it afterwards has no effect.
type Config struct {
	// Template is the configuration every partner starts from. Optional:
	// the zero value means the breaker's defaults and a bulkhead of
	// DefaultMaxInFlight. Without Override, every partner's breaker is
	// made from one [breaker.Template] of Template.Breaker and shares its
	// configuration instead of holding a copy (about 350 bytes less per
	// partner).
	Template PartnerConfig

	// Override adjusts one partner's configuration: it is called once per
	// partner, when the partner is created (again after an eviction), with
	// the partner's key and a copy of Template whose Breaker.Name is already
	// the partner's token. The result is validated; a bad one makes
	// [Registry.Get] fail with an error wrapping [ErrInvalidConfig], naming
	// the partner's token. With Override set, each partner's breaker holds
	// its own copy of its configuration. Optional. Default nil: every partner uses
	// Template. It must be safe for concurrent use and must not call the
	// registry; the key is untrusted input.
	Override func(key string, c *PartnerConfig)

	// MaxPartners caps the number of partners held. A new partner beyond it
	// first makes room by evicting idle partners; when none can be evicted,
	// [Registry.Get] returns [ErrPartnerLimit]. Optional. Default 10000;
	// range 1..MaxPartnersLimit (1<<24).
	MaxPartners int

	// IdleAfter is how long a partner must go unused (no Get, Acquire or
	// With) before it may be evicted. A partner is never evicted while it
	// has calls in flight, its breaker is not closed, is forced, or still
	// holds a backoff ladder above its base (closed by ForceClose after a
	// trip), or HasBacklog reports a backlog. Optional. Default 10m;
	// range > 0.
	IdleAfter time.Duration

	// SweepInterval is the least time between two automatic sweeps for
	// idle partners. The registry has no goroutine: a sweep runs in the
	// goroutine that creates a partner once SweepInterval has passed since
	// the last sweep, or calls [Registry.Sweep]. A partner is evicted
	// between IdleAfter and IdleAfter+SweepInterval after its last use (if a
	// sweep runs then). Optional. Default 1m; range > 0.
	SweepInterval time.Duration

	// MaxKeyLen caps the length of a partner key, in bytes, so that
	// MaxPartners keys bound the memory held; [Registry.Get] returns [ErrKeyTooLong] beyond
	// it. Optional. Default 8192 bytes; range 1..MaxKeyLenLimit (1 MiB).
	MaxKeyLen int

	// HasBacklog reports whether a partner has a backlog (messages waiting
	// in the retry queue); such a partner is never evicted. It is called
	// during a sweep, for each partner otherwise evictable, with no lock of
	// the registry held. It should answer from memory (a drainer's pending
	// counts), must be safe for concurrent use, and must not block for
	// long. It may call the registry, but not [Registry.Sweep]. Optional.
	// Default nil: no partner has a backlog.
	HasBacklog func(p *Partner) bool

	// OnTransition receives every transition of every partner's breaker,
	// with the partner. It is called as [breaker.Breaker.AddListener]
	// listeners are: after the breaker's lock is released, one at a time
	// per breaker, in order; it may call the breaker and the registry.
	// Optional. Default nil.
	OnTransition func(p *Partner, t breaker.Transition)

	// OnEvict is called once for each evicted partner, after it left the
	// registry, with no lock held: delete the partner's metric series
	// there. It may call the registry, but not [Registry.Sweep].
	// Optional. Default nil.
	OnEvict func(p *Partner)

	// Fleet, when set, joins every partner's breaker to a fleet when the
	// partner is created, and has it leave when the partner is evicted or
	// the registry closed: replicas of the service share each partner's
	// state and its probe budget (at most the partner's ProbeConcurrency
	// probes in flight across the replicas), under the fleet name
	// [FleetName](Service, key). Joining reads the partner's shared state
	// (one store round trip, in the goroutine creating the partner) and
	// costs no goroutine per partner. Optional. Default nil: every breaker
	// is local to the process.
	Fleet *FleetConfig

	// Clock reads the time for idle eviction, and is the Clock of every
	// breaker whose configuration has none. Optional. Default the wall
	// clock. Tests use breakertest.Clock.
	Clock breaker.Clock
}

func (c *Config) setDefaults() {
	c.Template.setDefaults()
	if c.MaxPartners == 0 {
		c.MaxPartners = DefaultMaxPartners
	}
	if c.IdleAfter == 0 {
		c.IdleAfter = DefaultIdleAfter
	}
	if c.SweepInterval == 0 {
		c.SweepInterval = DefaultSweepInterval
	}
	if c.MaxKeyLen == 0 {
		c.MaxKeyLen = DefaultMaxKeyLen
	}
}

// Validate reports whether c, with defaults applied to its zero fields, is
// valid: the check [New] makes. It does not modify c. The error wraps
// [ErrInvalidConfig] and names the field and its allowed range.
func (c Config) Validate() error {
	c.setDefaults()
	return c.validate()
}

// validate requires defaults set.
func (c *Config) validate() error {
	switch {
	case c.MaxPartners < 1 || c.MaxPartners > MaxPartnersLimit:
		return fmt.Errorf("%w: MaxPartners must be in 1..%d, got %d", ErrInvalidConfig, MaxPartnersLimit, c.MaxPartners)
	case c.IdleAfter <= 0:
		return fmt.Errorf("%w: IdleAfter must be > 0, got %s", ErrInvalidConfig, c.IdleAfter)
	case c.SweepInterval <= 0:
		return fmt.Errorf("%w: SweepInterval must be > 0, got %s", ErrInvalidConfig, c.SweepInterval)
	case c.MaxKeyLen < 1 || c.MaxKeyLen > MaxKeyLenLimit:
		return fmt.Errorf("%w: MaxKeyLen must be in 1..%d, got %d", ErrInvalidConfig, MaxKeyLenLimit, c.MaxKeyLen)
	}
	if c.Fleet != nil {
		if err := c.Fleet.validate(); err != nil {
			return err
		}
	}
	return c.Template.validate("Template.")
}

type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }
