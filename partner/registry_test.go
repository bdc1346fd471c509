package partner_test

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/partner"
)

func TestGetCreatesOnFirstUse(t *testing.T) {
	r, _ := newTest(t, nil)
	a := mustGet(t, r, "ACME-RETAIL")
	if a2 := mustGet(t, r, "ACME-RETAIL"); a2 != a {
		t.Fatal("second Get returned another partner")
	}
	b := mustGet(t, r, "GLOBEX")
	if a.Breaker() == b.Breaker() {
		t.Fatal("partners share a breaker")
	}
	if r.Len() != 2 {
		t.Fatalf("Len = %d, want 2", r.Len())
	}
	if a.Key() != "ACME-RETAIL" || a.Token() != "ACME-RETAIL" || a.Breaker().Name() != "ACME-RETAIL" {
		t.Fatalf("key %q token %q breaker %q", a.Key(), a.Token(), a.Breaker().Name())
	}
	if p, ok := r.Lookup("GLOBEX"); !ok || p != b {
		t.Fatal("Lookup of a held partner")
	}
	if _, ok := r.Lookup("INITECH"); ok || r.Len() != 2 {
		t.Fatal("Lookup created a partner")
	}
	n := 0
	for range r.All() {
		n++
	}
	if n != 2 {
		t.Fatalf("All yielded %d partners", n)
	}
}

// TestPartnersAreIsolated: one partner's trip leaves the others closed.
func TestPartnersAreIsolated(t *testing.T) {
	r, _ := newTest(t, nil)
	mustGet(t, r, "HEALTHY")
	trip(t, r, "DOWN")
	if _, _, err := r.Acquire("DOWN"); !errors.Is(err, breaker.ErrOpen) {
		t.Fatalf("Acquire(DOWN) = %v, want ErrOpen", err)
	}
	_, l, err := r.Acquire("HEALTHY")
	if err != nil {
		t.Fatalf("Acquire(HEALTHY) = %v", err)
	}
	l.Done(nil)
}

func TestOverride(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	r, _ := newTest(t, func(c *partner.Config) {
		c.Override = func(key string, pc *partner.PartnerConfig) {
			mu.Lock()
			seen = append(seen, key+"|"+pc.Breaker.Name)
			mu.Unlock()
			if key == "BIG" {
				pc.MaxInFlight = 100
				pc.Breaker.ProbeConcurrency = 7
			}
		}
	})
	big, small := mustGet(t, r, "BIG"), mustGet(t, r, "a.b")
	if big.MaxInFlight() != 100 || big.Breaker().Config().ProbeConcurrency != 7 {
		t.Fatalf("override not applied: %d, %d", big.MaxInFlight(), big.Breaker().Config().ProbeConcurrency)
	}
	if small.MaxInFlight() != 4 || small.Breaker().Config().ProbeConcurrency != 1 {
		t.Fatalf("template not applied: %d, %d", small.MaxInFlight(), small.Breaker().Config().ProbeConcurrency)
	}
	if strings.Join(seen, ",") != "BIG|BIG,a.b|a=2Eb" {
		t.Fatalf("Override saw %v", seen)
	}
}

func TestOverrideInvalid(t *testing.T) {
	r, _ := newTest(t, func(c *partner.Config) {
		c.Override = func(key string, pc *partner.PartnerConfig) {
			switch key {
			case "bulkhead":
				pc.MaxInFlight = -1
			case "breaker.bad":
				pc.Breaker.FailureRateThreshold = 2
			}
		}
	})
	_, err := r.Get("bulkhead")
	if !errors.Is(err, partner.ErrInvalidConfig) || !strings.Contains(err.Error(), "partner bulkhead: MaxInFlight must be in 1..1048576, got -1") {
		t.Fatalf("Get = %v", err)
	}
	_, err = r.Get("breaker.bad")
	if !errors.Is(err, partner.ErrInvalidConfig) || !errors.Is(err, breaker.ErrInvalidConfig) ||
		!strings.Contains(err.Error(), "partner breaker=2Ebad: Breaker:") || !strings.Contains(err.Error(), "FailureRateThreshold") {
		t.Fatalf("Get = %v", err)
	}
	if r.Len() != 0 {
		t.Fatalf("Len = %d after failed creations", r.Len())
	}
}

