//go:build race

package partner_test

// raceEnabled is true under the race detector, whose sync.Pool drops items
// at random, so a lease's guard is sometimes allocated.
const raceEnabled = true
