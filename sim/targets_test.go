package sim_test

import (
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/sim"
)

// presetResults runs each preset once per test binary (all strategies,
// seed 1) and shares the results between tests.
var presetResults = struct {
	sync.Mutex
	m map[string]map[string]sim.Result
}{m: map[string]map[string]sim.Result{}}

func runPreset(t *testing.T, name string) (sim.Scenario, map[string]sim.Result) {
	t.Helper()
	sc, err := sim.Preset(name)
	if err != nil {
		t.Fatal(err)
	}
	presetResults.Lock()
	defer presetResults.Unlock()
	if m, ok := presetResults.m[name]; ok {
		return sc, m
	}
	m := runAll(t, sc)
	presetResults.m[name] = m
	return sc, m
}

func runAll(t *testing.T, sc sim.Scenario) map[string]sim.Result {
	t.Helper()
	res, err := sim.Run(sc, sim.StrategyNames())
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]sim.Result{}
	for _, r := range res {
		m[r.Strategy] = r
	}
	return m
}

func summary(r sim.Result) string {
	return fmt.Sprintf("%s: errors %d, re-trips %d, close %v, full traffic %v", r.Strategy,
		r.ErrorsAfterRecovery, r.RetripsAfterRecovery, r.TimeToClose, r.TimeToFullTraffic)
}

// target is one of the inequalities. gap, when set, explains why
// the current breaker or model may not meet it: an unmet target with a gap
// is reported (skipped with its numbers), not failed; one without a gap
// fails the test.
type target struct {
	name string
	ok   func(m map[string]sim.Result) bool
	gap  string
}

func checkTargets(t *testing.T, m map[string]sim.Result, targets []target) {
	t.Helper()
	var all string
	for _, s := range sim.StrategyNames() {
		all += "\n  " + summary(m[s])
	}
	for _, tg := range targets {
		t.Run(tg.name, func(t *testing.T) {
			if tg.ok(m) {
				return
			}
			if tg.gap != "" {
				t.Skipf("issue 4 target not met (known gap: %s):%s", tg.gap, all)
			}
			t.Errorf("target %q does not hold:%s", tg.name, all)
		})
	}
}

func full(r sim.Result) time.Duration {
	if r.TimeToFullTraffic == sim.Never {
		return 1<<63 - 1
	}
	return r.TimeToFullTraffic
}

// rampVsSingle are the probing-strategies note's findings: the ramp causes
// fewer errors after a fragile recovery than a single probe that closes at
// once, and reaches full traffic later.
var rampVsSingle = []target{
	{name: "ramp has fewer errors than single-probe", ok: func(m map[string]sim.Result) bool {
		return m[sim.Ramp].ErrorsAfterRecovery < m[sim.SingleProbe].ErrorsAfterRecovery
	}},
	{name: "ramp reaches full traffic later than single-probe", ok: func(m map[string]sim.Result) bool {
		return full(m[sim.Ramp]) > full(m[sim.SingleProbe])
	}},
}

// adaptiveSanity holds for the adaptive policy whenever the dependency
// comes back fragile: it follows capacity, so it never re-trips, causes
// fewer errors than a single probe that closes at once, and reaches full
// traffic before the ramp. (It does not always cause fewer errors than the
// ramp: a ramp that fails a step early waits out a long fragile period in
// the open state, while adaptive keeps probing above the capacity.)
var adaptiveSanity = []target{
	{name: "adaptive does not re-trip", ok: func(m map[string]sim.Result) bool {
		return m[sim.Adaptive].RetripsAfterRecovery == 0
	}},
	{name: "adaptive has fewer errors than single-probe", ok: func(m map[string]sim.Result) bool {
		return m[sim.Adaptive].ErrorsAfterRecovery < m[sim.SingleProbe].ErrorsAfterRecovery
	}},
	{name: "adaptive reaches full traffic before ramp", ok: func(m map[string]sim.Result) bool {
		return full(m[sim.Adaptive]) < full(m[sim.Ramp])
	}},
}

