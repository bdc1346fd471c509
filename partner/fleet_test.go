package partner_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/breaker/natskv"
	"github.com/floodgate-go/floodgate/internal/natstest"
	"github.com/floodgate-go/floodgate/partner"
)

// kvStore returns a natskv store on bucket over a connection of its own
// (a replica).
func kvStore(t testing.TB, url, bucket string) *natskv.Store {
	t.Helper()
	js := natstest.JetStream(t, natstest.Conn(t, url))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := natskv.New(ctx, js, natskv.Config{Bucket: bucket})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// fleetRegistry is one replica: a registry whose partners join the fleet
// of service through s.
func fleetRegistry(t testing.TB, s breaker.Store, service, replica string) *partner.Registry {
	t.Helper()
	cfg := partner.Config{
		Template: partner.PartnerConfig{
			Breaker: breaker.Config{
				WindowSize: 6, MinimumCalls: 6, BaseOpenWindow: 100 * time.Millisecond, MaxOpenWindow: 200 * time.Millisecond,
				ProbeConcurrency: 2, SuccessesToClose: 3, MaxProbeWait: time.Second, SlowCallDuration: time.Second,
			},
			MaxInFlight: 64,
		},
		Fleet: &partner.FleetConfig{Service: service, Template: breaker.FleetConfig{
			Store: s, Replica: replica, ResyncInterval: 50 * time.Millisecond,
		}},
	}
	r, err := partner.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	return r
}

// dependency is one partner's endpoint: it fails while down, and counts
// the probes in flight across every replica.
type dependency struct {
	down          atomic.Bool
	failProbes    atomic.Int64 // probes still to fail once recovering
	inflight, max atomic.Int64
	probes        atomic.Int64
}

func (d *dependency) call(l partner.Lease) {
	var err error
	if l.IsProbe() {
		d.probes.Add(1)
		n := d.inflight.Add(1)
		for m := d.max.Load(); n > m && !d.max.CompareAndSwap(m, n); m = d.max.Load() {
		}
		time.Sleep(2 * time.Millisecond) // the call's latency, so probes overlap
		d.inflight.Add(-1)
		if d.failProbes.Add(-1) >= 0 {
			err = errBoom
		}
	} else {
		time.Sleep(time.Millisecond)
	}
	if d.down.Load() {
		err = errBoom
	}
	l.Done(err)
}

// TestFleetPerPartnerProbeCap: three replicas (each its own registry,
// connection and store over one NATS) deliver to four partners of one
// service; two partners go down, fail their first probes, then recover.
// Per partner, at most ProbeConcurrency (2) probes are in flight across the
// replicas at any time; every replica of a partner that went down opens
// and closes again; the healthy partners never trip.
func TestFleetPerPartnerProbeCap(t *testing.T) {
	url := natstest.URL(t)
	bucket := natstest.Name(t, "kv")
	const replicas, partners = 3, 4
	var regs []*partner.Registry
	for i := range replicas {
		regs = append(regs, fleetRegistry(t, kvStore(t, url, bucket), "orders/as2", fmt.Sprintf("r%d", i)))
	}
	deps := make([]*dependency, partners)
	for i := range deps {
		deps[i] = &dependency{}
	}
	key := func(i int) string { return fmt.Sprintf("retailer %d", i) }
	for _, i := range []int{0, 1} {
		deps[i].down.Store(true)
		deps[i].failProbes.Store(4)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, r := range regs {
		for p := range partners {
			for range 2 {
				wg.Go(func() {
					for {
						select {
						case <-stop:
							return
						default:
						}
						_, l, err := r.Acquire(key(p))
						if err != nil {
							time.Sleep(5 * time.Millisecond)
							continue
						}
						deps[p].call(l)
					}
				})
			}
		}
	}
	defer func() { close(stop); wg.Wait() }()
	start := time.Now()
	state := func(r *partner.Registry, p int) breaker.State {
		q, ok := r.Lookup(key(p))
		if !ok {
			return breaker.StateClosed
		}
		return q.Breaker().State()
	}
	natstest.Eventually(t, 60*time.Second, func() bool {
		for _, r := range regs {
			for _, p := range []int{0, 1} {
				if state(r, p) == breaker.StateClosed {
					return false
				}
			}
		}
		return true
	}, "the partners that went down did not trip on every replica")
	t.Logf("tripped after %v", time.Since(start))
	for _, p := range []int{0, 1} {
		deps[p].down.Store(false) // recovering: the first 4 probes still fail
	}
	natstest.Eventually(t, 60*time.Second, func() bool {
		for _, r := range regs {
			for p := range partners {
				if state(r, p) != breaker.StateClosed {
					return false
				}
			}
		}
		return deps[0].probes.Load() >= 7 && deps[1].probes.Load() >= 7
	}, "not every replica of every partner closed after recovery: %v", natstest.Now(func() any {
		out := ""
		for _, r := range regs {
			for p := range 2 {
				q, _ := r.Lookup(key(p))
				sh, rev := q.Fleet().Shared()
				out += fmt.Sprintf("\n%s local %v shared %v rev %d stats %+v connected %v", key(p), q.Breaker().State(), sh, rev, q.Fleet().Stats(), q.Fleet().Connected())
			}
		}
		return out + fmt.Sprintf(" probes %d %d", deps[0].probes.Load(), deps[1].probes.Load())
	}))
	t.Logf("closed after %v", time.Since(start))
	for p, d := range deps {
		t.Logf("partner %d: %d probes, at most %d in flight", p, d.probes.Load(), d.max.Load())
		if m := d.max.Load(); m > 2 {
			t.Errorf("partner %d: %d probes in flight across the replicas, want <= ProbeConcurrency 2", p, m)
		}
	}
	for _, r := range regs {
		for _, p := range []int{2, 3} {
			q, _ := r.Lookup(key(p))
			if q != nil && q.Breaker().Snapshot().ConsecutiveTrips != 0 {
				t.Errorf("healthy partner %d tripped", p)
			}
		}
		q, _ := r.Lookup(key(0))
		if f := q.Fleet(); f == nil || f.Name() != partner.FleetName("orders/as2", key(0)) {
			t.Errorf("partner 0 fleet %v, want named %s", f, partner.FleetName("orders/as2", key(0)))
		}
	}
}

// TestFleetOneWatchPerBucket: a registry joins 1,000 partners' breakers to
// one fleet store: the store runs one KV watch, the goroutines do not grow
// with the partners, and closing the registry has every partner leave.
func TestFleetOneWatchPerBucket(t *testing.T) {
	s := kvStore(t, natstest.URL(t), natstest.Name(t, "kv"))
	r := fleetRegistry(t, s, "svc", "a")
	get := func(from, to int) {
		for i := from; i < to; i++ {
			if _, err := r.Get(fmt.Sprintf("p%d", i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	get(0, 10)
	base := runtime.NumGoroutine()
	get(10, 1000)
	natstest.Eventually(t, 30*time.Second, func() bool { return runtime.NumGoroutine() <= base+5 },
		"goroutines %v with 1,000 partners, %d with 10", natstest.Now(func() any { return runtime.NumGoroutine() }), base)
	st := s.Stats()
	if st.WatchesOpened != 1 || st.Watching != 1000 || !st.Running {
		t.Fatalf("store %+v, want one KV watch opened serving 1000 breakers", st)
	}
	// A forced open of one partner, written by another writer (an
	// operator), reaches its breaker through the shared watch.
	ctx := context.Background()
	name := partner.FleetName("svc", "p500")
	cur, rev, err := s.Load(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	cur.State, cur.Forced, cur.Epoch = breaker.StateOpen, true, cur.Epoch+1
	if _, err := s.CompareAndSwap(ctx, name, cur, rev); err != nil {
		t.Fatal(err)
	}
	p, _ := r.Lookup("p500")
	natstest.Eventually(t, 30*time.Second, func() bool { return p.Breaker().State() == breaker.StateOpen }, "forced open not applied")
	if q, _ := r.Lookup("p501"); q.Breaker().State() != breaker.StateClosed {
		t.Fatal("another partner's breaker opened")
	}
	r.Close()
	natstest.Eventually(t, 30*time.Second, func() bool { st := s.Stats(); return st.Watching == 0 && !st.Running },
		"watches still running after Close: %v", natstest.Now(func() any { return s.Stats() }))
}

func TestFleetConfigValidate(t *testing.T) {
	st := breaker.NewMemoryStore(nil)
	for _, c := range []*partner.FleetConfig{
		{Template: breaker.FleetConfig{Store: st}},
		{Service: "s"},
		{Service: "s", Template: breaker.FleetConfig{Store: st, OpTimeout: -1}},
	} {
		if _, err := partner.New(partner.Config{Fleet: c}); !errors.Is(err, partner.ErrInvalidConfig) {
			t.Errorf("%+v: err %v, want ErrInvalidConfig", c, err)
		}
	}
	if got, want := partner.FleetName("orders/as2", "a.b"), "orders=2Fas2.a=2Eb"; got != want {
		t.Errorf("FleetName = %q, want %q", got, want)
	}
	if partner.FleetName("a", "b.c") == partner.FleetName("a.b", "c") {
		t.Error("FleetName not injective")
	}
}
