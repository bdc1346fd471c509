//go:build !race

package partner_test

const raceEnabled = false
