// Package faultscript holds what the in-process partner simulators share:
// finding the phase of a fault script in force at a time.
package faultscript

import "time"

// Index returns the index of the phase in force elapsed after the script
// started: phases follow each other for their durations (dur), the last one
// lasts forever. A negative elapsed gives the first phase. script must not
// be empty.
func Index[P any](script []P, dur func(P) time.Duration, elapsed time.Duration) int {
	last := len(script) - 1
	for i, ph := range script {
		if i == last || elapsed < dur(ph) {
			return i
		}
		elapsed -= dur(ph)
	}
	return last
}
