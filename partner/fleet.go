package partner

import (
	"fmt"

	"github.com/floodgate-go/floodgate/breaker"
)

// FleetConfig joins every partner's breaker to a fleet ([breaker.JoinFleet]):
// the replicas of a service share each partner's state and probe budget,
// one shared state (one KV key with breaker/natskv) per (service, partner).
type FleetConfig struct {
	// Service is the name of the service the registry delivers for: the
	// route's service (retryqueue.Config.Service, or the name derived from
	// its Source and Handler), so the breaker's fleet name matches its
	// retry subject. Required (non-empty): breakers of the same partner
	// in two services must not share a fleet.
	Service string

	// Template is the fleet configuration of every partner's breaker; its
	// Name is set to [FleetName](Service, key). Store is required; Replica
	// should be set once per process (its default draws a random name per
	// breaker). See [breaker.FleetConfig] for the other fields and their
	// defaults; ProbeLeaseTTL defaults per partner from its breaker's
	// MaxProbeWait.
	Template breaker.FleetConfig
}

// validate checks what can be checked without a breaker.
func (c *FleetConfig) validate() error {
	if c.Service == "" {
		return fmt.Errorf("%w: Fleet.Service is required (non-empty): the service whose partners share breakers", ErrInvalidConfig)
	}
	if err := c.Template.Validate(); err != nil {
		return fmt.Errorf("%w: Fleet.Template: %w", ErrInvalidConfig, err)
	}
	if nc, ok := c.Template.Store.(breaker.NameChecker); ok {
		if err := nc.CheckName(FleetName(c.Service, "k")); err != nil {
			return fmt.Errorf("%w: Fleet.Template.Store cannot hold the fleet names <service token>.<partner token>: %w", ErrInvalidConfig, err)
		}
	}
	return nil
}

// FleetName is the fleet name of the breaker of the partner of key in
// service: Token(service) + "." + Token(key). Distinct (service, key)
// pairs get distinct names (tokens are injective and hold no dot), so a
// partner's breaker is shared by the replicas of one service only, and
// the name is the route's retry subject with the stream name left off
// (retryqueue.RouteSubject). It is a valid breaker/natskv name (two
// tokens of at most [MaxTokenLen] bytes).
func FleetName(service, key string) string { return Token(service) + "." + Token(key) }

// join joins p's breaker to the fleet, if the registry has one.
func (r *Registry) join(p *Partner) error {
	fc := r.cfg.Fleet
	if fc == nil {
		return nil
	}
	cfg := fc.Template
	cfg.Name = FleetName(fc.Service, p.key)
	f, err := breaker.JoinFleet(p.b, cfg)
	if err != nil {
		return fmt.Errorf("%w: partner %s: Fleet: %w", ErrInvalidConfig, p.token, err)
	}
	p.fleet = f
	return nil
}

// Fleet returns the fleet the partner's breaker joined ([Config.Fleet]),
// or nil. It leaves the fleet when the partner is evicted or the registry
// closed.
func (p *Partner) Fleet() *breaker.Fleet { return p.fleet }