// The targets for adaptive, measured on the fragile preset (the
// note's breaker). The physical limit is 0 errors and full traffic when the
// capacity returns, 10 s after recovery: in this model a fragile dependency
// gives no signal below its capacity, so adaptive learns it only by
// exceeding it (2 errors) and learns that it is back only by re-testing the
// old level (1 error each while it is still low).
var adaptiveTargets = []target{
	{name: "adaptive errors <= 25% of ramp's", ok: func(m map[string]sim.Result) bool {
		return 4*m[sim.Adaptive].ErrorsAfterRecovery <= m[sim.Ramp].ErrorsAfterRecovery
	}},
	{name: "adaptive errors <= 10% of single-probe's", ok: func(m map[string]sim.Result) bool {
		return 10*m[sim.Adaptive].ErrorsAfterRecovery <= m[sim.SingleProbe].ErrorsAfterRecovery
	}},
	{name: "adaptive full traffic <= single-probe's + 1s", ok: func(m map[string]sim.Result) bool {
		return full(m[sim.Adaptive]) <= full(m[sim.SingleProbe])+time.Second
	}},
}

// noteNumbers are the probing-strategies note's simulated results, which the
// fragile preset's breaker reproduces: single probe 118 errors, 2 re-trips,
// full traffic after 13 s; ramp 36 errors, 1 re-trip, 17 s. The test allows
// the single probe ±15 % and ±1.5 s (its numbers set the two breaker
// settings the note leaves out) and the ramp, which nothing was fitted to,
// ±40 % and ±2 s.
var noteNumbers = []target{
	{name: "single-probe near the note's 118 errors, 2 re-trips, 13 s", ok: func(m map[string]sim.Result) bool {
		r := m[sim.SingleProbe]
		return within(float64(r.ErrorsAfterRecovery), 118, 0.15) && r.RetripsAfterRecovery == 2 &&
			(full(r)-13*time.Second).Abs() <= 1500*time.Millisecond
	}},
	{name: "ramp near the note's 36 errors, 1 re-trip, 17 s", ok: func(m map[string]sim.Result) bool {
		r := m[sim.Ramp]
		return within(float64(r.ErrorsAfterRecovery), 36, 0.4) && r.RetripsAfterRecovery == 1 &&
			(full(r)-17*time.Second).Abs() <= 2*time.Second
	}},
}

func within(got, want, rel float64) bool { return got >= want*(1-rel) && got <= want*(1+rel) }

func TestFragilePresetTargets(t *testing.T) {
	_, m := runPreset(t, "fragile")
	checkTargets(t, m, noteNumbers)
	checkTargets(t, m, rampVsSingle)
	checkTargets(t, m, adaptiveSanity)
	checkTargets(t, m, adaptiveTargets)
}

// TestFragileSeeds runs the fragile preset on seeds 1-40. On every seed the
// notes' direction and adaptive's sanity hold. The ratio targets hold on
// the 40 seeds together; a single seed's ratio swings with where the ramp's
// 50 % step and adaptive's re-tests land (about half the seeds meet each on
// its own), so those counts are logged, not asserted. AdaptiveHold trades
// the two off: re-testing less often makes fewer errors and reaches full
// traffic later (README, "Choosing a strategy").
func TestFragileSeeds(t *testing.T) {
	base, _ := sim.Preset("fragile")
	var a, r, s, ok25, ok10 int
	const n = 40
	for seed := uint64(1); seed <= n; seed++ {
		sc := base
		sc.Seed = seed
		m := runAll(t, sc)
		t.Run(fmt.Sprint("seed-", seed), func(t *testing.T) {
			checkTargets(t, m, rampVsSingle)
			checkTargets(t, m, adaptiveSanity)
		})
		a += m[sim.Adaptive].ErrorsAfterRecovery
		r += m[sim.Ramp].ErrorsAfterRecovery
		s += m[sim.SingleProbe].ErrorsAfterRecovery
		if adaptiveTargets[0].ok(m) {
			ok25++
		}
		if adaptiveTargets[1].ok(m) {
			ok10++
		}
	}
	t.Logf("%d seeds: errors after recovery adaptive %d, ramp %d, single-probe %d; on its own, adaptive <= 25%% of ramp on %d seeds, <= 10%% of single-probe on %d",
		n, a, r, s, ok25, ok10)
	if 4*a > r || 10*a > s {
		t.Errorf("over %d seeds adaptive made %d errors, ramp %d, single-probe %d: want <= 25%% and <= 10%%", n, a, r, s)
	}
}

