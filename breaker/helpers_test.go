package breaker_test

import (
	"errors"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/breaker/breakertest"
)

var errBoom = errors.New("boom")

// newTest returns a breaker on a fake clock with exact (unjittered) windows
// and small numbers, after applying mod.
func newTest(t testing.TB, mod func(*breaker.Config)) (*breaker.Breaker, *breakertest.Clock) {
	t.Helper()
	clk := breakertest.NewClock(time.Time{})
	cfg := breaker.Config{
		Name:             "test",
		Clock:            clk,
		Seed:             1,
		WindowSize:       10,
		MinimumCalls:     4,
		DisableJitter:    true,
		ProbeConcurrency: 2,
		SuccessesToClose: 3,
		SlowCallDuration: 100 * time.Millisecond,
		MaxProbeWait:     5 * time.Second,
	}
	if mod != nil {
		mod(&cfg)
	}
	b, err := breaker.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Stop)
	return b, clk
}

// call admits a call lat ago and reports err (nil = success) now.
func call(t testing.TB, b *breaker.Breaker, clk *breakertest.Clock, err error, lat time.Duration) {
	t.Helper()
	p, aerr := b.AllowAt(clk.Now().Add(-lat))
	if aerr != nil {
		t.Fatalf("Allow: %v (state %v)", aerr, b.StateAt(clk.Now()))
	}
	p.DoneAt(clk.Now(), err)
}

func mustState(t testing.TB, b *breaker.Breaker, clk *breakertest.Clock, want breaker.State) {
	t.Helper()
	if got := b.StateAt(clk.Now()); got != want {
		t.Fatalf("state = %v, want %v (snapshot %+v)", got, want, b.SnapshotAt(clk.Now()))
	}
}

// trip drives a closed breaker open with failures.
func trip(t testing.TB, b *breaker.Breaker, clk *breakertest.Clock) {
	t.Helper()
	for i := 0; i < 100 && b.StateAt(clk.Now()) == breaker.StateClosed; i++ {
		call(t, b, clk, errBoom, time.Millisecond)
	}
	mustState(t, b, clk, breaker.StateOpen)
}

// recorder collects transitions.
type recorder struct {
	ts []breaker.Transition
}

func (r *recorder) add(tr breaker.Transition) { r.ts = append(r.ts, tr) }

func (r *recorder) path() []string {
	var s []string
	for _, t := range r.ts {
		s = append(s, t.To.String())
	}
	return s
}
