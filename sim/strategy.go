package sim

import (
	"fmt"
	"slices"
	"strings"

	"github.com/floodgate-go/floodgate/breaker"
)

// Strategy names, in the order [StrategyNames] lists them.
const (
	// Eager is the anti-pattern of the notes: a fixed, unjittered open window
	// of [Scenario.OpenWindow], no probe cap (every call is admitted in
	// half-open) and a close on the first good call; with
	// [Scenario.Backlog], [Run] releases the whole backlog at once on every
	// close.
	Eager = "eager"
	// SingleProbe admits one probe in flight and closes on the first good one
	// ([breaker.HalfOpenSingleProbe]).
	SingleProbe = "single-probe"
	// CappedProbes admits at most 2 probes in flight and closes after 5
	// consecutive good (latency-judged) probes ([breaker.HalfOpenCappedProbes],
	// the geofence note's setting).
	CappedProbes = "capped-probes"
	// Ramp admits one probe, then 10 / 25 / 50 / 100 % of traffic for 2s each,
	// reopening on a step whose failure rate reaches 50 %
	// ([breaker.HalfOpenRamp], the probing-strategies note's setting).
	Ramp = "ramp"
	// Adaptive admits one probe, then lets the admitted share follow the
	// measured failures and latency ([breaker.HalfOpenAdaptive] with its
	// defaults): doubling from 10 % every clean 500 ms, backing off to half
	// the goodput at a loss, probing 5 % above that loss level every 1 s, and
	// doubling again once a probe is clean.
	Adaptive = "adaptive"
)

// StrategyNames returns the built-in strategies: eager, single-probe,
// capped-probes, ramp, adaptive.
func StrategyNames() []string {
	return []string{Eager, SingleProbe, CappedProbes, Ramp, Adaptive}
}

// ParseStrategies parses a comma-separated list of strategy names, or "all",
// in any case. The order is kept and a repeated name counts once. It returns an error
// wrapping [ErrUnknownStrategy] for an unknown name or an empty list.
func ParseStrategies(s string) ([]string, error) {
	s = strings.ToLower(s)
	if strings.TrimSpace(s) == "all" {
		return StrategyNames(), nil
	}
	var out []string
	seen := map[string]bool{}
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if !isStrategy(f) {
			return nil, fmt.Errorf("%w: %q, allowed all or a list of %s", ErrUnknownStrategy, f, strings.Join(StrategyNames(), ", "))
		}
		if !seen[f] {
			seen[f] = true
			out = append(out, f)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: empty list, allowed all or a list of %s", ErrUnknownStrategy, strings.Join(StrategyNames(), ", "))
	}
	return out, nil
}

func isStrategy(name string) bool { return slices.Contains(StrategyNames(), name) }

// StrategyConfig returns the breaker configuration of a built-in strategy
// for scenario sc. Every strategy trips the same way: at a failure rate or
// slow-call rate of 50 %, slow meaning slower than sc.SlowCallDuration,
// over the breaker's default window of 20 calls (at least 10), or over
// sc.TripWindow and sc.TripMinCalls when set. Except eager, every strategy
// opens for a doubling window from sc.OpenWindow up to sc.MaxOpenWindow,
// jittered by ±20 %, or for a fixed, unjittered sc.OpenWindow with
// sc.FixedOpenWindow. The clock and the seed are left zero:
// [Simulate] sets them. It returns an error wrapping [ErrUnknownStrategy]
// for another name.
func StrategyConfig(name string, sc Scenario) (breaker.Config, error) {
	sc.setDefaults()
	cfg := breaker.Config{
		Name:                  name,
		SlowCallDuration:      sc.SlowCallDuration,
		SlowCallRateThreshold: breaker.DefaultFailureRateThreshold,
		BaseOpenWindow:        sc.OpenWindow,
		MaxOpenWindow:         sc.MaxOpenWindow,
	}
	switch name {
	case Eager:
		cfg.FixedOpenWindow = true
		cfg.DisableJitter = true
		cfg.HalfOpenPolicy = breaker.HalfOpenCappedProbes
		cfg.ProbeConcurrency = 1 << 16
		cfg.SuccessesToClose = 1
	case SingleProbe:
		cfg.HalfOpenPolicy = breaker.HalfOpenSingleProbe
	case CappedProbes:
		cfg.HalfOpenPolicy = breaker.HalfOpenCappedProbes
		cfg.ProbeConcurrency = 2
		cfg.SuccessesToClose = 5
	case Ramp:
		cfg.HalfOpenPolicy = breaker.HalfOpenRamp
		cfg.ProbeConcurrency = 1
		cfg.SuccessesToClose = 1
	case Adaptive:
		cfg.HalfOpenPolicy = breaker.HalfOpenAdaptive
		cfg.ProbeConcurrency = 1
		cfg.SuccessesToClose = 1
	default:
		return breaker.Config{}, fmt.Errorf("%w: %q, allowed %s", ErrUnknownStrategy, name, strings.Join(StrategyNames(), ", "))
	}
	if sc.FixedOpenWindow {
		cfg.FixedOpenWindow = true
		cfg.DisableJitter = true
	}
	if sc.TripWindow > 0 {
		cfg.WindowDuration = sc.TripWindow
	}
	if sc.TripMinCalls > 0 {
		cfg.MinimumCalls = sc.TripMinCalls
		if sc.TripWindow == 0 {
			cfg.WindowSize = max(breaker.DefaultWindowSize, sc.TripMinCalls)
		}
	}
	return cfg, nil
}
