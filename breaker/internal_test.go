package breaker

import (
	"strings"
	"testing"
	"time"
)

type fixedClock struct{ t time.Time }

func (c *fixedClock) Now() time.Time { return c.t }

// TestSlotCountWrap: the sum of the slot counts wraps around 2^64 without
// disturbing the breaker's count of outcomes.
func TestSlotCountWrap(t *testing.T) {
	clk := &fixedClock{t: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}
	b, err := New(Config{Clock: clk, WindowSize: 4, MinimumCalls: 1})
	if err != nil {
		t.Fatal(err)
	}
	p, _ := b.AllowAt(clk.t) // installs the table; serial calls reuse this slot
	p.DoneAt(clk.t, nil)
	// four idle slots bring the sum 3 short of wrapping
	st := &b.slots.idx.Load().home[0]
	for i := 1; i <= 4; i++ {
		st.s[i].w.Store((1<<62 - 1) << 1)
	}
	b.mu.Lock()
	base := b.outcomesLocked()
	b.mu.Unlock()
	if base < 1<<63 {
		t.Fatalf("sum %d not near the wrap", base)
	}
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
	if s := b.SnapshotAt(clk.t); s.State != StateClosed || s.Calls != 4 {
		t.Fatalf("%+v", s)
	}
}

// slotCount returns the number of slots in b's table.
func slotCount(b *Breaker) int {
	ix := b.slots.idx.Load()
	if ix == nil {
		return 0
	}
	return (len(ix.home) + len(ix.spill)) * slotsPerStripe
}

// TestSlotTableGrows: 10,000 permits in flight each get a slot, and the
// table stays within about twice what they need.
func TestSlotTableGrows(t *testing.T) {
	clk := &fixedClock{t: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}
	b, err := New(Config{Clock: clk, WindowSize: 1 << 20, MinimumCalls: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	const n = 10_000
	ps := make([]Permit, n)
	for i := range ps {
		ps[i], _ = b.AllowAt(clk.t)
		if ps[i].slot == nil {
			t.Fatalf("permit %d has no slot", i)
		}
	}
	if got := slotCount(b); got < n || got > 2*n+64 {
		t.Fatalf("%d slots for %d in flight", got, n)
	}
	for _, p := range ps {
		p.DoneAt(clk.t, nil)
	}
	if s := b.SnapshotAt(clk.t); s.Calls != n {
		t.Fatalf("calls %d, want %d", s.Calls, n)
	}
}

// TestIdleTableIsSmall: a breaker used by one goroutine at a time keeps a
// table of one stripe.
func TestIdleTableIsSmall(t *testing.T) {
	clk := &fixedClock{t: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}
	b, err := New(Config{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	if got := slotCount(b); got != 0 {
		t.Fatalf("new breaker has %d slots", got)
	}
	for range 1000 {
		p, _ := b.AllowAt(clk.t)
		p.DoneAt(clk.t, nil)
	}
	if got := slotCount(b); got != slotsPerStripe {
		t.Fatalf("serial use grew the table to %d slots", got)
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
// not allocate, whichever way the outcome is reported, with 1 or 10,000
// permits in flight (the table grew once, beforehand).
func TestClosedPathAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	for _, inFlight := range []int{0, 10_000} {
		clk := &fixedClock{t: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}
		b, err := New(Config{Clock: clk, SlowCallRateThreshold: 0.5})
		if err != nil {
			t.Fatal(err)
		}
		held := make([]Permit, inFlight)
		for i := range held {
			held[i], _ = b.AllowAt(clk.t)
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
				t.Errorf("%d in flight, %s: %v allocs per call", inFlight, name, n)
			}
		}
		if s := b.SnapshotAt(clk.t); s.State != StateClosed || s.Calls != b.cfg.WindowSize {
			t.Fatalf("%d in flight: %+v", inFlight, s)
		}
		for _, p := range held {
			p.DoneAt(later, nil)
		}
	}
}

// TestTemplateShared: breakers made from one Template share its
// configuration (one pointer each) and keep their own names; Config
// returns each breaker's name, and changing the copy it returns changes no
// breaker.
func TestTemplateShared(t *testing.T) {
	tmpl, err := NewTemplate(Config{Name: "template", WindowSize: 7, RampSteps: []float64{0.5, 1}})
	if err != nil {
		t.Fatal(err)
	}
	a, b := tmpl.New("a"), tmpl.New("b")
	if a.cfg != b.cfg || a.cfg != &tmpl.cfg {
		t.Fatal("breakers of one template hold copies of its configuration")
	}
	ca := a.Config()
	if ca.Name != "a" || b.Name() != "b" || ca.WindowSize != 7 || tmpl.Config().Name != "template" {
		t.Fatalf("names %q %q %q, WindowSize %d", ca.Name, b.Name(), tmpl.Config().Name, ca.WindowSize)
	}
	ca.RampSteps[0] = 0.9
	if b.Config().RampSteps[0] != 0.5 {
		t.Fatal("Config's RampSteps aliases the template's")
	}
	if _, err := NewTemplate(Config{WindowSize: -1}); err == nil {
		t.Fatal("NewTemplate accepted WindowSize -1")
	}
	// A rejection error names the breaker, not the template.
	a.ForceOpen()
	if _, err := a.Allow(); err == nil || !strings.Contains(err.Error(), `"a"`) && !strings.Contains(err.Error(), " a") {
		t.Fatalf("rejection of breaker a: %v", err)
	}
}
