package breaker_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/breaker/breakertest"
)

type testFleet struct {
	clk    *breakertest.Clock
	store  *breaker.MemoryStore
	bs     []*breaker.Breaker
	fleets []*breaker.Fleet
}

// newTestFleet returns n breakers named "partner" on one fake clock, joined
// through one MemoryStore in Inline mode (every store call synchronous).
func newTestFleet(t *testing.T, n int, mod func(*breaker.Config)) *testFleet {
	t.Helper()
	return buildFleet(t, n, mod, func(i int, store *breaker.MemoryStore) breaker.FleetConfig {
		return breaker.FleetConfig{Store: store, Replica: string(rune('a' + i)), Inline: true, FallbackAfter: 500 * time.Millisecond}
	})
}

// buildFleet makes newTestFleet's breakers (SuccessesToClose 3 unless mod
// changes it) and joins breaker i with join(i, store)'s configuration.
func buildFleet(t *testing.T, n int, mod func(*breaker.Config), join func(i int, store *breaker.MemoryStore) breaker.FleetConfig) *testFleet {
	t.Helper()
	tf := &testFleet{clk: breakertest.NewClock(time.Time{})}
	tf.store = breaker.NewMemoryStore(tf.clk)
	for i := range n {
		cfg := breaker.Config{
			Name: "partner", Clock: tf.clk, Seed: uint64(i + 1),
			WindowSize: 10, MinimumCalls: 4, DisableJitter: true,
			ProbeConcurrency: 2, SuccessesToClose: 3,
			SlowCallDuration: 100 * time.Millisecond, MaxProbeWait: 5 * time.Second,
		}
		if mod != nil {
			mod(&cfg)
		}
		b, err := breaker.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(b.Stop)
		f, err := breaker.JoinFleet(b, join(i, tf.store))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(f.Leave)
		tf.bs = append(tf.bs, b)
		tf.fleets = append(tf.fleets, f)
	}
	return tf
}

func (tf *testFleet) trip(t *testing.T, i int) {
	t.Helper()
	for range 10 {
		p, err := tf.bs[i].Allow()
		if err != nil {
			return
		}
		p.Record(breaker.OutcomeFailure, time.Millisecond)
	}
	if st := tf.bs[i].State(); st != breaker.StateOpen {
		t.Fatalf("breaker %d: state %v after 10 failures, want open", i, st)
	}
}

func (tf *testFleet) states() []breaker.State {
	var out []breaker.State
	for _, b := range tf.bs {
		out = append(out, b.State())
	}
	return out
}

