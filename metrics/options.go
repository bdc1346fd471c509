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

// DefaultMaxPartners is the number of partners with a partner label of
// their own when [Options.MaxPartners] is zero.
const DefaultMaxPartners = 100

// MaxPartnersLimit is the largest [Options.MaxPartners].
const MaxPartnersLimit = 10000

// Options configures [New]. The zero value is valid: every field is
// optional.
type Options struct {
	// Service is the value of a service label on every series, to tell
	// apart two [Metrics] on one registry (two services in one process).
	// Optional. Default "": no service label. Any string that is valid
	// UTF-8.
	Service string

	// MaxPartners caps the number of partners with a partner label of their
	// own: the first partners seen take the labels while there is room, a
	// label is freed by [Metrics.Forget], and the others are counted under
	// the partner label [PartnerOther]. Each labelled partner costs about
	// 110 series with the default buckets (the latency histogram's 15 per
	// outcome included).
	// Optional. Default 100. Valid range 1..10000.
	MaxPartners int

	// SlowCallDuration is the latency above which a delivered call counts as
	// slow in floodgate_calls_total, for every partner.
	// Optional. Default: each partner's own breaker's SlowCallDuration when
	// the [Metrics] finds it ([Metrics.WatchBreaker], [Metrics.WatchRegistry],
	// [Metrics.ObserveTransition]), else breaker.DefaultSlowCallDuration
	// (5 s), which also applies to the PartnerOther and PartnerNone series.
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
	if o.MaxPartners == 0 {
		o.MaxPartners = DefaultMaxPartners
	}
}

// Validate reports the first invalid field, wrapping [ErrInvalidOptions].
// Zero optional fields are valid (they take their defaults).
func (o Options) Validate() error {
	switch {
	case !utf8Valid(o.Service):
		return fmt.Errorf("%w: Service must be valid UTF-8 (a label value), got %q", ErrInvalidOptions, o.Service)
	case o.MaxPartners < 0 || o.MaxPartners > MaxPartnersLimit:
		return fmt.Errorf("%w: MaxPartners must be in 1..%d (0 for the default %d), got %d", ErrInvalidOptions, MaxPartnersLimit, DefaultMaxPartners, o.MaxPartners)
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
