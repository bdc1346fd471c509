package metrics

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// DefaultLatencyBuckets are the default upper bounds, in seconds, of
// floodgate_delivery_latency_seconds: 5 ms to 30 s, covering a webhook that
// answers at once and an AS2 partner that takes the whole delivery timeout.
func DefaultLatencyBuckets() []float64 {
	return []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30}
}

// DefaultScrapeTimeout bounds the NATS request that reads the retry backlog
// on each scrape when [Options.ScrapeTimeout] is zero.
const DefaultScrapeTimeout = 2 * time.Second

// Options configures [New].
type Options struct {
	// Breaker is the value of the breaker label on every series, normally
	// the breaker's [breaker.Config.Name]. Two [Metrics] on one registry need
	// different values.
	// Required. Any non-empty string.
	Breaker string

	// SlowCallDuration is the latency above which a delivered call counts as
	// slow in floodgate_calls_total.
	// Optional. Default: the watched breaker's SlowCallDuration once
	// [Metrics.WatchBreaker] is called; before that no call counts as slow.
	// Valid range >= 0.
	SlowCallDuration time.Duration

	// LatencyBuckets are the histogram's upper bounds in seconds, strictly
	// increasing and > 0.
	// Optional. Default [DefaultLatencyBuckets].
	LatencyBuckets []float64

	// ScrapeTimeout bounds the JetStream request that reads the retry
	// backlog during a scrape; on timeout or error the backlog series is left
	// out of that scrape.
	// Optional. Default [DefaultScrapeTimeout] (2 s). Valid range > 0.
	ScrapeTimeout time.Duration
}

func (o *Options) setDefaults() {
	if o.LatencyBuckets == nil {
		o.LatencyBuckets = DefaultLatencyBuckets()
	}
	if o.ScrapeTimeout == 0 {
		o.ScrapeTimeout = DefaultScrapeTimeout
	}
}

// Validate reports the first invalid field, wrapping [ErrInvalidOptions].
// Zero optional fields are valid (they take their defaults).
func (o Options) Validate() error {
	switch {
	case o.Breaker == "":
		return fmt.Errorf("%w: Breaker is required (the breaker label's value)", ErrInvalidOptions)
	case o.SlowCallDuration < 0:
		return fmt.Errorf("%w: SlowCallDuration must be >= 0, got %v", ErrInvalidOptions, o.SlowCallDuration)
	case o.ScrapeTimeout < 0:
		return fmt.Errorf("%w: ScrapeTimeout must be > 0, got %v", ErrInvalidOptions, o.ScrapeTimeout)
	}
	if o.LatencyBuckets != nil {
		if len(o.LatencyBuckets) == 0 {
			return fmt.Errorf("%w: LatencyBuckets must hold at least one bound", ErrInvalidOptions)
		}
		for i, b := range o.LatencyBuckets {
			if !(b > 0) || math.IsInf(b, 0) || (i > 0 && b <= o.LatencyBuckets[i-1]) {
				return fmt.Errorf("%w: LatencyBuckets[%d] = %v: bounds must be > 0, finite and strictly increasing", ErrInvalidOptions, i, b)
			}
		}
	}
	return nil
}

func (o Options) clone() Options {
	o.LatencyBuckets = slices.Clone(o.LatencyBuckets)
	return o
}
