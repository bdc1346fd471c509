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
	// capped-probes  1         independent            5                 2                     20                     13.83s
	// capped-probes  3         independent, window/N  13                3                     14                     25.53s
	// capped-probes  3         shared, window/N       5                 2                     1                      21.87s
}