// TestBadKeys: keys a message may carry get partners of their own, with
// tokens safe as one subject token, and the raw key kept.
func TestBadKeys(t *testing.T) {
	r, _ := newTest(t, func(c *partner.Config) { c.MaxKeyLen = 5000 })
	if _, err := r.Get(""); !errors.Is(err, partner.ErrNoKey) {
		t.Fatalf("Get(\"\") = %v, want ErrNoKey", err)
	}
	if _, _, err := r.Acquire(""); !errors.Is(err, partner.ErrNoKey) {
		t.Fatalf("Acquire(\"\") = %v, want ErrNoKey", err)
	}
	if _, err := r.Get(strings.Repeat("k", 5001)); !errors.Is(err, partner.ErrKeyTooLong) {
		t.Fatalf("Get(5001 bytes) = %v, want ErrKeyTooLong", err)
	}
	keys := []string{".", "*", ">", " ", "\t", "a b", "a.b", "a_b", "a=2Eb", "x.>", "orders.*",
		strings.Repeat("k", 4096), strings.Repeat("k", 4096) + ".", "\xff\xfe", "\xc3", "é"}
	tokens := map[string]string{}
	for _, k := range keys {
		p, l, err := r.Acquire(k)
		if err != nil {
			t.Fatalf("Acquire(%.20q): %v", k, err)
		}
		l.Done(nil)
		if p.Key() != k {
			t.Fatalf("Key() = %.20q, want %.20q", p.Key(), k)
		}
		if prob := tokenProblem(p.Token()); prob != "" {
			t.Fatalf("token %q of %.20q invalid as %s", p.Token(), k, prob)
		}
		if other, dup := tokens[p.Token()]; dup {
			t.Fatalf("%.20q and %.20q share token %q", other, k, p.Token())
		}
		tokens[p.Token()] = k
	}
	if r.Len() != len(keys) {
		t.Fatalf("Len = %d, want %d", r.Len(), len(keys))
	}
}

// TestBulkheadBeforeBreaker: beyond MaxInFlight a call gets
// ErrBulkheadFull, and the breaker is not asked (a half-open breaker's
// probe slot is not taken).
func TestBulkheadBeforeBreaker(t *testing.T) {
	r, _ := newTest(t, func(c *partner.Config) { c.Template.MaxInFlight = 2 })
	var leases []partner.Lease
	for range 2 {
		_, l, err := r.Acquire("P")
		if err != nil {
			t.Fatal(err)
		}
		leases = append(leases, l)
	}
	p := mustGet(t, r, "P")
	if _, _, err := r.Acquire("P"); !errors.Is(err, partner.ErrBulkheadFull) {
		t.Fatalf("third Acquire = %v, want ErrBulkheadFull", err)
	}
	if p.InFlight() != 2 {
		t.Fatalf("InFlight = %d", p.InFlight())
	}
	for _, l := range leases {
		l.Done(nil)
	}
	if p.InFlight() != 0 {
		t.Fatalf("InFlight = %d after Done", p.InFlight())
	}

}

