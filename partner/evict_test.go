package partner_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/partner"
)

// TestIdleEviction: a closed partner unused for IdleAfter is evicted (not
// earlier), OnEvict hears of it once, the old Partner refuses calls and the
// key's next use creates a new, closed partner.
func TestIdleEviction(t *testing.T) {
	var evicted []string
	r, clk := newTest(t, func(c *partner.Config) {
		c.OnEvict = func(p *partner.Partner) { evicted = append(evicted, p.Key()) }
	})
	p := mustGet(t, r, "P")
	clk.Advance(time.Second)
	if n := r.Sweep(); n != 0 { // P was used since the last sweep: idle from now
		t.Fatalf("swept %d", n)
	}
	clk.Advance(idle - 1)
	if n := r.Sweep(); n != 0 || p.Evicted() {
		t.Fatalf("evicted before IdleAfter: %d", n)
	}
	clk.Advance(1)
	if n := r.Sweep(); n != 1 || !p.Evicted() || r.Len() != 0 {
		t.Fatalf("swept %d, evicted %v, len %d", n, p.Evicted(), r.Len())
	}
	if len(evicted) != 1 || evicted[0] != "P" {
		t.Fatalf("OnEvict calls %v", evicted)
	}
	if _, ok := r.Lookup("P"); ok {
		t.Fatal("evicted partner still held")
	}
	if _, err := p.Acquire(); !errors.Is(err, partner.ErrEvicted) {
		t.Fatalf("Acquire on an evicted partner = %v", err)
	}
	if err := r.With("P", func(q *partner.Partner) {
		if q == p {
			t.Error("With got the evicted partner")
		}
	}); err != nil {
		t.Fatal(err)
	}
	q, l, err := r.Acquire("P")
	if err != nil || q == p || q.Evicted() {
		t.Fatalf("Acquire after eviction: %v (same %v)", err, q == p)
	}
	l.Done(nil)
}

// TestUseKeepsPartner: a partner used within every IdleAfter is never
// evicted.
func TestUseKeepsPartner(t *testing.T) {
	r, clk := newTest(t, nil)
	p := mustGet(t, r, "P")
	for range 10 {
		clk.Advance(idle / 2)
		mustGet(t, r, "P")
		if r.Sweep() != 0 || p.Evicted() {
			t.Fatal("a used partner was evicted")
		}
	}
}

// TestNeverEvicted: a partner with a call in flight, held by With, not
// closed, forced closed after a trip (its backoff ladder kept) or with a
// backlog stays, however long idle; it
// goes once that ends.
func TestNeverEvicted(t *testing.T) {
	backlog := map[string]bool{"backlog": true}
	var mu sync.Mutex
	r, clk := newTest(t, func(c *partner.Config) {
		c.HasBacklog = func(p *partner.Partner) bool {
			mu.Lock()
			defer mu.Unlock()
			return backlog[p.Key()]
		}
	})
	_, inflight, err := r.Acquire("inflight")
	if err != nil {
		t.Fatal(err)
	}
	trip(t, r, "open")
	trip(t, r, "forced")
	if err := r.With("forced", func(p *partner.Partner) { p.Breaker().ForceClose() }); err != nil {
		t.Fatal(err)
	}
	mustGet(t, r, "backlog")
	mustGet(t, r, "idle")

	held := make(chan struct{})
	release := make(chan struct{})
	go func() {
		_ = r.With("held", func(*partner.Partner) {
			close(held)
			<-release
		})
	}()
	<-held

	// open goes half-open after each window and fails its probe.
	for range 5 {
		clk.Advance(idle)
		if _, l, err := r.Acquire("open"); err == nil {
			l.Done(errBoom)
		}
		r.Sweep()
	}
	want := map[string]bool{"inflight": true, "open": true, "forced": true, "backlog": true, "held": true}
	for p := range r.All() {
		if !want[p.Key()] {
			t.Errorf("%q held", p.Key())
		}
		delete(want, p.Key())
	}
	if len(want) != 0 {
		t.Fatalf("evicted: %v", want)
	}

	// Each reason ends; the partners then go once idle.
	inflight.Done(nil)
	close(release)
	if err := r.With("open", func(p *partner.Partner) { p.Breaker().Reset() }); err != nil {
		t.Fatal(err)
	}
	if err := r.With("forced", func(p *partner.Partner) { p.Breaker().Reset() }); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	backlog["backlog"] = false
	mu.Unlock()
	deadline := time.Now().Add(time.Minute) // hang guard: "held" unholds in its own goroutine
	for r.Len() > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d partners left", r.Len())
		}
		clk.Advance(idle)
		r.Sweep()
		runtime.Gosched()
	}
}