func (tf *testFleet) shared(t *testing.T) breaker.SharedState {
	t.Helper()
	st, _, err := tf.store.Load(context.Background(), "partner")
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func wantAll(t *testing.T, tf *testFleet, want breaker.State) {
	t.Helper()
	for i, st := range tf.states() {
		if st != want {
			t.Fatalf("breaker %d: state %v, want %v (all: %v)", i, st, want, tf.states())
		}
	}
}

func TestFleetTripReachesEveryReplica(t *testing.T) {
	tf := newTestFleet(t, 3, nil)
	wantAll(t, tf, breaker.StateClosed)
	tf.trip(t, 0)
	wantAll(t, tf, breaker.StateOpen)
	sh := tf.shared(t)
	if sh.State != breaker.StateOpen || sh.Trips != 1 || sh.Window != time.Second || sh.By != "a" {
		t.Fatalf("shared = %+v, want open, 1 trip, 1s window, by a", sh)
	}
	want := tf.clk.Now().Add(time.Second)
	for i, b := range tf.bs {
		if s := b.Snapshot(); !s.OpenUntil.Equal(want) || s.ConsecutiveTrips != 1 {
			t.Fatalf("breaker %d: open until %v, %d trips; want %v, 1", i, s.OpenUntil, s.ConsecutiveTrips, want)
		}
	}
	// The others' closed path is rejected without touching the store.
	if _, err := tf.bs[2].Allow(); !errors.Is(err, breaker.ErrOpen) {
		t.Fatalf("replica c Allow = %v, want ErrOpen", err)
	}
}

func TestFleetProbeBudgetAndSharedSuccesses(t *testing.T) {
	tf := newTestFleet(t, 3, nil)
	tf.trip(t, 1)
	tf.clk.Advance(time.Second)
	wantAll(t, tf, breaker.StateHalfOpen)
	if sh := tf.shared(t); sh.State != breaker.StateHalfOpen {
		t.Fatalf("shared %v, want half-open", sh)
	}
	// Every replica asks for probes; the fleet admits ProbeConcurrency (2).
	var probes []breaker.Permit
	for round := range 3 {
		for i, b := range tf.bs {
			if p, err := b.Allow(); err == nil {
				probes = append(probes, p)
			} else if !errors.Is(err, breaker.ErrProbeLimit) {
				t.Fatalf("round %d replica %d: %v", round, i, err)
			}
			tf.clk.Advance(30 * time.Millisecond) // past NoSlotBackoff
		}
	}
	if len(probes) != 2 || tf.store.LeasesHeld("partner") != 2 {
		t.Fatalf("admitted %d probes, %d leases held; want 2 and 2", len(probes), tf.store.LeasesHeld("partner"))
	}
	for _, p := range probes {
		p.Record(breaker.OutcomeSuccess, 10*time.Millisecond)
	}
	if sh := tf.shared(t); sh.Successes != 2 || sh.State != breaker.StateHalfOpen {
		t.Fatalf("shared %+v, want half-open with 2 successes", sh)
	}
	if n := tf.store.LeasesHeld("partner"); n != 0 {
		t.Fatalf("%d leases held after the probes reported, want 0", n)
	}
	// A third good probe, on a replica that had none, closes the fleet:
	// no replica saw 3 successes of its own.
	var third breaker.Permit
	got := false
	for _, b := range tf.bs {
		if p, err := b.Allow(); err == nil {
			third, got = p, true
			break
		}
	}
	if !got {
		t.Fatal("no replica admitted the third probe")
	}
	third.Record(breaker.OutcomeSuccess, 10*time.Millisecond)
	wantAll(t, tf, breaker.StateClosed)
	if sh := tf.shared(t); sh.State != breaker.StateClosed || sh.Trips != 0 {
		t.Fatalf("shared %+v, want closed with the ladder reset", sh)
	}
}

func TestFleetBadProbeReopensEveryReplicaWithLongerWindow(t *testing.T) {
	tf := newTestFleet(t, 3, nil)
	tf.trip(t, 0)
	tf.clk.Advance(time.Second)
	p, err := tf.bs[2].Allow()
	if err != nil {
		t.Fatal(err)
	}
	p.Record(breaker.OutcomeFailure, time.Millisecond)
	wantAll(t, tf, breaker.StateOpen)
	sh := tf.shared(t)
	if sh.Trips != 2 || sh.Window != 2*time.Second || sh.By != "c" {
		t.Fatalf("shared %+v, want trip 2 with a 2s window by c", sh)
	}
	if n := tf.store.LeasesHeld("partner"); n != 0 {
		t.Fatalf("%d leases held, want 0", n)
	}
}

func TestFleetStaleCASNeverWins(t *testing.T) {
	tf := newTestFleet(t, 1, nil)
	ctx := context.Background()
	_, rev, _ := tf.store.Load(ctx, "partner")
	// An operator (or another replica) writes first.
	if _, err := tf.store.CompareAndSwap(ctx, "partner", breaker.SharedState{State: breaker.StateClosed, Epoch: 7, Trips: 3, By: "op"}, rev); err != nil {
		t.Fatal(err)
	}
	if _, err := tf.store.CompareAndSwap(ctx, "partner", breaker.SharedState{State: breaker.StateOpen, Epoch: 1}, rev); !errors.Is(err, breaker.ErrStaleRevision) {
		t.Fatalf("stale CAS err = %v, want ErrStaleRevision", err)
	}
	// The replica's trip, made on the older revision, is merged on top of
	// the newer state: the ladder continues from 3 trips.
	tf.trip(t, 0)
	sh := tf.shared(t)
	if sh.Epoch != 8 || sh.Trips != 4 || sh.Window != 8*time.Second {
		t.Fatalf("shared %+v, want epoch 8, trip 4, window 8s", sh)
	}
	if s := tf.bs[0].Snapshot(); s.OpenWindow != 8*time.Second || s.ConsecutiveTrips != 4 {
		t.Fatalf("local window %v trips %d, want the shared 8s, 4", s.OpenWindow, s.ConsecutiveTrips)
	}
}

func TestFleetExpiredLeaseFreesSlot(t *testing.T) {
	tf := newTestFleet(t, 2, func(c *breaker.Config) { c.ProbeConcurrency = 1 })
	tf.trip(t, 0)
	tf.clk.Advance(time.Second)
	// A replica that crashed holding the only probe slot (its lease, taken
	// with the fleet's default TTL, MaxProbeWait, is never released).
	if _, err := tf.store.AcquireProbe(context.Background(), "partner", 1, 5*time.Second, "crashed"); err != nil {
		t.Fatal(err)
	}
	tf.clk.Advance(30 * time.Millisecond)
	if _, err := tf.bs[1].Allow(); !errors.Is(err, breaker.ErrProbeLimit) {
		t.Fatalf("second replica while the slot is held: %v, want ErrProbeLimit", err)
	}
	tf.clk.Advance(5 * time.Second) // ProbeLeaseTTL
	p, err := tf.bs[1].Allow()
	if err != nil {
		t.Fatalf("after the lease TTL: %v, want a probe", err)
	}
	p.Record(breaker.OutcomeSuccess, time.Millisecond)
	if sh := tf.shared(t); sh.Successes != 1 {
		t.Fatalf("shared successes %d, want 1", sh.Successes)
	}
}

func TestFleetStoreDownFallsBackAndReconciles(t *testing.T) {
	tf := newTestFleet(t, 2, func(c *breaker.Config) { c.ProbeConcurrency = 3 })
	tf.store.SetDown(true)
	tf.trip(t, 0)
	if !tf.fleets[0].Connected() {
		t.Fatal("fleet a fell back at the first failure, before FallbackAfter")
	}
	// b knows nothing and keeps delivering on local evidence.
	if st := tf.bs[1].State(); st != breaker.StateClosed {
		t.Fatalf("replica b %v, want closed", st)
	}
	tf.clk.Advance(time.Second)
	if tf.fleets[0].Resync() || tf.fleets[0].Connected() {
		t.Fatal("fleet a still connected after FallbackAfter with the store down")
	}
	// a probes on its local breaker, capped at FallbackProbes (1).
	if _, err := tf.bs[0].Allow(); err != nil {
		t.Fatalf("fallback probe: %v", err)
	}
	if _, err := tf.bs[0].Allow(); !errors.Is(err, breaker.ErrProbeLimit) {
		t.Fatalf("second fallback probe: %v, want ErrProbeLimit", err)
	}
	// The store returns; a's local state is half-open, the shared state
	// closed: a's trip (and the half-open after it) are published.
	tf.store.SetDown(false)
	if !tf.fleets[0].Resync() {
		t.Fatal("resync failed with the store up")
	}
	sh := tf.shared(t)
	if sh.State != breaker.StateHalfOpen || sh.Trips != 1 {
		t.Fatalf("shared %+v after reconcile, want half-open after 1 trip", sh)
	}
	tf.fleets[1].Resync()
	if st := tf.bs[1].State(); st != breaker.StateHalfOpen {
		t.Fatalf("replica b %v after rejoining, want half-open", st)
	}
}

func TestFleetForcedOpenFromStore(t *testing.T) {
	tf := newTestFleet(t, 2, nil)
	ctx := context.Background()
	_, rev, _ := tf.store.Load(ctx, "partner")
	sh := tf.shared(t)
	sh.State, sh.Forced, sh.Epoch, sh.By = breaker.StateOpen, true, sh.Epoch+1, "op"
	if _, err := tf.store.CompareAndSwap(ctx, "partner", sh, rev); err != nil {
		t.Fatal(err)
	}
	wantAll(t, tf, breaker.StateOpen)
	tf.clk.Advance(time.Hour)
	wantAll(t, tf, breaker.StateOpen)
	if s := tf.bs[1].Snapshot(); !s.Forced {
		t.Fatal("not forced")
	}
	tf.bs[0].Reset() // a local reset is published to the fleet
	wantAll(t, tf, breaker.StateClosed)
	if s := tf.bs[1].Snapshot(); s.Forced || s.ConsecutiveTrips != 0 {
		t.Fatalf("replica b %+v after reset", s)
	}
}

func TestJoinFleetValidates(t *testing.T) {
	b, err := breaker.New(breaker.Config{Name: "x"})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Stop()
	if _, err := breaker.JoinFleet(b, breaker.FleetConfig{}); !errors.Is(err, breaker.ErrInvalidConfig) {
		t.Fatalf("no store: %v", err)
	}
	st := breaker.NewMemoryStore(nil)
	if _, err := breaker.JoinFleet(b, breaker.FleetConfig{Store: st, ProbeLeaseTTL: time.Millisecond}); !errors.Is(err, breaker.ErrInvalidConfig) {
		t.Fatalf("short TTL: %v", err)
	}
	f, err := breaker.JoinFleet(b, breaker.FleetConfig{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Leave()
	if _, err := breaker.JoinFleet(b, breaker.FleetConfig{Store: st}); !errors.Is(err, breaker.ErrFleetJoined) {
		t.Fatalf("second join: %v", err)
	}
	if _, err := breaker.JoinFleet(nil, breaker.FleetConfig{Store: st}); !errors.Is(err, breaker.ErrInvalidConfig) || !strings.Contains(err.Error(), "nil") {
		t.Fatalf("nil breaker: %v", err)
	}
}

func TestFleetConfigValidate(t *testing.T) {
	st := breaker.NewMemoryStore(nil)
	for _, c := range []breaker.FleetConfig{
		{},
		{Store: st, ProbeLeaseTTL: 500 * time.Millisecond},
		{Store: st, OpTimeout: -1},
		{Store: st, FallbackAfter: -time.Second},
		{Store: st, FallbackProbes: -1},
	} {
		if err := c.Validate(); !errors.Is(err, breaker.ErrInvalidConfig) {
			t.Errorf("%+v: Validate = %v, want ErrInvalidConfig", c, err)
		}
	}
	if err := (&breaker.FleetConfig{Store: st}).Validate(); err != nil {
		t.Errorf("defaults: %v", err)
	}
}

// blindStore is a MemoryStore whose watch delivers nothing: a replica
// learns of other writes only when its compare-and-swap goes stale.
type blindStore struct{ *breaker.MemoryStore }

func (blindStore) Watch(context.Context, string, func(breaker.SharedState, uint64, error)) error {
	return nil
}

func TestFleetStaleWriterReloadsAndMerges(t *testing.T) {
	clk := breakertest.NewClock(time.Time{})
	store := blindStore{breaker.NewMemoryStore(clk)}
	var bs []*breaker.Breaker
	var fs []*breaker.Fleet
	for i := range 2 {
		b, err := breaker.New(breaker.Config{Name: "partner", Clock: clk, Seed: uint64(i + 1), WindowSize: 4, MinimumCalls: 4, DisableJitter: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(b.Stop)
		f, err := breaker.JoinFleet(b, breaker.FleetConfig{Store: store, Replica: string(rune('a' + i)), Inline: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(f.Leave)
		bs, fs = append(bs, b), append(fs, f)
	}
	fail := func(b *breaker.Breaker) {
		for range 4 {
			if p, err := b.Allow(); err == nil {
				p.Record(breaker.OutcomeFailure, 0)
			}
		}
	}
	fail(bs[0]) // a publishes trip 1 (window 1s)
	clk.Advance(100 * time.Millisecond)
	fail(bs[1]) // b trips on its own evidence, on the revision before a's trip
	if s := fs[1].Stats(); s.StaleCAS != 1 || s.Published != 0 {
		t.Fatalf("b: %+v; want one stale CAS and nothing published", s)
	}
	sh, _, _ := store.Load(context.Background(), "partner")
	if sh.Trips != 1 || sh.By != "a" {
		t.Fatalf("shared %+v; want a's trip to stand", sh)
	}
	// b adopted a's window: both leave open at a's open-until.
	if got, want := bs[1].Snapshot().OpenUntil, bs[0].Snapshot().OpenUntil; !got.Equal(want) {
		t.Fatalf("b open until %v, a %v", got, want)
	}
}

// TestFleetHammer runs three fleet members (background workers, wall
// clock) under many goroutines while the dependency fails and recovers:
// fleet-wide, never more than ProbeConcurrency probes in flight.
func TestFleetHammer(t *testing.T) {
	store := breaker.NewMemoryStore(nil)
	var bs []*breaker.Breaker
	for i := range 3 {
		b, err := breaker.New(breaker.Config{
			Name: "partner", WindowSize: 10, MinimumCalls: 5, BaseOpenWindow: 20 * time.Millisecond,
			MaxOpenWindow: 80 * time.Millisecond, ProbeConcurrency: 2, SuccessesToClose: 3, SlowCallDuration: time.Second, MaxProbeWait: time.Second,
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(b.Stop)
		f, err := breaker.JoinFleet(b, breaker.FleetConfig{Store: store, Replica: string(rune('a' + i)), ResyncInterval: 20 * time.Millisecond, NoSlotBackoff: time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(f.Leave)
		bs = append(bs, b)
	}
	var inflight, maxIn, probes, down atomic.Int64
	done := make(chan struct{})
	var wg sync.WaitGroup
	for g := range 24 {
		b := bs[g%3]
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				default:
				}
				p, err := b.Allow()
				if err != nil {
					time.Sleep(time.Millisecond)
					continue
				}
				if p.IsProbe() {
					probes.Add(1)
					n := inflight.Add(1)
					for m := maxIn.Load(); n > m && !maxIn.CompareAndSwap(m, n); m = maxIn.Load() {
					}
					time.Sleep(2 * time.Millisecond)
					inflight.Add(-1)
				}
				var err2 error
				if down.Load() == 1 {
					err2 = errors.New("down")
				}
				p.Done(err2)
			}
		})
	}
	// Each outage lasts until probes have failed in it (the fleet tripped
	// and went half-open), each recovery until every replica closed: the
	// phases end on what happened, not after a time a loaded machine may
	// not reach it in. The deadline is a hang guard.
	deadline := time.Now().Add(time.Minute)
	until := func(what string, cond func() bool) {
		t.Helper()
		for !cond() {
			if time.Now().After(deadline) {
				close(done)
				wg.Wait()
				t.Fatalf("hammer: not within a minute: %s (probes %d)", what, probes.Load())
			}
			time.Sleep(time.Millisecond)
		}
	}
	for i := range 3 {
		down.Store(1)
		from := probes.Load()
		until(fmt.Sprintf("outage %d: probes admitted and failed", i+1), func() bool { return probes.Load() >= from+3 })
		down.Store(0)
		until(fmt.Sprintf("recovery %d: every replica closed", i+1), func() bool {
			for _, b := range bs {
				if b.State() != breaker.StateClosed {
					return false
				}
			}
			return true
		})
	}
	close(done)
	wg.Wait()
	t.Logf("probes %d, most in flight %d", probes.Load(), maxIn.Load())
	if maxIn.Load() > 2 {
		t.Fatalf("%d probes in flight across the fleet, want <= 2", maxIn.Load())
	}
}

// TestFleetLocalManualControl: ForceOpen, ForceClose and Reset on one
// replica reach every replica (the fleet recognises them by their reasons).
func TestFleetLocalManualControl(t *testing.T) {
	tf := newTestFleet(t, 2, nil)
	tf.bs[0].ForceOpen()
	if sh := tf.shared(t); sh.State != breaker.StateOpen || !sh.Forced {
		t.Fatalf("after ForceOpen: shared %+v", sh)
	}
	if s := tf.bs[1].Snapshot(); s.State != breaker.StateOpen || !s.Forced {
		t.Fatalf("replica b after a's ForceOpen: %+v", s)
	}
	tf.bs[1].ForceClose()
	wantAll(t, tf, breaker.StateClosed)
	if sh := tf.shared(t); sh.Forced || sh.State != breaker.StateClosed {
		t.Fatalf("after ForceClose: shared %+v", sh)
	}
	tf.trip(t, 0)
	tf.bs[1].Reset()
	wantAll(t, tf, breaker.StateClosed)
	if sh := tf.shared(t); sh.Trips != 0 {
		t.Fatalf("after Reset: shared %+v", sh)
	}
}

// TestFleetCommandsInTheSameState: a command on a replica already in its
// state changes no local state, yet reaches the fleet: ForceOpen on an open
// replica forces every replica open (it must not half-open when the window
// ends); Reset on a closed replica puts the shared backoff ladder back at
// its base.
func TestFleetCommandsInTheSameState(t *testing.T) {
	tf := newTestFleet(t, 2, nil)
	tf.trip(t, 0)
	wantAll(t, tf, breaker.StateOpen)
	tf.bs[1].ForceOpen() // b is open already
	if sh := tf.shared(t); sh.State != breaker.StateOpen || !sh.Forced {
		t.Fatalf("after ForceOpen on an open replica: shared %+v, want forced open", sh)
	}
	tf.clk.Advance(time.Hour)
	wantAll(t, tf, breaker.StateOpen)
	if s := tf.bs[0].Snapshot(); !s.Forced {
		t.Fatalf("replica a after b's ForceOpen: %+v, want forced", s)
	}
	tf.bs[0].ForceClose()
	wantAll(t, tf, breaker.StateClosed)
	if sh := tf.shared(t); sh.Trips == 0 {
		t.Fatalf("ForceClose keeps the ladder: shared %+v", sh)
	}
	tf.bs[1].Reset() // b is closed already
	if sh := tf.shared(t); sh.Trips != 0 || sh.State != breaker.StateClosed {
		t.Fatalf("after Reset on a closed replica: shared %+v, want closed with 0 trips", sh)
	}
}

// TestFleetStaleQueuedTransitionsAreHistory: a replica cut off from the
// store trips and recovers on local evidence while the fleet recovers
// without it; when it rejoins, its queued trip is older than the shared
// state and is not replayed.
func TestFleetStaleQueuedTransitionsAreHistory(t *testing.T) {
	clk := breakertest.NewClock(time.Time{})
	mem := breaker.NewMemoryStore(clk)
	cut := &cutStore{MemoryStore: mem}
	mk := func(i int, s breaker.Store) (*breaker.Breaker, *breaker.Fleet) {
		b, err := breaker.New(breaker.Config{Name: "partner", Clock: clk, Seed: uint64(i + 1), WindowSize: 4, MinimumCalls: 4,
			DisableJitter: true, ProbeConcurrency: 1, SuccessesToClose: 1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(b.Stop)
		f, err := breaker.JoinFleet(b, breaker.FleetConfig{Store: s, Replica: string(rune('a' + i)), Inline: true, FallbackAfter: time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(f.Leave)
		return b, f
	}
	a, _ := mk(0, mem)
	c, fc := mk(1, cut)
	cut.down.Store(true)
	fail := func(b *breaker.Breaker) {
		for range 4 {
			if p, err := b.Allow(); err == nil {
				p.Record(breaker.OutcomeFailure, 0)
			}
		}
	}
	fail(c) // c trips alone, unpublished
	clk.Advance(10 * time.Millisecond)
	fail(a) // the fleet trips
	clk.Advance(time.Second)
	p, err := a.Allow()
	if err != nil {
		t.Fatal(err)
	}
	p.Record(breaker.OutcomeSuccess, 0) // the fleet closes
	if sh, _, _ := mem.Load(context.Background(), "partner"); sh.State != breaker.StateClosed {
		t.Fatalf("shared %v, want closed", sh)
	}
	clk.Advance(5 * time.Second)
	cut.down.Store(false)
	fc.Resync()
	sh, _, _ := mem.Load(context.Background(), "partner")
	if sh.State != breaker.StateClosed || sh.By == "b" {
		t.Fatalf("shared %+v after c rejoined; want closed, not c's old trip", sh)
	}
	if st := a.State(); st != breaker.StateClosed {
		t.Fatalf("a %v after c rejoined, want closed", st)
	}
}

// cutStore fails every call while down.
type cutStore struct {
	*breaker.MemoryStore
	down atomic.Bool
}

func (c *cutStore) Load(ctx context.Context, n string) (breaker.SharedState, uint64, error) {
	if c.down.Load() {
		return breaker.SharedState{}, 0, breaker.ErrStoreDown
	}
	return c.MemoryStore.Load(ctx, n)
}

func (c *cutStore) CompareAndSwap(ctx context.Context, n string, st breaker.SharedState, rev uint64) (uint64, error) {
	if c.down.Load() {
		return 0, breaker.ErrStoreDown
	}
	return c.MemoryStore.CompareAndSwap(ctx, n, st, rev)
}

func (c *cutStore) AcquireProbe(ctx context.Context, n string, slots int, ttl time.Duration, h string) (breaker.ProbeLease, error) {
	if c.down.Load() {
		return breaker.ProbeLease{}, breaker.ErrStoreDown
	}
	return c.MemoryStore.AcquireProbe(ctx, n, slots, ttl, h)
}

// lagStore is one replica's view of a shared MemoryStore whose watch
// deliveries are held back while hold is set, then delivered by flush: watch
// lag, without real time.
type lagStore struct {
	*breaker.MemoryStore
	mu    sync.Mutex
	hold  bool
	queue []func()
}

func (s *lagStore) Watch(ctx context.Context, name string, fn func(breaker.SharedState, uint64, error)) error {
	return s.MemoryStore.Watch(ctx, name, func(st breaker.SharedState, rev uint64, err error) {
		s.mu.Lock()
		if s.hold {
			s.queue = append(s.queue, func() { fn(st, rev, err) })
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
		fn(st, rev, err)
	})
}

func (s *lagStore) setHold(h bool) {
	s.mu.Lock()
	s.hold = h
	s.mu.Unlock()
}

// flush ends the hold and delivers what was held: every update in order, or
// only the latest (a KV watch that starts at the latest revision).
func (s *lagStore) flush(latestOnly bool) {
	s.mu.Lock()
	q := s.queue
	s.queue, s.hold = nil, false
	s.mu.Unlock()
	if latestOnly && len(q) > 0 {
		q = q[len(q)-1:]
	}
	for _, f := range q {
		f()
	}
}

// newLagFleet is newTestFleet with a lagStore per replica, no fallback
// timer, and SuccessesToClose 1 unless mod changes it.
func newLagFleet(t *testing.T, n int, mod func(*breaker.Config)) (*testFleet, []*lagStore) {
	t.Helper()
	var lags []*lagStore
	tf := buildFleet(t, n, func(c *breaker.Config) {
		c.SuccessesToClose = 1
		if mod != nil {
			mod(c)
		}
	}, func(i int, store *breaker.MemoryStore) breaker.FleetConfig {
		lag := &lagStore{MemoryStore: store}
		lags = append(lags, lag)
		return breaker.FleetConfig{Store: lag, Replica: string(rune('a' + i)), Inline: true}
	})
	return tf, lags
}

// halfOpenWithProbes trips the fleet, waits out the window and has each
// replica take one probe.
func (tf *testFleet) halfOpenWithProbes(t *testing.T) []breaker.Permit {
	t.Helper()
	tf.trip(t, 0)
	tf.clk.Advance(time.Second)
	wantAll(t, tf, breaker.StateHalfOpen)
	var ps []breaker.Permit
	for i, b := range tf.bs {
		p, err := b.Allow()
		if err != nil || !p.IsProbe() {
			t.Fatalf("replica %d: probe %v, err %v", i, p.IsProbe(), err)
		}
		ps = append(ps, p)
	}
	return ps
}

// TestFleetFailureFromEndedPeriodKeepsFleetClosed (issue 12): replica a's
// watch lags; b's good probe closes the fleet; then a's probe of the same,
// now ended, half-open period fails. Like a late success, that failure is
// checked against its period and must not reopen the closed fleet.
func TestFleetFailureFromEndedPeriodKeepsFleetClosed(t *testing.T) {
	tf, lags := newLagFleet(t, 2, nil)
	ps := tf.halfOpenWithProbes(t)
	lags[0].setHold(true)
	ps[1].Record(breaker.OutcomeSuccess, 10*time.Millisecond) // closes the fleet
	if sh := tf.shared(t); sh.State != breaker.StateClosed {
		t.Fatalf("shared %v after b's good probe, want closed", sh)
	}
	if st := tf.bs[0].State(); st != breaker.StateHalfOpen {
		t.Fatalf("a is %v: its watch should still lag", st)
	}
	ps[0].Record(breaker.OutcomeFailure, 10*time.Millisecond) // from the ended period
	if sh := tf.shared(t); sh.State != breaker.StateClosed || sh.Trips != 0 {
		t.Fatalf("shared %v after a's stale failure, want closed with 0 trips", sh)
	}
	lags[0].flush(false)
	wantAll(t, tf, breaker.StateClosed)
	if n := tf.store.LeasesHeld("partner"); n != 0 {
		t.Fatalf("%d leases held, want 0", n)
	}
}

// TestFleetWatchSkippingRevisionsStartsNewPeriod (issue 12): a KV watch
// may skip revisions. Replica a, lagging, misses the fleet closing,
// tripping and going half-open again, and sees only the new half-open
// state: it starts a new half-open period (its earlier probe's result is
// stale) and admits probes in it, instead of treating it as its old period.
func TestFleetWatchSkippingRevisionsStartsNewPeriod(t *testing.T) {
	tf, lags := newLagFleet(t, 2, nil)
	ps := tf.halfOpenWithProbes(t)
	lags[0].setHold(true)
	ps[1].Record(breaker.OutcomeSuccess, 10*time.Millisecond) // closed
	tf.trip(t, 1)                                             // open again
	tf.clk.Advance(time.Second)
	if st := tf.bs[1].State(); st != breaker.StateHalfOpen {
		t.Fatalf("b is %v, want half-open", st)
	}
	sh := tf.shared(t)
	if sh.State != breaker.StateHalfOpen || sh.Trips != 1 {
		t.Fatalf("shared %v, want half-open after 1 trip", sh)
	}
	lags[0].flush(true) // only the latest revision reaches a
	p, err := tf.bs[0].Allow()
	if err != nil || !p.IsProbe() {
		t.Fatalf("a after the skipped revisions: probe %v, err %v; want a probe", p.IsProbe(), err)
	}
	stale := tf.bs[0].Stale()
	ps[0].Record(breaker.OutcomeFailure, 10*time.Millisecond) // from a's ended period
	if got := tf.bs[0].Stale(); got != stale+1 {
		t.Fatalf("stale %d, want %d: the old probe's failure counted", got, stale+1)
	}
	if got := tf.shared(t); got.State != breaker.StateHalfOpen || got.Trips != 1 {
		t.Fatalf("shared %v after the stale failure, want still half-open after 1 trip", got)
	}
	p.Record(breaker.OutcomeSuccess, 10*time.Millisecond)
	wantAll(t, tf, breaker.StateClosed)
}

// TestFleetCancelledProbeFreesLease (issue 12): a probe cut short by
// shutdown is cancelled: its fleet probe lease is released, nothing is
// counted and the ladder is unchanged, so another replica can probe at
// once.
func TestFleetCancelledProbeFreesLease(t *testing.T) {
	tf := newTestFleet(t, 2, func(c *breaker.Config) { c.ProbeConcurrency = 1 })
	tf.trip(t, 0)
	tf.clk.Advance(time.Second)
	p, err := tf.bs[0].Allow()
	if err != nil {
		t.Fatal(err)
	}
	before := tf.shared(t)
	if n := tf.store.LeasesHeld("partner"); n != 1 {
		t.Fatalf("%d leases held, want 1", n)
	}
	p.Cancel()
	if n := tf.store.LeasesHeld("partner"); n != 0 {
		t.Fatalf("%d leases held after Cancel, want 0", n)
	}
	after := tf.shared(t)
	if after != before {
		t.Fatalf("shared state changed by Cancel: %v -> %v", before, after)
	}
	wantAll(t, tf, breaker.StateHalfOpen)
	for i, b := range tf.bs {
		if s := b.Snapshot(); s.ConsecutiveTrips != 1 || s.ProbesInFlight != 0 || s.ConsecutiveSuccesses != 0 {
			t.Fatalf("replica %d after Cancel: %+v", i, s)
		}
	}
	tf.clk.Advance(30 * time.Millisecond) // past NoSlotBackoff
	q, err := tf.bs[1].Allow()
	if err != nil || !q.IsProbe() {
		t.Fatalf("other replica after Cancel: probe %v, err %v; want the freed slot", q.IsProbe(), err)
	}
	q.Record(breaker.OutcomeSuccess, time.Millisecond)
	if sh := tf.shared(t); sh.Successes != 1 || sh.Trips != 1 {
		t.Fatalf("shared %v, want 1 success, 1 trip", sh)
	}
}

func TestJoinFleetRejectsLeaseShorterThanMaxProbeWait(t *testing.T) {
	b, err := breaker.New(breaker.Config{Name: "x", MaxProbeWait: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Stop()
	_, err = breaker.JoinFleet(b, breaker.FleetConfig{Store: breaker.NewMemoryStore(nil), ProbeLeaseTTL: 5 * time.Second})
	var ce *breaker.ConfigError
	if !errors.Is(err, breaker.ErrInvalidConfig) || !errors.As(err, &ce) || ce.Field != "FleetConfig.ProbeLeaseTTL" ||
		!strings.Contains(err.Error(), "MaxProbeWait") {
		t.Fatalf("JoinFleet = %v, want ProbeLeaseTTL >= MaxProbeWait", err)
	}
	f, err := breaker.JoinFleet(b, breaker.FleetConfig{Store: breaker.NewMemoryStore(nil), ProbeLeaseTTL: 10 * time.Second})
	if err != nil {
		t.Fatalf("equal TTL: %v", err)
	}
	f.Leave()
}

// TestFleetGoroutinesConstant joins 1,000 breakers (background mode, not
// Inline) through one store: the goroutines do not grow with them (no
// goroutine, ticker or watch per breaker), and a trip still reaches a
// replica through the shared worker pool.
func TestFleetGoroutinesConstant(t *testing.T) {
	store := breaker.NewMemoryStore(nil)
	join := func(name, replica string) *breaker.Breaker {
		b, err := breaker.New(breaker.Config{Name: name, WindowSize: 4, MinimumCalls: 4, BaseOpenWindow: time.Hour, MaxOpenWindow: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(b.Stop)
		f, err := breaker.JoinFleet(b, breaker.FleetConfig{Store: store, Replica: replica, ResyncInterval: 10 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(f.Leave)
		return b
	}
	a0, b0 := join("p0", "a"), join("p0", "b")
	base := runtime.NumGoroutine()
	for i := 1; i < 1000; i++ {
		join(fmt.Sprintf("p%d", i), "a")
	}
	deadline := time.Now().Add(30 * time.Second)
	for runtime.NumGoroutine() > base+fleetWorkerCap {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines with 1,000 fleets, %d with 2", runtime.NumGoroutine(), base)
		}
		time.Sleep(10 * time.Millisecond)
	}
	for range 4 {
		if p, err := a0.Allow(); err == nil {
			p.Done(errors.New("boom"))
		}
	}
	for b0.State() != breaker.StateOpen {
		if time.Now().After(deadline) {
			t.Fatal("trip did not reach replica b")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// fleetWorkerCap is the most worker goroutines a store's fleets run.
const fleetWorkerCap = 4
