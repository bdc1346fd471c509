//go:build race

package breaker

// raceEnabled is true under the race detector, where every atomic load is
// instrumented: the slot table then keeps fewer stripes to sum.
const raceEnabled = true