// TestCallDuringJudgement: a partner judged evictable (closed, idle) whose
// breaker trips through a call before the eviction commits is not evicted:
// HasBacklog, called between the two, makes the calls.
func TestCallDuringJudgement(t *testing.T) {
	var r *partner.Registry
	r, clk := newTest(t, func(c *partner.Config) {
		c.HasBacklog = func(p *partner.Partner) bool {
			for range 4 {
				l, err := p.Acquire()
				if err != nil {
					t.Errorf("Acquire: %v", err)
					return false
				}
				l.Done(errBoom)
			}
			return false
		}
	})
	p := mustGet(t, r, "P")
	clk.Advance(time.Second)
	r.Sweep()
	clk.Advance(idle)
	if n := r.Sweep(); n != 0 || p.Evicted() {
		t.Fatalf("evicted a partner that tripped during the sweep (state %v)", p.Breaker().State())
	}
	if st := p.Breaker().State(); st != breaker.StateOpen {
		t.Fatalf("state %v", st)
	}
}

// TestPartnerLimit: at MaxPartners, a new partner evicts an idle one; with
// none evictable it gets ErrPartnerLimit, and no more than MaxPartners are
// ever held.
func TestPartnerLimit(t *testing.T) {
	var evicted []string
	r, clk := newTest(t, func(c *partner.Config) {
		c.MaxPartners = 2
		c.OnEvict = func(p *partner.Partner) { evicted = append(evicted, p.Key()) }
	})
	_, la, _ := r.Acquire("A")
	_, lb, _ := r.Acquire("B")
	if _, err := r.Get("C"); !errors.Is(err, partner.ErrPartnerLimit) {
		t.Fatalf("Get(C) = %v, want ErrPartnerLimit", err)
	}
	if _, _, err := r.Acquire("C"); !errors.Is(err, partner.ErrPartnerLimit) {
		t.Fatalf("Acquire(C) = %v, want ErrPartnerLimit", err)
	}
	// Busy partners are not evicted, however idle.
	clk.Advance(10 * idle)
	if _, err := r.Get("C"); !errors.Is(err, partner.ErrPartnerLimit) {
		t.Fatalf("Get(C) with both busy = %v, want ErrPartnerLimit", err)
	}
	la.Done(nil)
	lb.Done(nil)
	// Released now: idle from the next sweep on.
	clk.Advance(time.Second)
	if _, err := r.Get("C"); !errors.Is(err, partner.ErrPartnerLimit) {
		t.Fatalf("Get(C) = %v, want ErrPartnerLimit", err)
	}
	clk.Advance(idle)
	if _, err := r.Get("C"); err != nil {
		t.Fatalf("Get(C) with A, B idle = %v", err)
	}
	if r.Len() > 2 || len(evicted) != 2 {
		t.Fatalf("len %d, evicted %v", r.Len(), evicted)
	}
}

// TestPartnerLimitSweepsAtMostOncePerInterval: a full registry with
// nothing to evict answers ErrPartnerLimit without visiting every partner
// for every new key.
func TestPartnerLimitSweepsAtMostOncePerInterval(t *testing.T) {
	var calls atomic.Int64
	r, clk := newTest(t, func(c *partner.Config) {
		c.MaxPartners = 100
		c.HasBacklog = func(*partner.Partner) bool { calls.Add(1); return true }
	})
	for i := range 100 {
		mustGet(t, r, fmt.Sprint(i))
	}
	clk.Advance(3 * idle)
	r.Sweep() // all idle from here
	clk.Advance(3 * idle)
	calls.Store(0)
	for i := range 1000 {
		if _, err := r.Get(fmt.Sprint("new", i)); !errors.Is(err, partner.ErrPartnerLimit) {
			t.Fatal(err)
		}
	}
	if n := calls.Load(); n != 100 {
		t.Fatalf("HasBacklog called %d times for 1000 refused keys, want 100 (one sweep)", n)
	}
}

