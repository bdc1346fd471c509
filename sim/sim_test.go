package sim_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/sim"
)

func jsonOf(t *testing.T, sc sim.Scenario) []byte {
	t.Helper()
	res, err := sim.Run(sc, sim.StrategyNames())
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := sim.WriteJSON(&b, sc, res, true); err != nil {
		t.Fatal(err)
	}
	if err := sim.WriteTable(&b, sc, res); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestDeterminism(t *testing.T) {
	for _, name := range []string{"fragile", "slow"} {
		for _, arr := range []sim.Arrivals{sim.ArrivalsPoisson, sim.ArrivalsUniform} {
			sc, _ := sim.Preset(name)
			sc.Arrivals = arr
			a, b := jsonOf(t, sc), jsonOf(t, sc)
			if !bytes.Equal(a, b) {
				t.Errorf("%s/%v: two runs with seed %d differ", name, arr, sc.Seed)
			}
			sc.Seed = 2
			if c := jsonOf(t, sc); bytes.Equal(a, c) {
				t.Errorf("%s/%v: seeds 1 and 2 give the same output", name, arr)
			}
		}
	}
}

// TestTimersFireOnTime checks that the simulation's clock fires the
// breaker's timers at their deadlines: every open window ends (the breaker
// goes half-open) exactly Window after the trip, although no call arrives at
// that instant.
func TestTimersFireOnTime(t *testing.T) {
	for _, p := range []string{"fragile", "fragile-defaults", "slow"} {
		sc, m := runPreset(t, p)
		for _, s := range sim.StrategyNames() {
			tr := m[s].Transitions
			n := 0
			for i := 1; i < len(tr); i++ {
				if tr[i-1].To != breaker.StateOpen {
					continue
				}
				if tr[i].To != breaker.StateHalfOpen || tr[i].At != tr[i-1].At+tr[i-1].Window {
					t.Errorf("%s/%s: opened at %v for %v, then %v at %v", p, s, tr[i-1].At, tr[i-1].Window, tr[i].To, tr[i].At)
				}
				n++
			}
			if n == 0 {
				t.Errorf("%s/%s: the breaker never opened", p, s)
			}
			if s == sim.Eager || sc.FixedOpenWindow {
				for _, x := range tr {
					if x.To == breaker.StateOpen && x.Window != sc.OpenWindow {
						t.Errorf("%s/%s: open window %v, want a fixed %v", p, s, x.Window, sc.OpenWindow)
					}
				}
			}
		}
	}
}

// TestAccounting checks the metrics against each other on every preset.
func TestAccounting(t *testing.T) {
	for _, p := range sim.PresetNames() {
		sc, m := runPreset(t, p)
		for _, s := range sim.StrategyNames() {
			r := m[s]
			if r.Offered != r.Admitted+r.Diverted {
				t.Errorf("%s/%s: offered %d != admitted %d + diverted %d", p, s, r.Offered, r.Admitted, r.Diverted)
			}
			want := sc.Rate * sc.Duration.Seconds()
			if float64(r.Offered) < 0.95*want || float64(r.Offered) > 1.05*want {
				t.Errorf("%s/%s: offered %d calls, want about %.0f", p, s, r.Offered, want)
			}
			ser := &r.Series
			if n := int((sc.Duration + sim.SeriesStep - 1) / sim.SeriesStep); ser.Len() != n {
				t.Errorf("%s/%s: %d series points, want %d", p, s, ser.Len(), n)
			}
			var off, adm int
			for i := range ser.Len() {
				off += ser.Offered[i]
				adm += ser.Admitted[i]
				if sh := ser.AdmittedShare(i); sh < 0 || sh > 1 {
					t.Fatalf("%s/%s: admitted share %v at point %d", p, s, sh, i)
				}
			}
			if off != r.Offered || adm != r.Admitted {
				t.Errorf("%s/%s: series sums offered %d admitted %d, totals %d %d", p, s, off, adm, r.Offered, r.Admitted)
			}
			if r.ErrorsAfterRecovery > r.Admitted+r.Redelivered || r.ProbeBursts == 0 {
				t.Errorf("%s/%s: %d errors after recovery of %d admitted and %d redelivered, %d bursts", p, s,
					r.ErrorsAfterRecovery, r.Admitted, r.Redelivered, r.ProbeBursts)
			}
			switch {
			case !sc.Backlog:
				if r.Redelivered != 0 || r.BacklogPeak != 0 || r.BacklogLeft != 0 || r.TimeToDrain != 0 {
					t.Errorf("%s/%s: no backlog, but %+v", p, s, r)
				}
			case sc.SlowOutage && sc.Overflow == sim.OverflowSlow:
				// no call fails, so only diverted calls join the backlog:
				// nothing is lost
				if r.Diverted != r.Redelivered+r.BacklogLeft {
					t.Errorf("%s/%s: %d diverted != %d redelivered + %d left", p, s, r.Diverted, r.Redelivered, r.BacklogLeft)
				}
			}
			if last := ser.State[ser.Len()-1]; (last == breaker.StateClosed) != (r.TimeToClose != sim.Never) {
				t.Errorf("%s/%s: final state %v but time to close %v", p, s, last, r.TimeToClose)
			}
		}
		if got := m[sim.SingleProbe].MaxProbesInFlight; got != 1 {
			t.Errorf("%s/single-probe: %d probes in flight, want 1", p, got)
		}
		if got := m[sim.CappedProbes].MaxProbesInFlight; got < 1 || got > 2 {
			t.Errorf("%s/capped-probes: %d probes in flight, want 1..2", p, got)
		}
		// Every strategy's window is eager's when it is fixed.
		if e, c := m[sim.Eager].ProbesDuringOutage, m[sim.CappedProbes].ProbesDuringOutage; e <= c && !sc.FixedOpenWindow {
			t.Errorf("%s: eager sent %d probes into the outage, capped-probes %d; want eager more", p, e, c)
		}
	}
}

// TestNoOutage: a dependency that never fails never trips any strategy.
func TestNoOutage(t *testing.T) {
	sc := sim.Scenario{Rate: 100, Duration: 20 * time.Second, RecoverAt: 10 * time.Second, Seed: 5}
	res, err := sim.Run(sc, sim.StrategyNames())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Diverted != 0 || r.ErrorsAfterRecovery != 0 || len(r.Transitions) != 0 ||
			r.TimeToClose != 0 || r.TimeToFullTraffic != 0 || r.Admitted != r.Offered {
			t.Errorf("%s: %+v", r.Strategy, r)
		}
	}
}

