package configtest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

var (
	errInvalid = errors.New("fake: invalid config")
	errOther   = errors.New("fake: other")
)

// fake is a config whose Validate has the bugs its fields name, to show
// what check catches.
type fake struct {
	// Limit is optional. Default 5. Valid range 1..10.
	Limit int
	// Tags are optional; an empty tag means "default".
	Tags []string
	// OnDone is optional.
	OnDone func()

	WriteThrough bool // Validate writes the default tag into the caller's Tags
	WrongErr     bool // Validate wraps errOther, not errInvalid
	Unnamed      bool // Validate's error does not name the field
}

func (c fake) Validate() error {
	for i, tag := range c.Tags {
		if tag == "" && c.WriteThrough {
			c.Tags[i] = "default"
		}
	}
	if c.Limit == 0 {
		c.Limit = 5
	}
	if c.Limit < 1 || c.Limit > 10 {
		switch {
		case c.WrongErr:
			return fmt.Errorf("%w: Limit must be in 1..10, got %d", errOther, c.Limit)
		case c.Unnamed:
			return fmt.Errorf("%w: out of range", errInvalid)
		}
		return fmt.Errorf("%w: Limit must be in 1..10, got %d", errInvalid, c.Limit)
	}
	return nil
}

// newFake is the constructor fake's Validate is written for.
func newFake(c fake) error {
	if err := c.Validate(); err != nil {
		return fmt.Errorf("invalid config: %w", err)
	}
	return nil
}

// snapshot copies Tags and stands in for OnDone with whether it is set.
func snapshot(c fake) any {
	set := c.OnDone != nil
	c.Tags, c.OnDone = slices.Clone(c.Tags), nil
	return struct {
		Cfg    fake
		OnDone bool
	}{c, set}
}

