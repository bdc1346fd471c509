package fleet_test

import (
	"os"

	"github.com/floodgate-go/floodgate/sim"
	"github.com/floodgate-go/floodgate/sim/fleet"
)

// The fragile-defaults preset (floodgate's default breaker) with capped
// probes: one replica alone, then three replicas with independent and with
// shared breakers.
func Example() {
	sc, _ := sim.Preset("fragile-defaults")
	rs, _ := fleet.Compare(sc, sim.CappedProbes, []int{3})
	_ = fleet.WriteTable(os.Stdout, rs)
	// Output:
	// strategy       replicas  breakers               probes in outage  max probes in flight  errors after recovery  time to full traffic
	// capped-probes  1         independent            6                 2                     2                      22.25s
	// capped-probes  3         independent, window/N  11                2                     29                     25.44s
	// capped-probes  3         shared, window/N       5                 2                     25                     10.15s
}