// TestHealthCheck: with a health check every strategy but eager leaves the
// open state within about a second of the recovery, whatever its window.
func TestHealthCheck(t *testing.T) {
	sc, _ := sim.Preset("long-outage")
	sc.Outage, sc.RecoverAt, sc.Duration = 20*time.Minute, 21*time.Minute, 30*time.Minute
	sc.HealthCheck = true
	res, err := sim.Run(sc, []string{sim.Eager, sim.CappedProbes, sim.Adaptive})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Strategy == sim.Eager {
			if r.ProbeBursts < 30 {
				t.Errorf("eager: %d bursts, want one per 30s (no health check)", r.ProbeBursts)
			}
			continue
		}
		if r.ProbeBursts != 0 {
			t.Errorf("%s: %d probe bursts during the outage, want 0 (the health check holds it open)", r.Strategy, r.ProbeBursts)
		}
		if r.TimeToClose == sim.Never || r.TimeToClose > 5*time.Second {
			t.Errorf("%s: closed %v after recovery, want within a few seconds", r.Strategy, r.TimeToClose)
		}
		passed := false
		for _, x := range r.Transitions {
			passed = passed || x.Reason == "health check passed"
		}
		if !passed {
			t.Errorf("%s: no transition by the health check: %+v", r.Strategy, r.Transitions)
		}
	}
}

