package breaker_test

import (
	"testing"

	"github.com/floodgate-go/floodgate/breaker"
)

// TestDuplicateReportsManyInFlight: with 10,000 permits in flight, reporting
// each twice counts each once, before the window holds MinimumCalls (the
// locked path) and after (the lock-free path). Issue 12: beyond about 4,096
// in flight permits got no slot and a repeated report counted again.
func TestDuplicateReportsManyInFlight(t *testing.T) {
	const n = 10_000
	for _, warm := range []bool{false, true} {
		b, clk := newTest(t, func(c *breaker.Config) {
			c.WindowSize = 4 * n
			c.MinimumCalls = 4 * n
			if warm {
				c.MinimumCalls = 1
			}
		})
		ps := make([]breaker.Permit, n)
		for i := range ps {
			p, err := b.AllowAt(clk.Now())
			if err != nil {
				t.Fatal(err)
			}
			ps[i] = p
		}
		for round := range 2 {
			for _, p := range ps {
				p.DoneAt(clk.Now(), nil)
			}
			if s := b.SnapshotAt(clk.Now()); s.Calls != n || s.State != breaker.StateClosed {
				t.Fatalf("warm=%v, after round %d: calls %d, want %d (%+v)", warm, round+1, s.Calls, n, s)
			}
		}
	}
}

// TestStaleAfterManyResets: a result from before 65,536 resets is stale
// (issue 12: generations were compared on 16 bits, so it counted as
// current), whether the window is warm (lock-free path) or not.
func TestStaleAfterManyResets(t *testing.T) {
	for _, warm := range []bool{false, true} {
		b, clk := newTest(t, func(c *breaker.Config) { c.MinimumCalls = 2 })
		old, err := b.AllowAt(clk.Now())
		if err != nil {
			t.Fatal(err)
		}
		for range 1 << 16 {
			b.Reset()
		}
		if g := b.SnapshotAt(clk.Now()).Generation; g != 1<<16 {
			t.Fatalf("generation %d", g)
		}
		calls := 0
		if warm {
			call(t, b, clk, nil, 0)
			call(t, b, clk, nil, 0)
			calls = 2
		}
		old.DoneAt(clk.Now(), nil)
		s := b.SnapshotAt(clk.Now())
		if s.Stale != 1 || s.Calls != calls {
			t.Fatalf("warm=%v: stale %d calls %d, want 1 and %d", warm, s.Stale, s.Calls, calls)
		}
	}
}