// TestBulkheadRejectionLeavesProbeSlot: with the bulkhead full, a call to a
// half-open partner gets ErrBulkheadFull without taking a probe slot.
func TestBulkheadRejectionLeavesProbeSlot(t *testing.T) {
	r, clk := newTest(t, func(c *partner.Config) {
		c.Template.MaxInFlight = 1
		c.Template.Breaker.ProbeConcurrency = 2
		c.Template.Breaker.SuccessesToClose = 2
	})
	trip(t, r, "P")
	clk.Advance(time.Second)
	p, probe, err := r.Acquire("P")
	if err != nil || !probe.IsProbe() {
		t.Fatalf("probe: %v", err)
	}
	if _, _, err := r.Acquire("P"); !errors.Is(err, partner.ErrBulkheadFull) {
		t.Fatalf("Acquire with the bulkhead full = %v, want ErrBulkheadFull", err)
	}
	if s := p.Breaker().Snapshot(); s.ProbesInFlight != 1 {
		t.Fatalf("ProbesInFlight = %d, want 1: the rejected call took a probe slot", s.ProbesInFlight)
	}
	probe.Done(nil)
	if p.InFlight() != 0 {
		t.Fatalf("InFlight = %d", p.InFlight())
	}
}

func TestLeaseReportedOnce(t *testing.T) {
	r, _ := newTest(t, nil)
	_, l1, err := r.Acquire("P")
	if err != nil {
		t.Fatal(err)
	}
	_, l2, err := r.Acquire("P")
	if err != nil {
		t.Fatal(err)
	}
	p := l1.Partner()
	l1.Done(nil)
	l1.Done(nil)
	l1.Cancel()
	l1.Record(breaker.OutcomeFailure, 0)
	if p.InFlight() != 1 {
		t.Fatalf("InFlight = %d after reporting one lease of two (three times)", p.InFlight())
	}
	// Reports of a lease after its guard was reused are still ignored.
	for range 100 {
		_, l, err := r.Acquire("P")
		if err != nil {
			t.Fatal(err)
		}
		l1.Done(nil)
		l.Done(nil)
	}
	if p.InFlight() != 1 {
		t.Fatalf("InFlight = %d", p.InFlight())
	}
	l2.Done(nil)
	if p.InFlight() != 0 {
		t.Fatalf("InFlight = %d", p.InFlight())
	}
	var zero partner.Lease
	zero.Done(nil)
	zero.Cancel()
	if zero.Partner() != nil {
		t.Fatal("zero lease has a partner")
	}
}

func TestBreakerRejectionFreesBulkhead(t *testing.T) {
	r, _ := newTest(t, func(c *partner.Config) { c.Template.MaxInFlight = 1 })
	if err := r.With("P", func(p *partner.Partner) { p.Breaker().ForceOpen() }); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		p, _, err := r.Acquire("P")
		if !errors.Is(err, breaker.ErrOpen) {
			t.Fatalf("Acquire = %v, want ErrOpen", err)
		}
		if p == nil || p.InFlight() != 0 || p.Token() != "P" {
			t.Fatalf("partner %v, in flight %d", p, p.InFlight())
		}
	}
}

func TestOnTransition(t *testing.T) {
	type ev struct {
		key      string
		from, to breaker.State
	}
	var mu sync.Mutex
	var got []ev
	r, clk := newTest(t, func(c *partner.Config) {
		c.OnTransition = func(p *partner.Partner, tr breaker.Transition) {
			mu.Lock()
			got = append(got, ev{p.Key(), tr.From, tr.To})
			mu.Unlock()
			if tr.Breaker != p.Token() {
				t.Errorf("transition of breaker %q for partner %q", tr.Breaker, p.Token())
			}
		}
	})
	mustGet(t, r, "quiet")
	trip(t, r, "a.b")
	clk.Advance(time.Second)
	_, l, err := r.Acquire("a.b")
	if err != nil {
		t.Fatal(err)
	}
	l.Done(nil)
	mu.Lock()
	defer mu.Unlock()
	want := []ev{
		{"a.b", breaker.StateClosed, breaker.StateOpen},
		{"a.b", breaker.StateOpen, breaker.StateHalfOpen},
		{"a.b", breaker.StateHalfOpen, breaker.StateClosed},
	}
	if len(got) != len(want) {
		t.Fatalf("transitions %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("transitions %v, want %v", got, want)
		}
	}
}

