package retryqueue_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/floodgate-go/floodgate/internal/natstest"
	"github.com/floodgate-go/floodgate/retryqueue"
	"golang.org/x/time/rate"
)

// partner is a delivery target with a capacity: calls beyond it fail, and
// the handler diverts them again with ReasonFailure, as the middleware does.
type partner struct {
	q   *retryqueue.Queue
	lim *rate.Limiter

	mu        sync.Mutex
	delivered []string
	failed    int
}

func (p *partner) handler(m *message.Message) ([]*message.Message, error) {
	if !p.lim.Allow() {
		p.mu.Lock()
		p.failed++
		p.mu.Unlock()
		return nil, p.q.Divert(m.Context(), m, retryqueue.ReasonFailure, errors.New("HTTP 503: over capacity"))
	}
	p.mu.Lock()
	p.delivered = append(p.delivered, m.UUID)
	p.mu.Unlock()
	return nil, nil
}

// The drain rate seeks the partner's capacity: it grows from a low start
// while deliveries are clean, backs off when the partner starts failing,
// and stays around the capacity, not far above it.
func TestDrainRateSeeksCapacity(t *testing.T) {
	e := newEnv(t, natstest.URL(t), func(c *retryqueue.Config) {
		c.Backoff = func(int) time.Duration { return 50 * time.Millisecond }
		c.MaxAttempts = 1000
	})
	const n, capacity = 500, 150.0
	seed(t, e, n)
	p := &partner{q: e.q, lim: rate.NewLimiter(capacity, 10)}
	g := &gate{}
	g.budget.Store(1 << 30)
	d := startDrainer(t, e, retryqueue.DrainerConfig{
		Handler: p.handler, Gate: g, Rate: 20, AdjustInterval: 100 * time.Millisecond,
		Increase: 10, PollInterval: 10 * time.Millisecond,
	})
	var peak float64
	var rates []float64
	// Count unique deliveries: an unconfirmed diversion or ack can deliver
	// a message twice, and a handler may still run for a queued copy.
	unique := func() int {
		p.mu.Lock()
		defer p.mu.Unlock()
		seen := map[string]bool{}
		for _, id := range p.delivered {
			seen[id] = true
		}
		return len(seen)
	}
	natstest.Eventually(t, 30*time.Second, func() bool {
		r := d.Rate()
		peak = max(peak, r)
		rates = append(rates, r)
		return unique() == n
	}, "all delivered")
	p.mu.Lock()
	failed := p.failed
	p.mu.Unlock()
	t.Logf("peak rate %.0f/s, final %.0f/s, backoffs %d, partner failures %d, stats %+v", peak, d.Rate(), d.Stats().Backoffs, failed, d.Stats())
	if peak < capacity*0.8 {
		t.Errorf("peak drain rate %.0f/s never came near the capacity %v/s", peak, capacity)
	}
	if d.Stats().Backoffs == 0 || d.Stats().Failures == 0 {
		t.Errorf("no backoff seen (stats %+v) although the partner failed %d calls", d.Stats(), failed)
	}
	if peak > capacity*3 {
		t.Errorf("peak drain rate %.0f/s: far beyond the capacity %v/s", peak, capacity)
	}
	if failed > n/2 {
		t.Errorf("%d failed calls for %d messages: the drain kept overloading the partner", failed, n)
	}
}

// Observe feeds live outcomes to the control: live failures make the
// drainer back off even though its own deliveries are clean.
func TestObserveLiveFailuresBackOff(t *testing.T) {
	e := newEnv(t, natstest.URL(t), nil)
	seed(t, e, 300)
	g := &gate{}
	g.budget.Store(1 << 30)
	rec := &recorder{}
	d := startDrainer(t, e, retryqueue.DrainerConfig{Handler: rec.handler(nil), Gate: g, Rate: 100, MinRate: 5,
		AdjustInterval: 50 * time.Millisecond, PollInterval: 10 * time.Millisecond})
	natstest.Eventually(t, 10*time.Second, func() bool {
		d.Observe("live-"+fmt.Sprint(time.Now().UnixNano()), true, time.Millisecond)
		return d.Rate() <= 10
	}, "rate backed off under live failures, now %v", natstest.Now(func() any { return d.Rate() }))
	if d.Stats().Backoffs < 3 {
		t.Fatalf("backoffs = %d", d.Stats().Backoffs)
	}
}

