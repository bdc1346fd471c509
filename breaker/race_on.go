//go:build race

package breaker

// raceEnabled is true under the race detector, which allocates on paths
// that otherwise do not (the allocation tests skip then).
const raceEnabled = true
