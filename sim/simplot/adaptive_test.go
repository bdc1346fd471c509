package simplot_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/sim"
)

// adaptiveNotes renders the README's measured notes on the adaptive
// strategy under the fragile table: how close it gets to the physical
// limit, how the ratios hold over seeds, the AdaptiveHold trade-off on a
// grid of scenarios, and a capacity below its minimum share.
func adaptiveNotes(t *testing.T, sc sim.Scenario, res []sim.Result) string {
	t.Helper()
	m := byStrategy(res)
	a, s, r := m[sim.Adaptive], m[sim.SingleProbe], m[sim.Ramp]
	var b strings.Builder
	fmt.Fprintf(&b, "Adaptive on `fragile`: %d errors after recovery, %s of single-probe's and %s of ramp's, %d re-trips, "+
		"full traffic %.2f s after the capacity returns (the physical limit: 0 errors, 0 s).",
		a.ErrorsAfterRecovery, pct(a.ErrorsAfterRecovery, s.ErrorsAfterRecovery), pct(a.ErrorsAfterRecovery, r.ErrorsAfterRecovery),
		a.RetripsAfterRecovery, (a.TimeToFullTraffic - sc.Fragile).Seconds())

	const seeds = 40
	var ae, se, re, ok25, ok10 int
	for seed := uint64(1); seed <= seeds; seed++ {
		v := sc
		v.Seed = seed
		m := byStrategy(runAll(t, v, []string{sim.SingleProbe, sim.Ramp, sim.Adaptive}))
		ae += m[sim.Adaptive].ErrorsAfterRecovery
		se += m[sim.SingleProbe].ErrorsAfterRecovery
		re += m[sim.Ramp].ErrorsAfterRecovery
		if 4*m[sim.Adaptive].ErrorsAfterRecovery <= m[sim.Ramp].ErrorsAfterRecovery {
			ok25++
		}
		if 10*m[sim.Adaptive].ErrorsAfterRecovery <= m[sim.SingleProbe].ErrorsAfterRecovery {
			ok10++
		}
	}
	fmt.Fprintf(&b, " Over seeds 1-%d: %s of ramp's errors and %s of single-probe's in all; a seed on its own has at most "+
		"25 %% of ramp's on %d of them and at most 10 %% of single-probe's on %d.\n\n", seeds, pct(ae, re), pct(ae, se), ok25, ok10)

	b.WriteString("`Config.AdaptiveHold` (clean intervals between re-tests of the loss level, default 2) trades errors " +
		"for time to full traffic. On 81 fragile scenarios (rates 50, 100 and 200 calls/s; capacity 20, 30 and 50 % " +
		"of the load; fragile for 5, 10 and 20 s; outages of 5, 10 and 30 s; the note's breaker; one seed each):\n\n")
	b.WriteString("| AdaptiveHold | adaptive errors | ramp errors | single-probe errors | adaptive full traffic > single-probe's + 1 s | adaptive re-trips |\n")
	b.WriteString("| ---: | ---: | ---: | ---: | ---: | ---: |\n")
	grid := holdGrid(sc)
	base := make([]map[string]sim.Result, len(grid))
	for i, v := range grid {
		base[i] = byStrategy(runAll(t, v, []string{sim.SingleProbe, sim.Ramp}))
	}
	for _, hold := range []int{2, 3, 4} {
		var ae, se, re, late, retrips int
		for i, v := range grid {
			cfg, err := sim.StrategyConfig(sim.Adaptive, v)
			if err != nil {
				t.Fatal(err)
			}
			cfg.AdaptiveHold = hold
			ar, err := sim.Simulate(v, sim.Adaptive, cfg)
			if err != nil {
				t.Fatal(err)
			}
			ae += ar.ErrorsAfterRecovery
			retrips += ar.RetripsAfterRecovery
			se += base[i][sim.SingleProbe].ErrorsAfterRecovery
			re += base[i][sim.Ramp].ErrorsAfterRecovery
			if full(ar) > full(base[i][sim.SingleProbe])+time.Second {
				late++
			}
		}
		fmt.Fprintf(&b, "| %d | %d | %d | %d | %d | %d |\n", hold, ae, re, se, late, retrips)
	}

	low := sc
	low.FragileCapacity = 5
	lm := byStrategy(runAll(t, low, []string{sim.SingleProbe, sim.Ramp, sim.Adaptive}))
	fmt.Fprintf(&b, "\nBelow the minimum share (`-fragile-capacity 5`, 5 %% of the load, under adaptive's 10 %% start): "+
		"adaptive %d errors and %d re-trips, ramp %d and %d, single-probe %d and %d.\n",
		lm[sim.Adaptive].ErrorsAfterRecovery, lm[sim.Adaptive].RetripsAfterRecovery,
		lm[sim.Ramp].ErrorsAfterRecovery, lm[sim.Ramp].RetripsAfterRecovery,
		lm[sim.SingleProbe].ErrorsAfterRecovery, lm[sim.SingleProbe].RetripsAfterRecovery)
	return b.String()
}

// holdGrid is the fragile preset sc on 81 points: rates, capacities,
// fragile periods and outages, one seed each. The trip's minimum calls
// follow the rate (the preset's 80 at 100 calls/s).
func holdGrid(sc sim.Scenario) []sim.Scenario {
	var out []sim.Scenario
	seed := uint64(100)
	for _, rate := range []float64{50, 100, 200} {
		for _, frac := range []float64{0.2, 0.3, 0.5} {
			for _, fragile := range []time.Duration{5 * time.Second, 10 * time.Second, 20 * time.Second} {
				for _, outage := range []time.Duration{5 * time.Second, 10 * time.Second, 30 * time.Second} {
					seed++
					v := sc
					v.Rate, v.FragileCapacity, v.Fragile, v.Outage, v.Seed = rate, rate*frac, fragile, outage, seed
					v.RecoverAt = 10*time.Second + outage
					v.Duration = v.RecoverAt + fragile + 40*time.Second
					v.TripMinCalls = int(float64(sc.TripMinCalls) * rate / sc.Rate)
					out = append(out, v)
				}
			}
		}
	}
	return out
}

func runAll(t *testing.T, sc sim.Scenario, names []string) []sim.Result {
	t.Helper()
	res, err := sim.Run(sc, names)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func byStrategy(res []sim.Result) map[string]sim.Result {
	m := map[string]sim.Result{}
	for _, r := range res {
		m[r.Strategy] = r
	}
	return m
}

func full(r sim.Result) time.Duration {
	if r.TimeToFullTraffic == sim.Never {
		return 1<<63 - 1
	}
	return r.TimeToFullTraffic
}

// pct formats a/b as a whole percentage.
func pct(a, b int) string {
	if b == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.0f %%", 100*float64(a)/float64(b))
}