// Observe skips the outcome of a message the drainer is delivering right
// now (the middleware's event hook reports drained calls too, and the
// drainer counts its own), and counts a live one's.
func TestObserveSkipsDrainedMessages(t *testing.T) {
	e := newEnv(t, natstest.URL(t), nil)
	seed(t, e, 20)
	g := &gate{}
	g.budget.Store(1 << 30)
	var dp atomic.Pointer[retryqueue.Drainer]
	ready := make(chan struct{})
	rec := &recorder{}
	d := startDrainer(t, e, retryqueue.DrainerConfig{Gate: g, Rate: 1000, FixedRate: true, PollInterval: 10 * time.Millisecond,
		Handler: rec.handler(func(m *message.Message) error {
			<-ready
			dp.Load().Observe(m.UUID, true, time.Millisecond) // a drained message: skipped
			return nil
		})})
	dp.Store(d)
	close(ready)
	natstest.Eventually(t, 10*time.Second, func() bool { return d.Stats().Drained == 20 }, "drained, stats %+v", natstest.Now(func() any { return d.Stats() }))
	if rec.count() < 20 {
		t.Fatalf("%d calls", rec.count())
	}
	if f := d.Stats().Failures; f != 0 {
		t.Fatalf("Failures = %d after Observe of drained messages only, want 0", f)
	}
	d.Observe("live-1", true, time.Millisecond)
	if f := d.Stats().Failures; f != 1 {
		t.Fatalf("Failures = %d after one live failure, want 1", f)
	}
}

// With per-key ordering, a key's messages reach the handler in order even
// when one of them fails and goes back to the retry stream; other keys are
// not held up; a live message of a key with backlog is held, one of a key
// without is not, and a drained message never is.
func TestPerKeyOrdering(t *testing.T) {
	e := newEnv(t, natstest.URL(t), func(c *retryqueue.Config) {
		c.OrderingKey = func(m *message.Message) string { return m.Metadata.Get("key") }
		c.Backoff = func(int) time.Duration { return 300 * time.Millisecond }
	})
	ctx := testCtx(t)
	for i := 1; i <= 6; i++ {
		for _, k := range []string{"A", "B"} {
			m := message.NewMessage(fmt.Sprintf("%s%d", k, i), nil)
			m.Metadata.Set("key", k)
			if err := e.q.Divert(ctx, m, retryqueue.ReasonOpen, errOpen); err != nil {
				t.Fatal(err)
			}
		}
	}
	live := func(k string) *message.Message {
		m := message.NewMessage("live-"+k, nil)
		m.Metadata.Set("key", k)
		return m
	}
	if !e.q.Holds(live("A")) || e.q.Holds(live("C")) || e.q.Holds(message.NewMessage("nokey", nil)) {
		t.Fatal("Holds: want A held, C and unkeyed not")
	}
	if e.q.HeldKeys() != 2 {
		t.Fatalf("HeldKeys = %d, want 2", e.q.HeldKeys())
	}

	var mu sync.Mutex
	var order []string
	failedOnce := false
	handler := func(m *message.Message) ([]*message.Message, error) {
		if !retryqueue.FromDrain(m.Context()) || e.q.Holds(m) {
			t.Errorf("%s: drained message must be marked and never held", m.UUID)
		}
		mu.Lock()
		fail := m.UUID == "A2" && !failedOnce
		failedOnce = failedOnce || fail
		mu.Unlock()
		if fail {
			return nil, e.q.Divert(m.Context(), m, retryqueue.ReasonFailure, errors.New("HTTP 503"))
		}
		mu.Lock()
		order = append(order, m.UUID)
		mu.Unlock()
		return nil, nil
	}
	g := &gate{}
	g.budget.Store(1 << 30)
	d := startDrainer(t, e, retryqueue.DrainerConfig{Handler: handler, Gate: g, Rate: 1000, Burst: 12, FixedRate: true, PollInterval: 20 * time.Millisecond})
	natstest.Eventually(t, 15*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return len(order) == 12 }, "12 delivered")
	mu.Lock()
	var a, b []string
	for _, id := range order {
		if id[0] == 'A' {
			a = append(a, id)
		} else {
			b = append(b, id)
		}
	}
	mu.Unlock()
	if want := []string{"A1", "A2", "A3", "A4", "A5", "A6"}; !slices.Equal(a, want) {
		t.Errorf("key A order %v, want %v", a, want)
	}
	if want := []string{"B1", "B2", "B3", "B4", "B5", "B6"}; !slices.Equal(b, want) {
		t.Errorf("key B order %v, want %v", b, want)
	}
	if d.Stats().Deferred == 0 {
		t.Error("no message was held back behind A2")
	}
	natstest.Eventually(t, 30*time.Second, func() bool { return e.q.HeldKeys() == 0 }, "index empty after the drain")
	if e.q.Holds(live("A")) {
		t.Fatal("A still held after its backlog drained")
	}
}