// TestTenThousandIdlePartners: 10,000 partners seen once, then idle, are
// all evicted, the registry never holds more than MaxPartners, and the
// number of goroutines does not grow with the partners.
func TestTenThousandIdlePartners(t *testing.T) {
	const n = 10000
	var evicted atomic.Int64
	before := runtime.NumGoroutine()
	r, _ := newTest(t, func(c *partner.Config) {
		c.MaxPartners = n
		c.Clock = nil // the wall clock, with real timers: a breaker on it has none while closed
	})
	for i := range n {
		_, l, err := r.Acquire(fmt.Sprintf("partner-%d.example", i))
		if err != nil {
			t.Fatal(err)
		}
		l.Done(nil)
	}
	if got := runtime.NumGoroutine(); got > before {
		t.Fatalf("%d goroutines with %d partners, %d before", got, n, before)
	}
	if _, err := r.Get("one-too-many"); !errors.Is(err, partner.ErrPartnerLimit) {
		t.Fatalf("Get beyond MaxPartners = %v", err)
	}
	if r.Len() != n {
		t.Fatalf("Len = %d", r.Len())
	}
	r.Close()

	// The same on the fake clock, evicting.
	r, clk := newTest(t, func(c *partner.Config) {
		c.MaxPartners = n
		c.OnEvict = func(*partner.Partner) { evicted.Add(1) }
	})
	for i := range n {
		mustGet(t, r, fmt.Sprintf("partner-%d.example", i))
	}
	clk.Advance(time.Second)
	r.Sweep()
	clk.Advance(idle)
	if got := r.Sweep(); got != n || r.Len() != 0 || evicted.Load() != n {
		t.Fatalf("swept %d, len %d, OnEvict %d; want all %d", got, r.Len(), evicted.Load(), n)
	}
	if got := runtime.NumGoroutine(); got > before {
		t.Fatalf("%d goroutines after eviction, %d before", got, before)
	}
}

// TestEvictionRaces: calls, failures, operator actions and sweeps at once.
// A call never runs on an evicted partner, an evicted breaker was closed,
// and the registry never exceeds its cap.
func TestEvictionRaces(t *testing.T) {
	const keys, maxPartners = 200, 16
	var evictions atomic.Int64
	r, clk := newTest(t, func(c *partner.Config) {
		c.MaxPartners = maxPartners
		c.IdleAfter = time.Millisecond
		c.SweepInterval = time.Millisecond
		c.Template.Breaker.Clock = breakerClock{} // no timers: states change on calls only
		c.OnEvict = func(p *partner.Partner) {
			evictions.Add(1)
			if s := p.Breaker().Snapshot(); s.State != breaker.StateClosed || s.Forced || s.ConsecutiveTrips != 0 {
				t.Errorf("evicted %q: %+v", p.Key(), s)
			}
		}
	})
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			for {
				select {
				case <-stop:
					return
				default:
				}
				key := fmt.Sprint("k", rng.IntN(keys))
				switch rng.IntN(10) {
				case 0:
					_ = r.With(key, func(p *partner.Partner) {
						if p.Evicted() {
							t.Error("With on an evicted partner")
						}
						if rng.IntN(2) == 0 {
							p.Breaker().ForceOpen()
						} else {
							p.Breaker().Reset()
						}
					})
				default:
					_, l, err := r.Acquire(key)
					if err != nil {
						continue
					}
					if l.Partner().Evicted() {
						t.Error("a call admitted on an evicted partner")
					}
					if rng.IntN(8) == 0 {
						l.Done(errBoom)
					} else {
						l.Done(nil)
					}
				}
				if n := r.Len(); n > maxPartners {
					t.Errorf("Len %d > MaxPartners", n)
				}
			}
		})
	}
	// Run until enough evictions raced with the calls, with a hang guard.
	deadline := time.Now().Add(2 * time.Minute)
	for evictions.Load() < 300 && time.Now().Before(deadline) {
		clk.Advance(time.Millisecond)
		r.Sweep()
		runtime.Gosched()
	}
	close(stop)
	wg.Wait()
	if evictions.Load() < 300 {
		t.Fatalf("%d evictions within the hang guard", evictions.Load())
	}
}

// breakerClock is a clock without timers stopped at one instant: breakers
// on it never change state by time, only by calls, Reset and ForceOpen.
type breakerClock struct{}

func (breakerClock) Now() time.Time { return time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC) }
