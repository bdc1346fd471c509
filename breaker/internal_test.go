package breaker

import (
	"testing"
	"time"
)

type fixedClock struct{ t time.Time }

func (c *fixedClock) Now() time.Time { return c.t }

// TestSlotCountWrap: slot counts overflow their 47 bits without disturbing
// the breaker's count of outcomes.
func TestSlotCountWrap(t *testing.T) {
	clk := &fixedClock{t: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}
	b, err := New(Config{Clock: clk, WindowSize: 4, MinimumCalls: 1})
	if err != nil {
		t.Fatal(err)
	}
	// every stripe's first slot (the one serial calls reuse) is 5 short of
	// overflowing, and one unused slot brings the sum 3 short of 2^47
	const near = slotCountMod - 4
	for i := range b.slots.local {
		b.slots.local[i].w[0].Store(near << 1)
	}
	rest := (slotCountMod - 2 - uint64(len(b.slots.local))*near) & slotCountMod
	b.slots.local[0].w[slotsPerStripe-1].Store(rest << 1)
	b.mu.Lock()
	base := b.outcomesLocked()
	b.mu.Unlock()
	for range 10 {
		p, err := b.AllowAt(clk.t)
		if err != nil {
			t.Fatal(err)
		}
		p.DoneAt(clk.t, nil)
	}
	b.mu.Lock()
	got := b.outcomesLocked() - base
	b.mu.Unlock()
	if got != 10 {
		t.Fatalf("counted %d outcomes across the wrap, want 10", got)
	}
	if s := b.SnapshotAt(clk.t); s.State != StateClosed {
		t.Fatalf("%+v", s)
	}
}

// TestSlotTableGrows: more permits in flight than the first chunk holds get
// slots from new chunks, and each counts exactly once.
func TestSlotTableGrows(t *testing.T) {
	clk := &fixedClock{t: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}
	b, err := New(Config{Clock: clk, WindowSize: 1 << 20, MinimumCalls: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	n := len(b.slots.local)*slotsPerStripe*3 + 5
	ps := make([]Permit, n)
	for i := range ps {
		ps[i], _ = b.AllowAt(clk.t)
		if ps[i].slot == nil {
			t.Fatalf("permit %d has no slot", i)
		}
	}
	for _, p := range ps {
		p.DoneAt(clk.t, nil)
		p.DoneAt(clk.t, nil)
	}
	if s := b.SnapshotAt(clk.t); s.Calls != n {
		t.Fatalf("calls %d, want %d", s.Calls, n)
	}
}

func TestLedger(t *testing.T) {
	l := newLedger()
	var ids []uint64
	for i := range 20 { // grows past its initial 8 entries
		ids = append(ids, l.add(int64(i), 0))
	}
	if l.open != 20 {
		t.Fatalf("open %d", l.open)
	}
	if _, ok, live := l.finish(ids[3]); !ok || !live {
		t.Fatal("finish")
	}
	if _, ok, _ := l.finish(ids[3]); ok {
		t.Fatal("finished twice")
	}
	e, ok := l.expireOne(1)
	if !ok || e.id != ids[0] {
		t.Fatalf("expire %+v %v", e, ok)
	}
	l.retire()
	if l.open != 0 || l.oldestLive() != nil {
		t.Fatal("retire")
	}
	if _, ok, live := l.finish(ids[5]); !ok || live {
		t.Fatal("retired entry must be found once, not live")
	}
	id := l.add(100, 0)
	if _, ok, live := l.finish(id); !ok || !live {
		t.Fatal("new entry")
	}
}

// TestClosedPathAllocs: admitting and reporting in the closed state does
// not allocate, whichever way the outcome is reported.
func TestClosedPathAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	clk := &fixedClock{t: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}
	b, err := New(Config{Clock: clk, SlowCallRateThreshold: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	later := clk.t.Add(time.Millisecond)
	cases := map[string]func(){
		"AllowAt+DoneAt": func() { p, _ := b.AllowAt(clk.t); p.DoneAt(later, nil) },
		"Allow+Done":     func() { p, _ := b.Allow(); p.Done(nil) },
		"Allow+Record":   func() { p, _ := b.Allow(); p.Record(OutcomeSuccess, time.Millisecond) },
		"repeated":       func() { p, _ := b.Allow(); p.Done(nil); p.Done(nil) },
	}
	for name, f := range cases {
		if n := testing.AllocsPerRun(1000, f); n != 0 {
			t.Errorf("%s: %v allocs per call", name, n)
		}
	}
	if s := b.SnapshotAt(clk.t); s.State != StateClosed || s.Calls != b.cfg.WindowSize {
		t.Fatalf("%+v", s)
	}
}