// The ordering index survives a restart of the process: a new Queue and
// Drainer rebuild it from the retry stream before draining.
func TestOrderingIndexRebuilt(t *testing.T) {
	key := func(m *message.Message) string { return m.Metadata.Get("key") }
	e := newEnv(t, natstest.URL(t), func(c *retryqueue.Config) { c.OrderingKey = key })
	for i := range 3 {
		m := message.NewMessage(fmt.Sprint("k", i), nil)
		m.Metadata.Set("key", "K")
		if err := e.q.Divert(testCtx(t), m, retryqueue.ReasonOpen, errOpen); err != nil {
			t.Fatal(err)
		}
	}
	q2, err := retryqueue.New(e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	e2 := e
	e2.q = q2
	startDrainer(t, e2, retryqueue.DrainerConfig{Handler: (&recorder{}).handler(nil), Gate: &gate{}, PollInterval: 10 * time.Millisecond})
	m := message.NewMessage("live", nil)
	m.Metadata.Set("key", "K")
	natstest.Eventually(t, 30*time.Second, func() bool { return q2.Holds(m) }, "index rebuilt")
}

// Status reports the backlog, pause, measured rate and time to empty.
func TestStatus(t *testing.T) {
	e := newEnv(t, natstest.URL(t), nil)
	seed(t, e, 60)
	g := &gate{}
	d := startDrainer(t, e, retryqueue.DrainerConfig{Handler: (&recorder{}).handler(nil), Gate: g, Rate: 40, FixedRate: true,
		AdjustInterval: 100 * time.Millisecond, PollInterval: 10 * time.Millisecond})
	natstest.Eventually(t, 30*time.Second, func() bool { return d.Stats().GateClosed > 2 }, "paused")
	s, err := d.Status(context.Background())
	if err != nil || s.Backlog != 60 || !s.Paused || s.ETA != -1 || s.Rate != 40 {
		t.Fatalf("paused status = %+v, %v", s, err)
	}
	g.budget.Store(1 << 30)
	d.Wake()
	natstest.Eventually(t, 10*time.Second, func() bool { return d.Stats().Drained >= 30 }, "half drained")
	s, err = d.Status(context.Background())
	if err != nil || s.Paused || s.DrainedPerSec < 20 || s.DrainedPerSec > 60 || s.ETA <= 0 || s.ETA > 3*time.Second {
		t.Fatalf("draining status = %+v, %v; want ~40/s and ETA ~0.75s", s, err)
	}
	// Drained counts a message once its ack is confirmed, which can be
	// just after the server reports the backlog empty.
	natstest.Eventually(t, 10*time.Second, func() bool {
		s, _ = d.Status(context.Background())
		return s.Backlog == 0 && s.Drained >= 60
	}, "drained")
	if s.ETA != 0 || s.Drained != 60 {
		t.Fatalf("final status = %+v", s)
	}
}

// MaxRate bounds the adaptive drain rate: with clean deliveries it grows to
// MaxRate and no further, and the drain never runs faster.
func TestDrainMaxRate(t *testing.T) {
	e := newEnv(t, natstest.URL(t), nil)
	seed(t, e, 80)
	g := &gate{}
	g.budget.Store(1 << 30)
	rec := &recorder{}
	d := startDrainer(t, e, retryqueue.DrainerConfig{Handler: rec.handler(nil), Gate: g, Rate: 10, MaxRate: 30,
		AdjustInterval: 50 * time.Millisecond, PollInterval: 10 * time.Millisecond})
	peak := 0.0
	natstest.Eventually(t, 20*time.Second, func() bool { peak = max(peak, d.Rate()); return d.Stats().Drained == 80 }, "80 drained")
	if peak != 30 {
		t.Errorf("peak rate %v, want it to reach MaxRate 30 and stop there", peak)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for i := range rec.at {
		n := 0
		for j := i; j < len(rec.at) && rec.at[j].Sub(rec.at[i]) < time.Second; j++ {
			n++
		}
		if n > 30+3 { // rate + burst
			t.Fatalf("%d deliveries within 1s from #%d: faster than MaxRate 30/s", n, i)
		}
	}
}

// The drain pauses at once when the gate closes (the breaker left closed):
// no further fetch after the round in progress.
func TestDrainPausesWhenGateCloses(t *testing.T) {
	e := newEnv(t, natstest.URL(t), nil)
	seed(t, e, 200)
	g := &gate{}
	g.budget.Store(1 << 30)
	d := startDrainer(t, e, retryqueue.DrainerConfig{Handler: (&recorder{}).handler(nil), Gate: g, Rate: 40, FixedRate: true, PollInterval: 10 * time.Millisecond})
	natstest.Eventually(t, 10*time.Second, func() bool { return d.Stats().Drained >= 20 }, "draining")
	g.budget.Store(0)
	closedAt := d.Stats().GateClosed
	natstest.Eventually(t, 30*time.Second, func() bool { return d.Stats().GateClosed > closedAt }, "gate seen closed")
	fetched := d.Stats().Fetched
	natstest.Eventually(t, 30*time.Second, func() bool { return d.Stats().GateClosed > closedAt+10 }, "ten more looks at the closed gate")
	if got := d.Stats().Fetched; got != fetched {
		t.Fatalf("fetched %d more while the gate was closed", got-fetched)
	}
	s, err := d.Status(context.Background())
	if err != nil || !s.Paused || s.Backlog == 0 {
		t.Fatalf("status %+v, %v; want paused with backlog", s, err)
	}
	g.budget.Store(1 << 30)
	d.Wake()
	natstest.Eventually(t, 15*time.Second, func() bool { return d.Stats().Drained == 200 }, "resumed and drained")
}