// TestFragileDefaultsPreset: behind floodgate's default breaker (a fast
// trip and a doubling open window) the notes' direction still holds, and
// adaptive still never re-trips; the error counts are all smaller, so the
// ratio targets are not asserted there (single-probe re-trips after 7
// errors, not 59).
func TestFragileDefaultsPreset(t *testing.T) {
	_, m := runPreset(t, "fragile-defaults")
	checkTargets(t, m, rampVsSingle)
	checkTargets(t, m, adaptiveSanity)
	checkTargets(t, m, adaptiveTargets[2:])
}

// fragileVariant is the fragile preset with other numbers.
func fragileVariant(rate, capacity float64, fragile, outage time.Duration, arrivals sim.Arrivals, seed uint64) sim.Scenario {
	sc, _ := sim.Preset("fragile")
	sc.Name = fmt.Sprintf("fragile-%g-%g-%v-%v-%v-%d", rate, capacity, fragile, outage, arrivals, seed)
	sc.Rate, sc.FragileCapacity, sc.Fragile, sc.Arrivals, sc.Seed = rate, capacity, fragile, arrivals, seed
	sc.Outage = outage
	sc.RecoverAt = 10*time.Second + outage
	sc.Duration = sc.RecoverAt + fragile + 40*time.Second
	sc.TripMinCalls = int(0.8 * rate) // the preset's 80 calls at 100 calls/s
	return sc
}

// TestFragileOtherParameters checks the notes' direction away from the
// preset: other rates, capacities (at most 30 % of the offered load, as in
// the note), fragile periods, arrivals and seeds. The outage is short enough
// that the first probe after recovery lands in the fragile period (a probe
// after it sees a healthy dependency, and every strategy then does as well).
func TestFragileOtherParameters(t *testing.T) {
	for _, sc := range []sim.Scenario{
		fragileVariant(200, 60, 20*time.Second, 10*time.Second, sim.ArrivalsPoisson, 2),
		fragileVariant(50, 10, 20*time.Second, 5*time.Second, sim.ArrivalsUniform, 3),
	} {
		t.Run(sc.Name, func(t *testing.T) {
			m := runAll(t, sc)
			checkTargets(t, m, rampVsSingle)
			checkTargets(t, m, adaptiveSanity)
			checkTargets(t, m, []target{adaptiveFollowsCapacity(sc)})
		})
	}
}

// adaptiveFollowsCapacity: adaptive reaches full traffic within 3 s of the
// capacity's return (a hold and a probe, 1.5 s with the defaults, then
// doublings to 100 %), or of single-probe's full traffic when the fragile
// period ended before the breaker left the open state. A fragile capacity
// below 30 % of the load adds one doubling interval per halving.
func adaptiveFollowsCapacity(sc sim.Scenario) target {
	bound := 3 * time.Second
	if frac := sc.FragileCapacity / sc.Rate; frac < 0.3 {
		bound += time.Duration(math.Log2(0.3/frac) * float64(breaker.DefaultAdaptiveInterval))
	}
	return target{name: fmt.Sprintf("adaptive full traffic within %v of capacity", bound), ok: func(m map[string]sim.Result) bool {
		return full(m[sim.Adaptive]) <= max(sc.Fragile, full(m[sim.SingleProbe]))+bound
	}}
}