func TestCheck(t *testing.T) {
	const want = "Limit must be in 1..10, got 11"
	tooHigh := fake{Limit: 11}
	for _, tc := range []struct {
		name     string
		c        Case[fake]
		sentinel error
		opts     Options[fake]
		problems []string // substrings of the problems, in order; none for a pass
	}{
		// What a correct Validate passes.
		{"valid", Case[fake]{Cfg: fake{}}, errInvalid, Options[fake]{}, nil},
		{"invalid", Case[fake]{Cfg: tooHigh, Want: want}, errInvalid, Options[fake]{}, nil},
		{"invalid, the case's sentinel", Case[fake]{Cfg: tooHigh, Want: want, Err: errInvalid}, nil, Options[fake]{}, nil},
		{"valid with tags, snapshot", Case[fake]{Cfg: fake{Tags: []string{"a", ""}, OnDone: func() {}}}, errInvalid, Options[fake]{Snapshot: snapshot}, nil},
		{"constructor", Case[fake]{Cfg: tooHigh, Want: want}, errInvalid, Options[fake]{New: newFake}, nil},
		{"constructor, valid", Case[fake]{Cfg: fake{}}, errInvalid, Options[fake]{New: newFake, NewValid: true}, nil},
		{"prefix", Case[fake]{Cfg: tooHigh, Want: "fake: invalid config: Limit"}, errInvalid, Options[fake]{Match: HasPrefix}, nil},
		// New is not called with a valid config unless NewValid is set.
		{"valid, constructor not called", Case[fake]{Cfg: fake{}}, errInvalid,
			Options[fake]{New: func(fake) error { return errOther }}, nil},

		// What it catches.
		{"valid rejected", Case[fake]{Cfg: tooHigh}, errInvalid, Options[fake]{}, []string{"Validate = fake: invalid config: Limit must be in 1..10, got 11, want nil"}},
		{"invalid accepted", Case[fake]{Cfg: fake{Limit: 3}, Want: "Limit"}, errInvalid, Options[fake]{}, []string{`Validate = <nil>, want fake: invalid config naming "Limit"`}},
		{"wrong sentinel", Case[fake]{Cfg: fake{Limit: 11, WrongErr: true}, Want: want}, errInvalid, Options[fake]{}, []string{"Validate = fake: other"}},
		{"wrong case sentinel", Case[fake]{Cfg: tooHigh, Want: want, Err: errOther}, errInvalid, Options[fake]{}, []string{"want fake: other naming"}},
		{"field not named", Case[fake]{Cfg: fake{Limit: 11, Unnamed: true}, Want: want}, errInvalid, Options[fake]{}, []string{"Validate = fake: invalid config: out of range"}},
		{"range not named", Case[fake]{Cfg: tooHigh, Want: "Limit must be in 1..9"}, errInvalid, Options[fake]{}, []string{`naming "Limit must be in 1..9"`}},
		{"not a prefix", Case[fake]{Cfg: tooHigh, Want: "Limit"}, errInvalid, Options[fake]{Match: HasPrefix}, []string{`naming "Limit"`}},
		// DeepEqual finds a set func unequal even to itself: such a
		// config needs a Snapshot.
		{"set func, default snapshot", Case[fake]{Cfg: fake{OnDone: func() {}}}, errInvalid, Options[fake]{}, []string{"Validate modified the config"}},
		{"writes through Tags", Case[fake]{Cfg: fake{Tags: []string{""}, WriteThrough: true}}, errInvalid, Options[fake]{Snapshot: snapshot},
			[]string{"Validate modified the config: now {Cfg:{Limit:0 Tags:[default]"}},
		{"constructor accepts", Case[fake]{Cfg: tooHigh, Want: want}, errInvalid,
			Options[fake]{New: func(fake) error { return nil }}, []string{"New = <nil>, want"}},
		{"constructor fails otherwise", Case[fake]{Cfg: tooHigh, Want: want}, errInvalid,
			Options[fake]{New: func(fake) error { return errOther }}, []string{"New = fake: other, want"}},
		{"constructor rejects valid", Case[fake]{Cfg: fake{}}, errInvalid,
			Options[fake]{New: func(fake) error { return errOther }, NewValid: true}, []string{"New = fake: other, want nil"}},
		{"two problems", Case[fake]{Cfg: fake{Limit: 11, Tags: []string{""}, WriteThrough: true, WrongErr: true}, Want: want}, errInvalid,
			Options[fake]{Snapshot: snapshot, New: newFake}, []string{"Validate modified", "Validate = fake: other", "New = invalid config: fake: other"}},

		// Mistakes in the table.
		{"no sentinel", Case[fake]{Cfg: tooHigh, Want: want}, nil, Options[fake]{}, []string{"no sentinel"}},
		{"valid case with Err", Case[fake]{Cfg: fake{}, Err: errInvalid}, errInvalid, Options[fake]{}, []string{"valid case (no Want) with Err"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := check(tc.c, tc.sentinel, tc.opts)
			if len(got) != len(tc.problems) {
				t.Fatalf("problems %q, want %d like %q", got, len(tc.problems), tc.problems)
			}
			for i, p := range got {
				if !strings.Contains(p, tc.problems[i]) {
					t.Errorf("problem %d = %q, want one holding %q", i, p, tc.problems[i])
				}
			}
		})
	}
}

// The default snapshot, the config itself, shares the Tags slice with the
// config: it cannot see a write through it. That is what Snapshot is for.
func TestCheckDefaultSnapshotSharesSlices(t *testing.T) {
	c := Case[fake]{Cfg: fake{Tags: []string{""}, WriteThrough: true}}
	if got := check(c, errInvalid, Options[fake]{}); len(got) != 0 {
		t.Errorf("problems %q, want none (the default snapshot shares Tags)", got)
	}
	if c.Cfg.Tags[0] != "default" {
		t.Fatalf("Tags = %q: the fake no longer writes through", c.Cfg.Tags)
	}
}

// Run runs a subtest per case; a table that passes check passes Run.
func TestRun(t *testing.T) {
	var names []string
	Run(t, errInvalid, []Case[fake]{
		{Name: "minimal", Cfg: fake{}},
		{Name: "Limit", Cfg: fake{Limit: 11}, Want: "Limit must be in 1..10, got 11"},
	}, &Options[fake]{New: func(c fake) error {
		names = append(names, fmt.Sprint(c.Limit))
		return newFake(c)
	}})
	if !slices.Equal(names, []string{"11"}) {
		t.Errorf("New called with limits %q, want only the invalid 11", names)
	}
	Run(t, errInvalid, []Case[fake]{{Name: "nil options", Cfg: fake{}}}, nil)
}

func TestWith(t *testing.T) {
	base := fake{Limit: 3}
	got := With(base, func(c *fake) { c.Limit = 11 })
	if got.Limit != 11 || base.Limit != 3 {
		t.Errorf("With = %+v, base now %+v; want Limit 11, base unchanged", got, base)
	}
}