func TestValidate(t *testing.T) {
	ok := sim.Scenario{Rate: 10, Duration: time.Minute, RecoverAt: 30 * time.Second}
	if err := ok.Validate(); err != nil {
		t.Fatalf("valid scenario: %v", err)
	}
	for _, tc := range []struct {
		field string
		mod   func(*sim.Scenario)
	}{
		{"Rate", func(s *sim.Scenario) { s.Rate = 0 }},
		{"Rate", func(s *sim.Scenario) { s.Rate = 1e6 }},
		{"Duration", func(s *sim.Scenario) { s.Duration = 0 }},
		{"Duration", func(s *sim.Scenario) { s.Rate, s.Duration = 100000, 48*time.Hour }},
		{"RecoverAt", func(s *sim.Scenario) { s.RecoverAt = 2 * time.Minute }},
		{"Outage", func(s *sim.Scenario) { s.Outage = 31 * time.Second }},
		{"Fragile", func(s *sim.Scenario) { s.Fragile = 31 * time.Second }},
		{"FragileCapacity", func(s *sim.Scenario) { s.Fragile = time.Second }},
		{"Capacity", func(s *sim.Scenario) { s.Capacity = -1 }},
		{"DrainRate", func(s *sim.Scenario) { s.DrainRate = -1 }},
		{"DrainRate", func(s *sim.Scenario) { s.DrainRate = 1e6 }},
		{"Healthy.P99", func(s *sim.Scenario) { s.Healthy = sim.Latency{Median: time.Second, P99: time.Millisecond} }},
		{"Slow.Median", func(s *sim.Scenario) { s.Slow = sim.Latency{Median: -1, P99: time.Second} }},
		{"MaxOpenWindow", func(s *sim.Scenario) { s.OpenWindow, s.MaxOpenWindow = time.Minute, time.Second }},
		{"Arrivals", func(s *sim.Scenario) { s.Arrivals = 7 }},
		{"TripWindow", func(s *sim.Scenario) { s.TripWindow = 5 * time.Millisecond }},
		{"TripWindow", func(s *sim.Scenario) { s.TripWindow = 2 * time.Hour }},
		{"TripMinCalls", func(s *sim.Scenario) { s.TripMinCalls = -1 }},
		{"TripMinCalls", func(s *sim.Scenario) { s.TripMinCalls = 2_000_000 }},
		// Regression: the cap was 100 million offered calls, a 14-minute run.
		{"Duration", func(s *sim.Scenario) { s.Rate, s.Duration, s.RecoverAt = 100000, time.Minute, 30*time.Second }},
		// Regression: a time-based window that can never hold the minimum
		// calls never trips.
		{"TripMinCalls", func(s *sim.Scenario) { s.Rate, s.TripWindow, s.TripMinCalls = 100, 10*time.Millisecond, 80 }},
		{"TripMinCalls", func(s *sim.Scenario) { s.TripWindow, s.TripMinCalls = time.Second, 1_000_000 }},
		{"TripMinCalls", func(s *sim.Scenario) { s.Rate, s.TripWindow = 5, time.Second }}, // the default 10 > 5
		{"TripMinCalls", func(s *sim.Scenario) { s.TripWindow, s.TripMinCalls = 50*time.Millisecond, 1 }},
		// Regression: a million-hour open window was accepted.
		{"OpenWindow", func(s *sim.Scenario) { s.OpenWindow = 1_000_000 * time.Hour }},
		{"OpenWindow", func(s *sim.Scenario) { s.OpenWindow = -time.Second }},
		{"MaxOpenWindow", func(s *sim.Scenario) { s.MaxOpenWindow = 48*time.Hour + time.Nanosecond }},
		// Regression: a fixed window with another cap was silently ignored.
		{"MaxOpenWindow", func(s *sim.Scenario) {
			s.FixedOpenWindow, s.OpenWindow, s.MaxOpenWindow = true, 5*time.Second, time.Minute
		}},
	} {
		sc := ok
		tc.mod(&sc)
		err := sc.Validate()
		var fe *sim.FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field || !errors.Is(err, sim.ErrInvalidScenario) {
			t.Errorf("%s: got %v", tc.field, err)
			continue
		}
		if !strings.Contains(err.Error(), tc.field) || !strings.Contains(err.Error(), "allowed") {
			t.Errorf("%s: message %q does not name the field and range", tc.field, err)
		}
		if _, err := sim.Run(sc, []string{sim.Ramp}); !errors.Is(err, sim.ErrInvalidScenario) {
			t.Errorf("%s: Run accepted it: %v", tc.field, err)
		}
	}
}

