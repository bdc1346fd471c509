package exampleutil

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// FlagCheck collects range errors of command-line flags, each naming its
// flag ("-rate must be in (0, 5000] messages/s, got -5"). The zero value is
// ready to use; it is not safe for concurrent use.
type FlagCheck struct {
	errs []error
}

// interval formats a range: open or closed at the low end, closed at the
// high end.
func interval(lo, hi any, loOpen bool) string {
	if loOpen {
		return fmt.Sprintf("(%v, %v]", lo, hi)
	}
	return fmt.Sprintf("[%v, %v]", lo, hi)
}

// Duration checks that flag -name's v is in [lo, hi], or (lo, hi] when
// loOpen.
func (f *FlagCheck) Duration(name string, v, lo, hi time.Duration, loOpen bool) {
	if v < lo || v > hi || (loOpen && v == lo) {
		f.errs = append(f.errs, fmt.Errorf("-%s must be in %s, got %v", name, interval(lo, hi, loOpen), v))
	}
}

// Float checks that flag -name's v is a number in [lo, hi], or (lo, hi]
// when loOpen; unit, if not empty, follows the range in the message.
func (f *FlagCheck) Float(name string, v, lo, hi float64, loOpen bool, unit string) {
	if math.IsNaN(v) || v < lo || v > hi || (loOpen && v == lo) {
		if unit != "" {
			unit = " " + unit
		}
		f.errs = append(f.errs, fmt.Errorf("-%s must be in %s%s, got %v", name, interval(lo, hi, loOpen), unit, v))
	}
}

// Int checks that flag -name's v is in [lo, hi].
func (f *FlagCheck) Int(name string, v, lo, hi int) {
	if v < lo || v > hi {
		f.errs = append(f.errs, fmt.Errorf("-%s must be in %s, got %d", name, interval(lo, hi, false), v))
	}
}

// Failf records a check of the caller's own, e.g. between two flags.
func (f *FlagCheck) Failf(format string, args ...any) {
	f.errs = append(f.errs, fmt.Errorf(format, args...))
}

// Err returns the errors collected, joined, or nil.
func (f *FlagCheck) Err() error { return errors.Join(f.errs...) }