// TestAdaptiveGrid runs the fragile scenario on a grid of rates,
// capacities (5, 30 and 50 % of the load), fragile periods and outages, one
// seed each, behind the note's breaker and behind floodgate's defaults, and
// asserts what the adaptive policy promises on every point: no re-trip,
// fewer errors than single-probe, full traffic soon after the capacity
// returns.
func TestAdaptiveGrid(t *testing.T) {
	seed := uint64(10)
	for _, breakers := range []string{"note", "defaults"} {
		for _, rate := range []float64{50, 100, 200} {
			for _, frac := range []float64{0.05, 0.3, 0.5} {
				for _, fragile := range []time.Duration{5 * time.Second, 10 * time.Second, 20 * time.Second} {
					for _, outage := range []time.Duration{5 * time.Second, 10 * time.Second} {
						seed++
						sc := fragileVariant(rate, rate*frac, fragile, outage, sim.ArrivalsPoisson, seed)
						if breakers == "defaults" {
							def, _ := sim.Preset("fragile-defaults")
							sc.FixedOpenWindow, sc.TripWindow, sc.TripMinCalls = false, 0, 0
							sc.OpenWindow, sc.MaxOpenWindow = def.OpenWindow, def.MaxOpenWindow
						}
						t.Run(breakers+"/"+sc.Name, func(t *testing.T) {
							t.Parallel()
							m := runAll(t, sc)
							checkTargets(t, m, []target{
								adaptiveSanity[0],
								{name: "adaptive errors <= single-probe's", ok: func(m map[string]sim.Result) bool {
									return m[sim.Adaptive].ErrorsAfterRecovery <= m[sim.SingleProbe].ErrorsAfterRecovery
								}},
								adaptiveFollowsCapacity(sc),
							})
						})
					}
				}
			}
		}
	}
}

// slowTargets are the geofence note's findings on the slow preset.
var slowTargets = []target{
	{name: "eager re-trips at least 3 times", ok: func(m map[string]sim.Result) bool {
		return m[sim.Eager].RetripsAfterRecovery >= 3
	}},
	{name: "eager has many probes in flight, capped-probes at most 2", ok: func(m map[string]sim.Result) bool {
		return m[sim.Eager].MaxProbesInFlight > 2 && m[sim.CappedProbes].MaxProbesInFlight <= 2
	}},
	{name: "capped-probes has far fewer errors than eager", ok: func(m map[string]sim.Result) bool {
		return 10*m[sim.CappedProbes].ErrorsAfterRecovery < m[sim.Eager].ErrorsAfterRecovery
	}},
	{name: "capped-probes does not re-trip", ok: func(m map[string]sim.Result) bool {
		return m[sim.CappedProbes].RetripsAfterRecovery == 0
	}},
	{name: "capped-probes closes within 5s", ok: func(m map[string]sim.Result) bool {
		c := m[sim.CappedProbes].TimeToClose
		return c != sim.Never && c <= 5*time.Second
	}},
	{name: "capped-probes drains the whole backlog", ok: func(m map[string]sim.Result) bool {
		r := m[sim.CappedProbes]
		return r.BacklogLeft == 0 && r.TimeToDrain != sim.Never && r.Redelivered == r.Diverted
	}},
}

func TestSlowPresetTargets(t *testing.T) {
	_, m := runPreset(t, "slow")
	checkTargets(t, m, slowTargets)
}

// TestSlowOtherParameters runs the slow scenario with other loads,
// capacities (1.5 to 3 times the load), drain rates, slow spells (3 to 7 s:
// the doubling windows then end within a few seconds of the recovery; after
// a longer spell capped-probes closes within one open window of it) and
// seeds.
func TestSlowOtherParameters(t *testing.T) {
	for i, v := range []struct {
		rate, capacity, drain float64
		outage                time.Duration
	}{
		{200, 400, 100, 5 * time.Second},
		{50, 75, 25, 3 * time.Second},
		{100, 300, 50, 7 * time.Second},
		{200, 300, 50, 5 * time.Second},
	} {
		sc, _ := sim.Preset("slow")
		sc.Rate, sc.Capacity, sc.DrainRate, sc.Outage, sc.Seed = v.rate, v.capacity, v.drain, v.outage, uint64(2+i)
		t.Run(fmt.Sprintf("%g-%g-%g-%v", v.rate, v.capacity, v.drain, v.outage), func(t *testing.T) {
			m := runAll(t, sc)
			checkTargets(t, m, slowTargets)
			checkTargets(t, m, []target{{name: "adaptive does not re-trip", ok: func(m map[string]sim.Result) bool {
				return m[sim.Adaptive].RetripsAfterRecovery == 0
			}}})
		})
	}
}