// TestValidateEdges: the largest inputs still allowed, and the defaults
// that keep a scenario valid.
func TestValidateEdges(t *testing.T) {
	ok := sim.Scenario{Rate: 10, Duration: time.Minute, RecoverAt: 30 * time.Second}
	for name, mod := range map[string]func(*sim.Scenario){
		"2 million calls":                  func(s *sim.Scenario) { s.Rate, s.Duration = 100000, 20*time.Second; s.RecoverAt = 10 * time.Second },
		"count-based window, any minimum":  func(s *sim.Scenario) { s.TripMinCalls = 1_000_000 },
		"minimum = Rate × TripWindow":      func(s *sim.Scenario) { s.TripWindow, s.TripMinCalls = time.Second, 10 },
		"default minimum 10 in 1s at 10/s": func(s *sim.Scenario) { s.TripWindow = time.Second },
		"fixed window, MaxOpenWindow 0":    func(s *sim.Scenario) { s.FixedOpenWindow, s.OpenWindow = true, 5*time.Second },
		"open window of 48h":               func(s *sim.Scenario) { s.OpenWindow, s.MaxOpenWindow = 48*time.Hour, 48*time.Hour },
		"fixed window, MaxOpenWindow = OpenWindow": func(s *sim.Scenario) {
			s.FixedOpenWindow, s.OpenWindow, s.MaxOpenWindow = true, 5*time.Second, 5*time.Second
		},
	} {
		sc := ok
		mod(&sc)
		if err := sc.Validate(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	fixed := sim.Scenario{Rate: 10, Duration: time.Minute, RecoverAt: 30 * time.Second, FixedOpenWindow: true, OpenWindow: 5 * time.Second}
	if got := fixed.WithDefaults().MaxOpenWindow; got != 5*time.Second {
		t.Errorf("fixed 5s window: MaxOpenWindow defaults to %v, want OpenWindow", got)
	}
	if got := (sim.Scenario{OpenWindow: 5 * time.Second}).WithDefaults().MaxOpenWindow; got != 30*time.Second {
		t.Errorf("doubling 5s window: MaxOpenWindow defaults to %v, want 30s", got)
	}
	sc := ok
	sc.Rate, sc.TripWindow, sc.TripMinCalls = 100, 10*time.Millisecond, 80
	if err := sc.Validate(); err == nil || !strings.Contains(err.Error(), "[1, 1] calls") {
		t.Errorf("80 calls in 10ms at 100/s: %v, want the range [1, 1]", err)
	}
	sc.Rate = 10 // 0.1 calls in the window
	if err := sc.Validate(); err == nil || !strings.Contains(err.Error(), "lengthen TripWindow") {
		t.Errorf("a window of 0.1 calls: %v", err)
	}
}

// TestParse: ParseArrivals and ParseOverflow round-trip String and reject
// other strings with ErrInvalidScenario.
func TestParse(t *testing.T) {
	for _, a := range []sim.Arrivals{sim.ArrivalsPoisson, sim.ArrivalsUniform} {
		if got, err := sim.ParseArrivals(a.String()); got != a || err != nil {
			t.Errorf("ParseArrivals(%q) = %v, %v", a, got, err)
		}
	}
	for _, o := range []sim.Overflow{sim.OverflowFail, sim.OverflowSlow} {
		if got, err := sim.ParseOverflow(o.String()); got != o || err != nil {
			t.Errorf("ParseOverflow(%q) = %v, %v", o, got, err)
		}
	}
	if _, err := sim.ParseArrivals("bursty"); !errors.Is(err, sim.ErrInvalidScenario) {
		t.Errorf("ParseArrivals(bursty): %v", err)
	}
	if _, err := sim.ParseOverflow("drop"); !errors.Is(err, sim.ErrInvalidScenario) {
		t.Errorf("ParseOverflow(drop): %v", err)
	}
}

// TestDescribe: the scenario line names every setting that changes the
// results.
func TestDescribe(t *testing.T) {
	preset := func(name string) sim.Scenario {
		sc, err := sim.Preset(name)
		if err != nil {
			t.Fatal(err)
		}
		return sc
	}
	hc := preset("long-outage")
	hc.HealthCheck = true
	one := preset("fragile")
	one.TripWindow, one.TripMinCalls = 10*time.Millisecond, 1
	for _, tc := range []struct {
		sc        sim.Scenario
		has, lack []string
	}{
		{preset("fragile"), []string{"fixed 5s open window", "trips over the last 1s (at least 80 calls)"},
			[]string{"doubling", "slow call", "health check"}},
		{preset("fragile-defaults"), []string{"; open window 1s doubling to 30s (eager: fixed 1s)"},
			[]string{"fixed 1s open window", "slow call", "health check", "trips over"}},
		{preset("slow"), []string{"; slow call > 50ms", "open window 1s doubling to 30s", "retry backlog"}, nil},
		{hc, []string{"; health check every 1s while open", "open window 30s doubling to 10m"}, nil},
		{one, []string{"(at least 1 call)"}, []string{"1 calls"}},
	} {
		d := tc.sc.Describe()
		if strings.Contains(d, "\n") {
			t.Errorf("%s: more than one line: %q", tc.sc.Name, d)
		}
		for _, s := range tc.has {
			if !strings.Contains(d, s) {
				t.Errorf("%s: %q lacks %q", tc.sc.Name, d, s)
			}
		}
		for _, s := range tc.lack {
			if strings.Contains(d, s) {
				t.Errorf("%s: %q has %q", tc.sc.Name, d, s)
			}
		}
	}
}

// TestTableNoTrailingSpace: no line of the table ends in whitespace, with
// and without the backlog columns.
func TestTableNoTrailingSpace(t *testing.T) {
	for _, p := range []string{"fragile", "slow"} {
		sc, m := runPreset(t, p)
		var b bytes.Buffer
		if err := sim.WriteTable(&b, sc, []sim.Result{m[sim.Eager], m[sim.Adaptive]}); err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(b.String(), "\n") {
			if strings.TrimRight(line, " \t") != line {
				t.Errorf("%s: line %d ends in whitespace: %q", p, i+1, line)
			}
		}
	}
}

func TestParseStrategies(t *testing.T) {
	all, err := sim.ParseStrategies("all")
	if err != nil || strings.Join(all, ",") != "eager,single-probe,capped-probes,ramp,adaptive" {
		t.Errorf("all: %v %v", all, err)
	}
	if all, err := sim.ParseStrategies("ALL"); err != nil || len(all) != 5 {
		t.Errorf("ALL: %v %v", all, err)
	}
	got, err := sim.ParseStrategies(" ramp, Eager,RAMP ")
	if err != nil || strings.Join(got, ",") != "ramp,eager" {
		t.Errorf("list: %v %v", got, err)
	}
	for _, bad := range []string{"", "ramp,fast", ","} {
		if _, err := sim.ParseStrategies(bad); !errors.Is(err, sim.ErrUnknownStrategy) {
			t.Errorf("%q: %v", bad, err)
		}
	}
	if _, err := sim.StrategyConfig("fast", sim.Scenario{}); !errors.Is(err, sim.ErrUnknownStrategy) {
		t.Errorf("StrategyConfig: %v", err)
	}
	if _, err := sim.Preset("medium"); !errors.Is(err, sim.ErrUnknownPreset) {
		t.Errorf("Preset: %v", err)
	}
}

// TestStrategyConfigs checks that each strategy is the breaker setting its
// name promises, and valid.
func TestStrategyConfigs(t *testing.T) {
	sc, _ := sim.Preset("fragile")
	for _, name := range sim.StrategyNames() {
		cfg, err := sim.StrategyConfig(name, sc)
		if err != nil {
			t.Fatal(err)
		}
		if err := cfg.Validate(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if cfg.BaseOpenWindow != sc.OpenWindow || cfg.SlowCallDuration != sc.SlowCallDuration {
			t.Errorf("%s: window %v slow %v", name, cfg.BaseOpenWindow, cfg.SlowCallDuration)
		}
	}
	eager, _ := sim.StrategyConfig(sim.Eager, sc)
	if !eager.FixedOpenWindow || eager.SuccessesToClose != 1 || eager.ProbeConcurrency < 1000 {
		t.Errorf("eager: %+v", eager)
	}
	capped, _ := sim.StrategyConfig(sim.CappedProbes, sc)
	if capped.ProbeConcurrency != 2 || capped.SuccessesToClose != 5 || !capped.FixedOpenWindow || !capped.DisableJitter ||
		capped.WindowDuration != time.Second || capped.MinimumCalls != 80 {
		t.Errorf("capped-probes on fragile (the note's breaker): %+v", capped)
	}
	def, _ := sim.Preset("fragile-defaults")
	capped, _ = sim.StrategyConfig(sim.CappedProbes, def)
	if capped.FixedOpenWindow || capped.DisableJitter || capped.WindowDuration != 0 || capped.MinimumCalls != 0 || capped.WindowSize != 0 {
		t.Errorf("capped-probes on fragile-defaults (the breaker's defaults): %+v", capped)
	}
	def.TripMinCalls = 50
	capped, _ = sim.StrategyConfig(sim.CappedProbes, def)
	if capped.WindowSize != 50 || capped.MinimumCalls != 50 {
		t.Errorf("TripMinCalls 50 with the count-based window: window %d, minimum %d; want 50, 50", capped.WindowSize, capped.MinimumCalls)
	}
}

// TestSimulateCustomConfig runs a configuration that is not built in.
func TestSimulateCustomConfig(t *testing.T) {
	sc, _ := sim.Preset("fragile")
	cfg, _ := sim.StrategyConfig(sim.Ramp, sc)
	cfg.RampWindow = 6 * time.Second // Envoy's slow-start curve instead of steps
	r, err := sim.Simulate(sc, "ramp-curve", cfg)
	if err != nil {
		t.Fatal(err)
	}
	if r.Strategy != "ramp-curve" || r.ProbeBursts == 0 || r.TimeToClose == sim.Never {
		t.Errorf("%+v", r)
	}
	cfg.ProbeConcurrency = -1
	if _, err := sim.Simulate(sc, "bad", cfg); !errors.Is(err, breaker.ErrInvalidConfig) {
		t.Errorf("invalid breaker config: %v", err)
	}
}

func TestOutputs(t *testing.T) {
	sc, m := runPreset(t, "fragile")
	var res []sim.Result
	for _, s := range sim.StrategyNames() {
		res = append(res, m[s])
	}
	var tab, md, js bytes.Buffer
	if err := sim.WriteTable(&tab, sc, res); err != nil {
		t.Fatal(err)
	}
	if err := sim.WriteMarkdown(&md, sc, res); err != nil {
		t.Fatal(err)
	}
	if err := sim.WriteJSON(&js, sc, res, false); err != nil {
		t.Fatal(err)
	}
	for _, s := range sim.StrategyNames() {
		if !strings.Contains(tab.String(), "\n"+s+" ") || !strings.Contains(md.String(), "| "+s+" |") {
			t.Errorf("%s missing from table or markdown", s)
		}
	}
	if strings.Contains(js.String(), `"series"`) {
		t.Error("JSON without series has a series")
	}
	for _, key := range []string{`"scenario":`, `"results":`, `"strategy":"adaptive"`, `"errors_after_recovery":`,
		`"retrips_after_recovery":`, `"time_to_close_s":`, `"time_to_full_traffic_s":`, `"max_probes_in_flight":`,
		`"probes_during_outage":`, `"diverted":`, `"recover_at_s":20`} {
		if !strings.Contains(js.String(), key) {
			t.Errorf("JSON lacks %s", key)
		}
	}
}

func TestFormatDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0: "0s", time.Minute: "1m", 4*time.Hour + time.Minute: "4h1m", 4 * time.Hour: "4h",
		90 * time.Second: "1m30s", 1500 * time.Millisecond: "1.5s", 20 * time.Millisecond: "20ms",
	} {
		if got := sim.FormatDuration(d); got != want {
			t.Errorf("%v: %q, want %q", d, got, want)
		}
	}
}

// TestBacklog checks the retry backlog: with a consumer of unlimited
// capacity, eager releases the whole backlog at the instant it closes and
// stays closed, while capped-probes drains it one call every 1/DrainRate
// from its close on; every diverted call is delivered in the end.
func TestBacklog(t *testing.T) {
	sc, _ := sim.Preset("slow")
	sc.Capacity = 0 // unlimited: the burst does no harm
	m := runAll(t, sc)
	e, c := m[sim.Eager], m[sim.CappedProbes]
	if e.RetripsAfterRecovery != 0 || e.TimeToDrain != e.TimeToClose || e.Redelivered != e.Diverted || e.BacklogLeft != 0 {
		t.Errorf("eager: want the backlog released at its close: %s, drained %v, %d of %d redelivered",
			summary(e), e.TimeToDrain, e.Redelivered, e.Diverted)
	}
	gap := time.Duration(float64(time.Second) / sc.DrainRate)
	if want := c.TimeToClose + time.Duration(c.Redelivered-1)*gap; c.TimeToDrain != want || c.Redelivered != c.Diverted {
		t.Errorf("capped-probes: drained %v after recovery, want %v (close %v + %d calls at %v/s); %d of %d redelivered",
			c.TimeToDrain, want, c.TimeToClose, c.Redelivered, sc.DrainRate, c.Redelivered, c.Diverted)
	}
	if c.BacklogPeak != c.Diverted || c.Redelivered < 100 {
		t.Errorf("capped-probes: backlog peak %d, diverted %d, redelivered %d", c.BacklogPeak, c.Diverted, c.Redelivered)
	}
}
