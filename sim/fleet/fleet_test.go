package fleet_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/floodgate-go/floodgate/sim"
	"github.com/floodgate-go/floodgate/sim/fleet"
)

// TestSharedVersusIndependent runs the fragile-defaults preset with the
// capped-probes strategy: one replica alone, then 3 and 10 replicas with
// independent and with shared breakers (windows scaled to each replica's
// share). The shared fleet keeps the probe bound and the probe count of one
// replica, whatever its size, and reaches full traffic no later than
// independent breakers.
func TestSharedVersusIndependent(t *testing.T) {
	sc, err := sim.Preset("fragile-defaults")
	if err != nil {
		t.Fatal(err)
	}
	rs, err := fleet.Compare(sc, sim.CappedProbes, []int{3, 10})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := fleet.WriteTable(&buf, rs); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + buf.String())
	one := rs[0]
	for i := 1; i < len(rs); i += 2 {
		ind, sh := rs[i], rs[i+1]
		if sh.MaxProbesInFlight > 2 {
			t.Errorf("%d shared: %d probes in flight, want <= ProbeConcurrency 2", sh.Replicas, sh.MaxProbesInFlight)
		}
		if sh.OutageProbes >= ind.OutageProbes || sh.OutageProbes > 2*one.OutageProbes {
			t.Errorf("%d shared: %d probes during the outage; independent %d, one replica %d",
				sh.Replicas, sh.OutageProbes, ind.OutageProbes, one.OutageProbes)
		}
		if sh.TimeToFullTraffic < 0 || ind.TimeToFullTraffic < 0 || sh.TimeToFullTraffic > ind.TimeToFullTraffic {
			t.Errorf("%d: time to full traffic shared %v, independent %v; want shared <= independent",
				sh.Replicas, sh.TimeToFullTraffic, ind.TimeToFullTraffic)
		}
	}
	// Deterministic: the same seed gives the same result.
	again, err := fleet.Simulate(sc, sim.CappedProbes, fleet.Options{Replicas: 3, Shared: true, ScaleWindow: true})
	if err != nil {
		t.Fatal(err)
	}
	if again != rs[2] {
		t.Errorf("rerun differs: %+v vs %+v", again, rs[2])
	}
}

func TestSimulateValidates(t *testing.T) {
	sc, _ := sim.Preset("fragile-defaults")
	if _, err := fleet.Simulate(sc, sim.CappedProbes, fleet.Options{}); !errors.Is(err, fleet.ErrInvalidReplicas) {
		t.Fatalf("0 replicas: %v", err)
	}
	sc.Rate = 0
	if _, err := fleet.Simulate(sc, sim.CappedProbes, fleet.Options{Replicas: 1}); !errors.Is(err, sim.ErrInvalidScenario) {
		t.Fatalf("rate 0: %v", err)
	}
}

// TestUnsupportedScenario: a scenario feature the fleet does not model is
// an error naming the field, not silently ignored.
func TestUnsupportedScenario(t *testing.T) {
	for field, mod := range map[string]func(*sim.Scenario){
		"Capacity":    func(s *sim.Scenario) { s.Capacity = 200 },
		"Overflow":    func(s *sim.Scenario) { s.Overflow = sim.OverflowSlow },
		"SlowOutage":  func(s *sim.Scenario) { s.SlowOutage = true },
		"Backlog":     func(s *sim.Scenario) { s.Backlog = true },
		"HealthCheck": func(s *sim.Scenario) { s.HealthCheck = true },
	} {
		sc, _ := sim.Preset("fragile-defaults")
		mod(&sc)
		_, err := fleet.Simulate(sc, sim.CappedProbes, fleet.Options{Replicas: 2})
		if !errors.Is(err, fleet.ErrUnsupportedScenario) || !strings.Contains(err.Error(), field) {
			t.Errorf("%s: Simulate: %v", field, err)
		}
		if _, err := fleet.Compare(sc, sim.Ramp, []int{3}); !errors.Is(err, fleet.ErrUnsupportedScenario) {
			t.Errorf("%s: Compare: %v", field, err)
		}
	}
	for _, p := range []string{"slow", "long-outage"} {
		sc, _ := sim.Preset(p)
		_, err := fleet.Simulate(sc, sim.Eager, fleet.Options{Replicas: 1})
		if want := p == "slow"; errors.Is(err, fleet.ErrUnsupportedScenario) != want {
			t.Errorf("preset %s: %v", p, err)
		}
	}
}

// TestSameArrivals: arrivals have their own random stream, so every fleet
// of one seed (size, shared or not, strategy) is offered the same calls,
// the same as package sim's.
func TestSameArrivals(t *testing.T) {
	for _, arr := range []sim.Arrivals{sim.ArrivalsPoisson, sim.ArrivalsUniform} {
		sc, _ := sim.Preset("fragile-defaults")
		sc.Arrivals, sc.Seed = arr, 3
		res, err := sim.Run(sc, []string{sim.Eager})
		if err != nil {
			t.Fatal(err)
		}
		want := res[0].Offered
		for _, name := range []string{sim.Eager, sim.CappedProbes, sim.Adaptive} {
			for _, o := range []fleet.Options{{Replicas: 1}, {Replicas: 3, ScaleWindow: true}, {Replicas: 10, Shared: true}} {
				r, err := fleet.Simulate(sc, name, o)
				if err != nil {
					t.Fatal(err)
				}
				if r.Calls != want {
					t.Errorf("%v, %s, %+v: %d calls offered, want %d (package sim's)", arr, name, o, r.Calls, want)
				}
			}
		}
	}
}
