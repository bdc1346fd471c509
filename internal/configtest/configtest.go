package configtest

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// Case is one config for [Run].
type Case[C any] struct {
	// Name names the subtest.
	Name string
	// Cfg is the config checked.
	Cfg C
	// Want is "" for a valid config. Otherwise Validate must reject Cfg,
	// and Want is what the error's message must hold (by [Options.Match],
	// by default [Contains]): the field and its allowed range.
	Want string
	// Err is the sentinel the error must match with [errors.Is], for a
	// package with one sentinel per rule. Optional. Default the sentinel
	// given to [Run]. Only for a case with a Want.
	Err error
}

// Options adapt [Run] to a package. The zero value (or a nil *Options)
// checks the config with [reflect.DeepEqual], matches the error with
// [Contains] and tries no constructor.
type Options[C any] struct {
	// Snapshot returns what Validate must leave as it is, as a value
	// [reflect.DeepEqual] can compare that shares no memory with the
	// config: a copy of every slice and map Validate could write through
	// (a value receiver copies the struct, not what its slices and maps
	// hold), and, for each func field (DeepEqual finds a set func unequal
	// even to itself), whether it is set. Run takes one before Validate and
	// one after. Optional. Default the config itself, which is right for a
	// config without slices, maps or set func fields.
	Snapshot func(C) any
	// Match reports whether an error's message holds a case's Want; it is
	// called only with a non-nil error. Optional. Default [Contains].
	Match func(err error, want string) bool
	// New is the package's constructor, reduced to its error. When set, it
	// must reject each invalid config the way Validate does (the sentinel,
	// and Want by Match), before it connects or creates anything.
	// Optional. Default: no constructor is tried.
	New func(C) error
	// NewValid has New called with the valid configs too, and it must then
	// return nil. Optional. Default false: New is called only with invalid
	// configs (a valid one may connect or create what the test does not
	// want).
	NewValid bool
}

// Contains, the default [Options.Match], reports whether err's message
// contains want.
func Contains(err error, want string) bool { return strings.Contains(err.Error(), want) }

// HasPrefix, an [Options.Match], reports whether err's message begins with
// want: for a package whose Validate errors begin with the field's name.
func HasPrefix(err error, want string) bool { return strings.HasPrefix(err.Error(), want) }

// With returns a copy of base changed by mod: a case's config written as
// a change to a minimal valid one.
func With[C any](base C, mod func(*C)) C {
	mod(&base)
	return base
}

// Run checks every case in its own subtest, named by [Case.Name]: Validate
// leaves the config as it is (by [Options.Snapshot]), and returns nil for a
// valid case, or for an invalid one an error that matches the sentinel
// (the case's Err if set, else sentinel) with [errors.Is] and holds the
// case's Want; [Options.New], if set, fails the same way. An invalid case
// with no sentinel, or a valid one with an Err, is reported as a mistake
// in the table. opts may be nil.
//
// The constraint takes only a type whose Validate has a value receiver (a
// pointer receiver is not in the method set of C), as every config's in
// this module has: Validate can be called on a value or a literal.
func Run[C interface{ Validate() error }](t *testing.T, sentinel error, cases []Case[C], opts *Options[C]) {
	t.Helper()
	var o Options[C]
	if opts != nil {
		o = *opts
	}
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			for _, p := range check(c, sentinel, o) {
				t.Error(p)
			}
		})
	}
}

// check does what [Run] does for one case and returns the problems found,
// each a sentence for t.Error; none for a case that passes.
func check[C interface{ Validate() error }](c Case[C], sentinel error, o Options[C]) []string {
	snapshot := o.Snapshot
	if snapshot == nil {
		snapshot = func(c C) any { return c }
	}
	match := o.Match
	if match == nil {
		match = Contains
	}
	want := sentinel
	if c.Err != nil {
		want = c.Err
	}
	switch {
	case c.Want == "" && c.Err != nil:
		return []string{fmt.Sprintf("table: a valid case (no Want) with Err %v", c.Err)}
	case c.Want != "" && want == nil:
		return []string{fmt.Sprintf("table: an invalid case (Want %q) with no sentinel: pass one to Run or set Err", c.Want)}
	}

	var problems []string
	before := snapshot(c.Cfg)
	err := c.Cfg.Validate()
	if after := snapshot(c.Cfg); !reflect.DeepEqual(after, before) {
		problems = append(problems, fmt.Sprintf("Validate modified the config: now %+v, was %+v", after, before))
	}
	// fails says what is wrong with an error returned for c, or "".
	fails := func(call string, err error) string {
		switch {
		case c.Want == "" && err != nil:
			return fmt.Sprintf("%s = %v, want nil", call, err)
		case c.Want != "" && (err == nil || !errors.Is(err, want) || !match(err, c.Want)):
			return fmt.Sprintf("%s = %v, want %v naming %q", call, err, want, c.Want)
		}
		return ""
	}
	if p := fails("Validate", err); p != "" {
		problems = append(problems, p)
	}
	if o.New != nil && (c.Want != "" || o.NewValid) {
		if p := fails("New", o.New(c.Cfg)); p != "" {
			problems = append(problems, p)
		}
	}
	return problems
}