// maxBursts returns how many open windows of the breaker's ladder, each at
// its shortest (step × (1-Jitter)), fit in the outage, plus one: a bound on
// the probe bursts of a backed-off strategy.
func maxBursts(t *testing.T, sc sim.Scenario) int {
	cfg, err := sim.StrategyConfig(sim.CappedProbes, sc)
	if err != nil {
		t.Fatal(err)
	}
	var sum time.Duration
	n := 0
	for sum < sc.Outage {
		n++
		sum += time.Duration(float64(cfg.OpenWindowStep(n)) * (1 - breaker.DefaultJitter))
	}
	return n + 1
}

func checkLongOutage(t *testing.T, sc sim.Scenario, m map[string]sim.Result) {
	t.Helper()
	fixed := int(sc.Outage / sc.OpenWindow) // the EDI note's 4h / 30s = 480
	if b := m[sim.Eager].ProbeBursts; b < fixed*97/100 || b > fixed {
		t.Errorf("eager (fixed %v window): %d probe bursts in a %v outage, want about %d", sc.OpenWindow, b, sc.Outage, fixed)
	}
	bound := maxBursts(t, sc)
	for _, s := range []string{sim.SingleProbe, sim.CappedProbes, sim.Ramp, sim.Adaptive} {
		r := m[s]
		if r.ProbeBursts < 1 || r.ProbeBursts > bound {
			t.Errorf("%s (doubling window): %d probe bursts, want 1..%d", s, r.ProbeBursts, bound)
		}
		if r.TimeToClose == sim.Never || r.TimeToClose > time.Duration(float64(sc.MaxOpenWindow)*(1+breaker.DefaultJitter))+10*time.Second {
			t.Errorf("%s: closes %v after a long outage, want within one capped window", s, r.TimeToClose)
		}
	}
	if m[sim.SingleProbe].ProbesDuringOutage != m[sim.SingleProbe].ProbeBursts {
		t.Errorf("single-probe: %d probes in %d bursts, want one per burst", m[sim.SingleProbe].ProbesDuringOutage, m[sim.SingleProbe].ProbeBursts)
	}
}

func TestLongOutagePreset(t *testing.T) {
	sc, m := runPreset(t, "long-outage")
	checkLongOutage(t, sc, m)
	t.Logf("probe bursts over %v: fixed %v window %d; doubling to %v: %d", sc.Outage, sc.OpenWindow,
		m[sim.Eager].ProbeBursts, sc.MaxOpenWindow, m[sim.CappedProbes].ProbeBursts)
}

func TestLongOutageOtherParameters(t *testing.T) {
	sc, _ := sim.Preset("long-outage")
	sc.Rate, sc.Seed = 5, 3
	sc.Outage, sc.OpenWindow, sc.MaxOpenWindow = 2*time.Hour, 10*time.Second, 5*time.Minute
	sc.RecoverAt = 2*time.Hour + time.Minute
	sc.Duration = sc.RecoverAt + 10*time.Minute
	checkLongOutage(t, sc, runAll(t, sc))
}

// TestAdaptiveBurstDoesNotClose is a regression test from the parameter
// grid: at 200 calls/s against a capacity of 100/s with a 10-call burst
// allowance, a share doubled early (on MinimumCalls clean outcomes) to
// 100 % saw the burst's clean calls and closed, then re-tripped. Closing
// now takes a whole clean interval at 100 %.
func TestAdaptiveBurstDoesNotClose(t *testing.T) {
	sc := fragileVariant(200, 100, 20*time.Second, 5*time.Second, sim.ArrivalsPoisson, 2)
	res, err := sim.Run(sc, []string{sim.Adaptive})
	if err != nil {
		t.Fatal(err)
	}
	if r := res[0]; r.RetripsAfterRecovery != 0 || r.TimeToClose < sc.Fragile {
		t.Errorf("%s; want no re-trip and no close before the capacity returns at %v", summary(r), sc.Fragile)
	}
}