func TestClose(t *testing.T) {
	r, _ := newTest(t, nil)
	_, l, err := r.Acquire("P")
	if err != nil {
		t.Fatal(err)
	}
	p := l.Partner()
	r.Close()
	r.Close()
	if _, err := r.Get("P"); !errors.Is(err, partner.ErrClosed) {
		t.Fatalf("Get after Close = %v", err)
	}
	if _, _, err := r.Acquire("Q"); !errors.Is(err, partner.ErrClosed) {
		t.Fatalf("Acquire after Close = %v", err)
	}
	if _, err := p.Acquire(); !errors.Is(err, partner.ErrEvicted) {
		t.Fatalf("Partner.Acquire after Close = %v", err)
	}
	l.Done(nil) // still reportable
	if p.InFlight() != 0 || r.Len() != 0 {
		t.Fatalf("in flight %d, len %d", p.InFlight(), r.Len())
	}
}

// TestAcquireConcurrentFirstUse: many goroutines asking for one new key get
// one partner.
func TestAcquireConcurrentFirstUse(t *testing.T) {
	r, _ := newTest(t, func(c *partner.Config) { c.Template.MaxInFlight = 1000 })
	var wg sync.WaitGroup
	ps := make([]*partner.Partner, 50)
	for i := range ps {
		wg.Go(func() {
			p, l, err := r.Acquire("NEW")
			if err != nil {
				t.Error(err)
				return
			}
			ps[i] = p
			l.Done(nil)
		})
	}
	wg.Wait()
	for _, p := range ps {
		if p != ps[0] {
			t.Fatal("two partners for one key")
		}
	}
	if r.Len() != 1 {
		t.Fatalf("Len = %d", r.Len())
	}
}

// TestAcquireAtTakesTheGivenTime: AcquireAt admits at the time given, not
// the clock's: an open breaker admits a probe at the end of its open
// window though the clock has not moved, and the bulkhead counts the
// lease like Acquire's.
func TestAcquireAtTakesTheGivenTime(t *testing.T) {
	r, clk := newTest(t, nil)
	trip(t, r, "DOWN")
	p := mustGet(t, r, "DOWN")
	if _, err := p.AcquireAt(clk.Now()); !errors.Is(err, breaker.ErrOpen) {
		t.Fatalf("AcquireAt(now) = %v, want ErrOpen", err)
	}
	if n := p.InFlight(); n != 0 {
		t.Fatalf("refused AcquireAt left %d in flight", n)
	}
	l, err := p.AcquireAt(clk.Now().Add(time.Second))
	if err != nil || !l.IsProbe() {
		t.Fatalf("AcquireAt(end of the open window) = %v, probe %v; want a probe", err, l.IsProbe())
	}
	if n := p.InFlight(); n != 1 {
		t.Fatalf("in flight %d, want 1", n)
	}
	l.Done(nil)
	if n, st := p.InFlight(), p.Breaker().State(); n != 0 || st != breaker.StateClosed {
		t.Fatalf("after the probe succeeded: %d in flight, %v; want 0, closed", n, st)
	}
}

// TestIdlePartnerMemory: without Override, every partner's breaker shares
// the registry's template configuration (breaker.Template) instead of
// holding a copy: 10,000 idle partners hold at most 800 bytes each (about
// 1,070 with a copy each), and start no goroutine.
func TestIdlePartnerMemory(t *testing.T) {
	const n = 10_000
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("partner-%08d.example", i)
	}
	r, err := partner.New(partner.Config{MaxPartners: n})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	g0 := runtime.NumGoroutine()
	for _, k := range keys {
		if _, err := r.Get(k); err != nil {
			t.Fatal(err)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	per := float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / n
	t.Logf("%.0f B per idle partner", per)
	if per > 800 {
		t.Errorf("%.0f B per idle partner, want <= 800", per)
	}
	if g := runtime.NumGoroutine() - g0; g > 0 {
		t.Errorf("%d goroutines for %d idle partners", g, n)
	}
	runtime.KeepAlive(keys)
}
