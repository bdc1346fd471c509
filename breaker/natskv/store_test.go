package natskv_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/breaker/natskv"
	"github.com/floodgate-go/floodgate/internal/natstest"
)

func newStore(t *testing.T) (*natskv.Store, string) {
	t.Helper()
	nc := natstest.Conn(t, natstest.URL(t))
	js := natstest.JetStream(t, nc)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	bucket := natstest.Name(t, "kv")
	s, err := natskv.New(ctx, js, natskv.Config{Bucket: bucket})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = js.DeleteKeyValue(ctx, bucket)
	})
	return s, bucket
}

func TestStateCompareAndSwap(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	st, rev, err := s.Load(ctx, "partner")
	if err != nil || rev != 0 || st.State != breaker.StateClosed {
		t.Fatalf("Load of a new name = %v, %d, %v; want closed, 0, nil", st, rev, err)
	}
	type update struct {
		st  breaker.SharedState
		rev uint64
	}
	updates := make(chan update, 10)
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	if err := s.Watch(wctx, "partner", func(st breaker.SharedState, rev uint64, err error) {
		if err == nil {
			updates <- update{st, rev}
		}
	}); err != nil {
		t.Fatal(err)
	}
	until := time.Now().Add(time.Second).Truncate(time.Millisecond)
	open := breaker.SharedState{State: breaker.StateOpen, Epoch: 1, Trips: 1, Window: time.Second, OpenUntil: until, By: "a"}
	rev1, err := s.CompareAndSwap(ctx, "partner", open, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CompareAndSwap(ctx, "partner", open, 0); !errors.Is(err, breaker.ErrStaleRevision) {
		t.Fatalf("second create: %v, want ErrStaleRevision", err)
	}
	half := open
	half.State, half.Epoch, half.OpenUntil = breaker.StateHalfOpen, 2, time.Time{}
	rev2, err := s.CompareAndSwap(ctx, "partner", half, rev1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CompareAndSwap(ctx, "partner", open, rev1); !errors.Is(err, breaker.ErrStaleRevision) {
		t.Fatalf("stale update: %v, want ErrStaleRevision", err)
	}
	got, rev, err := s.Load(ctx, "partner")
	if err != nil || rev != rev2 || got.State != breaker.StateHalfOpen || got.Epoch != 2 || got.By != "a" {
		t.Fatalf("Load = %+v, %d, %v; want half-open epoch 2 at %d", got, rev, err, rev2)
	}
	// A KV watch may start at the latest revision, so it may skip the
	// open one: every update it delivers is a state written at that
	// revision, in increasing revision order, and it reaches the latest.
	written := map[uint64]breaker.SharedState{rev1: open, rev2: half}
	var seen uint64
	for seen != rev2 {
		select {
		case u := <-updates:
			want, ok := written[u.rev]
			if !ok || u.rev <= seen {
				t.Fatalf("watch delivered revision %d after %d; want one of %d, %d, increasing", u.rev, seen, rev1, rev2)
			}
			if u.st.State != want.State || u.st.Epoch != want.Epoch || !u.st.OpenUntil.Equal(want.OpenUntil) {
				t.Fatalf("watch update at revision %d = %+v, want %+v", u.rev, u.st, want)
			}
			seen = u.rev
		case <-time.After(30 * time.Second):
			t.Fatalf("watch never delivered the latest revision %d (last seen %d)", rev2, seen)
		}
	}
	names, err := s.Names(ctx)
	if err != nil || len(names) != 1 || names[0] != "partner" {
		t.Fatalf("Names = %v, %v", names, err)
	}
	if _, _, err := s.Load(ctx, "bad.name.x"); !errors.Is(err, natskv.ErrInvalidName) {
		t.Fatalf("bad name: %v", err)
	}
}

func TestProbeLeases(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	a, err := s.AcquireProbe(ctx, "partner", 2, time.Second, "a")
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.AcquireProbe(ctx, "partner", 2, time.Second, "b")
	if err != nil {
		t.Fatal(err)
	}
	if a.Slot == b.Slot {
		t.Fatalf("two leases on slot %d", a.Slot)
	}
	if _, err := s.AcquireProbe(ctx, "partner", 2, time.Second, "c"); !errors.Is(err, breaker.ErrNoProbeSlot) {
		t.Fatalf("third lease: %v, want ErrNoProbeSlot", err)
	}
	ls, err := s.Leases(ctx, "partner")
	if err != nil || len(ls) != 2 {
		t.Fatalf("Leases = %v, %v; want 2", ls, err)
	}
	if err := s.ReleaseProbe(ctx, a); err != nil {
		t.Fatal(err)
	}
	c, err := s.AcquireProbe(ctx, "partner", 2, 10*time.Second, "c")
	if err != nil || c.Slot != a.Slot {
		t.Fatalf("after release: %+v, %v; want slot %d", c, err, a.Slot)
	}
	// b is never released (its holder "crashed"): the slot frees itself
	// within its TTL (1s), plus the server's expiry tick.
	start := time.Now()
	var d breaker.ProbeLease
	natstest.Eventually(t, 30*time.Second, func() bool {
		d, err = s.AcquireProbe(ctx, "partner", 2, 10*time.Second, "d")
		return err == nil
	}, "slot of an unreleased 1s lease never freed: %v", err)
	if d.Slot != b.Slot {
		t.Fatalf("freed slot %d, want %d", d.Slot, b.Slot)
	}
	t.Logf("expired lease freed after %v", time.Since(start))
	// A release with the expired lease's revision leaves d alone.
	if err := s.ReleaseProbe(ctx, b); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AcquireProbe(ctx, "partner", 2, time.Second, "e"); !errors.Is(err, breaker.ErrNoProbeSlot) {
		t.Fatalf("after a stale release: %v, want ErrNoProbeSlot", err)
	}
}

// TestFleetOnKV joins three breakers in one process through the KV store,
// on the wall clock: a trip reaches the others through the watch.
// JoinFleet rejects a breaker name the bucket cannot hold, instead of
// joining a fleet whose every store call fails.
func TestJoinFleetRejectsInvalidName(t *testing.T) {
	s, _ := newStore(t)
	for _, name := range []string{"", "a.b c", "edi.orders.partner", ".a", "a.", "a..b", "a.*", strings.Repeat("a", natskv.MaxNameLen+1)} {
		b, err := breaker.New(breaker.Config{Name: name})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(b.Stop)
		_, err = breaker.JoinFleet(b, breaker.FleetConfig{Store: s, Replica: "a"})
		if !errors.Is(err, breaker.ErrInvalidConfig) || !errors.Is(err, natskv.ErrInvalidName) || !strings.Contains(err.Error(), "Name") {
			t.Errorf("name %q: err = %v, want invalid config wrapping natskv.ErrInvalidName and naming Config.Name", name, err)
		}
	}
	for _, name := range []string{"partner-acme_1=x", "orders=2Fas2.ACME-RETAIL"} {
		if err := natskv.ValidateName(name); err != nil {
			t.Errorf("valid name %q: %v", name, err)
		}
	}
}

func TestFleetOnKV(t *testing.T) {
	s, _ := newStore(t)
	var bs []*breaker.Breaker
	for i := range 3 {
		b, err := breaker.New(breaker.Config{
			Name: "partner", WindowSize: 4, MinimumCalls: 4, BaseOpenWindow: 300 * time.Millisecond,
			ProbeConcurrency: 1, SuccessesToClose: 2, DisableJitter: true,
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(b.Stop)
		f, err := breaker.JoinFleet(b, breaker.FleetConfig{Store: s, Replica: string(rune('a' + i)), ResyncInterval: 200 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(f.Leave)
		bs = append(bs, b)
	}
	for range 4 {
		p, err := bs[0].Allow()
		if err != nil {
			t.Fatal(err)
		}
		p.Done(errors.New("boom"))
	}
	start := time.Now()
	natstest.Eventually(t, 30*time.Second, func() bool {
		return bs[1].State() != breaker.StateClosed && bs[2].State() != breaker.StateClosed
	}, "trip not propagated")
	t.Logf("trip propagated in %v", time.Since(start))
	// Half-open: one probe in flight fleet-wide.
	natstest.Eventually(t, 30*time.Second, func() bool {
		for _, b := range bs {
			if b.State() != breaker.StateHalfOpen {
				return false
			}
		}
		return true
	}, "not all half-open")
	var held []breaker.Permit
	natstest.Eventually(t, 30*time.Second, func() bool {
		for _, b := range bs {
			if p, err := b.Allow(); err == nil {
				held = append(held, p)
			}
		}
		return len(held) > 0
	}, "no probe admitted")
	for range 20 {
		for _, b := range bs {
			if p, err := b.Allow(); err == nil {
				held = append(held, p)
			}
		}
	}
	if len(held) != 1 {
		t.Fatalf("%d probes admitted across the fleet, want 1", len(held))
	}
	held[0].Done(nil)
	// The second good probe, wherever it runs, closes every replica.
	natstest.Eventually(t, 30*time.Second, func() bool {
		for _, b := range bs {
			if p, err := b.Allow(); err == nil && p.IsProbe() {
				p.Done(nil)
			}
		}
		for _, b := range bs {
			if b.State() != breaker.StateClosed {
				return false
			}
		}
		return true
	}, "fleet did not close")
}
