package retryqueue_test

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

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/floodgate-go/floodgate/internal/natstest"
	"github.com/floodgate-go/floodgate/retryqueue"
	"github.com/nats-io/nats.go/jetstream"
)

// openGate admits everything.
var openGate = retryqueue.GateFunc(func() int { return 1 << 30 })

// divertTo diverts n messages to partner key's route through q, each with
// the key as payload, from a few goroutines, and returns their UUIDs.
func divertTo(t *testing.T, q *retryqueue.Queue, key string, n int) []string {
	t.Helper()
	ids := make([]string, n)
	var wg sync.WaitGroup
	var failed atomic.Value
	const workers = 8
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n; i += workers {
				id := fmt.Sprintf("%s#%d", key, i)
				if len(id) > 64 {
					id = fmt.Sprintf("long-%d-%d", len(key), i)
				}
				ids[i] = id
				if _, err := q.RouteTo(context.Background(), message.NewMessage(id, []byte(key)), key, retryqueue.ReasonOpen, errOpen); err != nil {
					failed.Store(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err, ok := failed.Load().(error); ok {
		t.Fatal(err)
	}
	return ids
}

// deliveries records what a partner drainer's handler received.
type deliveries struct {
	mu       sync.Mutex
	count    map[string]int // by UUID
	byKey    map[string]int // by the partner the message was for (payload)
	wrong    []string       // messages drained for another partner than theirs
	inflight int
	peak     int
}

func newDeliveries() *deliveries {
	return &deliveries{count: map[string]int{}, byKey: map[string]int{}}
}

// handler records each message; inner, if set, runs before it returns.
func (r *deliveries) handler(inner func(*message.Message)) message.HandlerFunc {
	return func(m *message.Message) ([]*message.Message, error) {
		k, ok := retryqueue.DrainedPartner(m.Context(), m)
		r.mu.Lock()
		r.count[m.UUID]++
		r.byKey[string(m.Payload)]++
		if !ok || k != string(m.Payload) {
			r.wrong = append(r.wrong, fmt.Sprintf("%s drained for %.20q (ok %v), its partner is %.20q", m.UUID, k, ok, m.Payload))
		}
		r.inflight++
		r.peak = max(r.peak, r.inflight)
		r.mu.Unlock()
		if inner != nil {
			inner(m)
		}
		r.mu.Lock()
		r.inflight--
		r.mu.Unlock()
		return nil, nil
	}
}

func (r *deliveries) distinct() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.count)
}

func (r *deliveries) forKey(key string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.byKey[key]
}

// check fails the test if a message went to another partner than its own,
// or one of ids was not delivered; it returns the duplicates.
func (r *deliveries) check(t *testing.T, ids []string) (dups int) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, w := range r.wrong {
		t.Errorf("misdelivered: %s", w)
	}
	for _, id := range ids {
		switch n := r.count[id]; {
		case n == 0:
			t.Errorf("%s never delivered", id)
		case n > 1:
			dups += n - 1
		}
	}
	return dups
}

// pdTemplate is a fast per-partner drainer template for tests.
func pdTemplate() retryqueue.DrainerConfig {
	return retryqueue.DrainerConfig{Rate: 500, PollInterval: 20 * time.Millisecond, AckWait: 10 * time.Second}
}

func startPartnerDrainer(t *testing.T, e env, cfg retryqueue.PartnerDrainerConfig) *retryqueue.PartnerDrainer {
	t.Helper()
	cfg.JetStream, cfg.Queue = e.js, e.q
	if cfg.Drainer.Rate == 0 {
		cfg.Drainer = pdTemplate()
	}
	pd, err := retryqueue.NewPartnerDrainer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	natstest.Run(t, pd.Run)
	return pd
}

func subjectCount(t *testing.T, e env, key string) uint64 {
	t.Helper()
	st, err := e.js.Stream(testCtx(t), e.q.RetryTopic())
	if err != nil {
		t.Fatal(err)
	}
	subj := retryqueue.RouteSubject(e.q.RetryTopic(), e.q.Service(), key)
	info, err := st.Info(testCtx(t), jetstream.WithSubjectFilter(subj))
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Subjects[subj]
}

func consumerCount(t *testing.T, e env) int {
	t.Helper()
	st, err := e.js.Stream(testCtx(t), e.q.RetryTopic())
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	names := st.ConsumerNames(testCtx(t))
	for range names.Name() {
		n++
	}
	if err := names.Err(); err != nil {
		t.Fatal(err)
	}
	return n
}

// An open partner's big backlog is never fetched, and a healthy partner's
// backlog drains fully beside it.
func TestPartnerDrainNoHeadOfLineBlocking(t *testing.T) {
	e := newEnv(t, natstest.URL(t), nil)
	divertTo(t, e.q, "A", 2000)
	closed := retryqueue.GateFunc(func() int { return 0 })
	rec := newDeliveries()
	pd := startPartnerDrainer(t, e, retryqueue.PartnerDrainerConfig{
		Handler: rec.handler(nil),
		Gate: func(key string) retryqueue.Gate {
			if key == "A" {
				return closed
			}
			return openGate
		},
		MaxInFlight: 8,
	})
	natstest.Eventually(t, 20*time.Second, func() bool { return pd.HasBacklog("A") }, "A's backlog discovered")
	ids := divertTo(t, e.q, "B", 50)
	natstest.Eventually(t, 60*time.Second, func() bool { return rec.distinct() == 50 && subjectCount(t, e, "B") == 0 }, "B's 50 drained")
	rec.check(t, ids)
	if n := rec.forKey("A"); n != 0 {
		t.Fatalf("%d of A's messages reached the handler while A's gate admitted nothing", n)
	}
	// A's drain takes no turn while its gate is closed, so it never
	// creates its consumer; if one exists, it has delivered nothing.
	c, err := e.js.Consumer(testCtx(t), e.q.RetryTopic(), retryqueue.ConsumerName(e.q.Service(), "A"))
	switch {
	case errors.Is(err, jetstream.ErrConsumerNotFound):
	case err != nil:
		t.Fatalf("A's consumer: %v", err)
	default:
		info, err := c.Info(testCtx(t))
		if err != nil {
			t.Fatal(err)
		}
		if info.Delivered.Consumer != 0 || info.NumAckPending != 0 || info.NumPending != 2000 {
			t.Fatalf("A's consumer: delivered %d, ack pending %d, pending %d; want 0, 0, 2000 (never fetched)", info.Delivered.Consumer, info.NumAckPending, info.NumPending)
		}
	}
	if n := subjectCount(t, e, "A"); n != 2000 {
		t.Fatalf("A's subject holds %d, want 2000", n)
	}
	if !pd.HasBacklog("A") {
		t.Fatal("HasBacklog(A) = false with 2000 in its backlog")
	}
	natstest.Eventually(t, 20*time.Second, func() bool { return !pd.HasBacklog("B") }, "B's drain stopped once empty")
}

// Once every backlog is drained, the partners' goroutines and consumers are
// gone; waking an idle partner starts a drain that stops again.
func TestPartnerDrainIdleCostsNothing(t *testing.T) {
	e := newEnv(t, natstest.URL(t), nil)
	release := make(chan struct{})
	var block atomic.Bool
	var held atomic.Int32
	rec := newDeliveries()
	pd := startPartnerDrainer(t, e, retryqueue.PartnerDrainerConfig{
		Handler: rec.handler(func(*message.Message) {
			if block.Load() {
				held.Add(1)
				<-release
			}
		}),
		Gate:             func(string) retryqueue.Gate { return openGate },
		DiscoverInterval: 50 * time.Millisecond,
	})
	// Baseline: the PartnerDrainer runs, no partner has a backlog, and the
	// connections' lazily created subscriptions exist (one drain done).
	warm := divertTo(t, e.q, "warm-up", 1)
	natstest.Eventually(t, 20*time.Second, func() bool { return rec.distinct() == 1 && len(pd.Partners()) == 0 }, "warm-up drained")
	baseline := runtime.NumGoroutine()
	block.Store(true)

	keys := []string{"p1", "p2", "p3"}
	var ids []string
	for _, k := range keys {
		ids = append(ids, divertTo(t, e.q, k, 20)...)
	}
	natstest.Eventually(t, 20*time.Second, func() bool { return consumerCount(t, e) == 3 && held.Load() >= 3 }, "three partners draining")
	if got := len(pd.Partners()); got != 3 {
		t.Fatalf("Partners() lists %d while draining, want 3", got)
	}
	if n := runtime.NumGoroutine(); n < baseline+3 {
		t.Fatalf("goroutines while draining = %d, want >= baseline %d + 3", n, baseline)
	}
	close(release)
	natstest.Eventually(t, 30*time.Second, func() bool { return rec.distinct() == 61 }, "60 drained")
	rec.check(t, append(ids, warm...))
	natstest.Eventually(t, 20*time.Second, func() bool { return consumerCount(t, e) == 0 && len(pd.Partners()) == 0 }, "consumers deleted and drains stopped")
	for _, k := range keys {
		if pd.HasBacklog(k) {
			t.Errorf("HasBacklog(%s) after its drain", k)
		}
	}
	natstest.Eventually(t, 20*time.Second, func() bool { return runtime.NumGoroutine() <= baseline }, "goroutines back to baseline %d (now %d)", baseline, natstest.Now(func() any { return runtime.NumGoroutine() }))

	pd.Wake("never-diverted")
	natstest.Eventually(t, 20*time.Second, func() bool { return !pd.HasBacklog("never-diverted") && consumerCount(t, e) == 0 }, "a woken idle partner's drain stops again")
}

// Messages another Queue instance of the service diverted (another
// replica, or before a restart) are discovered and drained, hashed tokens
// included.
func TestPartnerDrainDiscoversOtherReplicas(t *testing.T) {
	e := newEnv(t, natstest.URL(t), nil)
	other, err := retryqueue.New(e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("k", 4096)
	var ids []string
	for _, k := range []string{"p1", "a.b *>", long} {
		ids = append(ids, divertTo(t, other, k, 10)...)
	}
	rec := newDeliveries()
	startPartnerDrainer(t, e, retryqueue.PartnerDrainerConfig{
		Handler:          rec.handler(nil),
		Gate:             func(string) retryqueue.Gate { return openGate },
		DiscoverInterval: 100 * time.Millisecond,
	})
	natstest.Eventually(t, 30*time.Second, func() bool { return rec.distinct() == 30 }, "30 from before Run drained (now %d)", natstest.Now(func() any { return rec.distinct() }))
	ids = append(ids, divertTo(t, other, "late", 10)...) // while running, not through its Queue
	natstest.Eventually(t, 30*time.Second, func() bool { return rec.distinct() == 40 }, "40 drained (now %d)", natstest.Now(func() any { return rec.distinct() }))
	if dups := rec.check(t, ids); dups != 0 {
		t.Errorf("%d duplicates", dups)
	}
	// The handler has run for all 40; their acks land just after.
	natstest.Eventually(t, 30*time.Second, func() bool { return streamCount(t, e.js, e.q.RetryTopic()) == 0 },
		"retry stream empty after the drain (holds %d)", natstest.Now(func() any { return streamCount(t, e.js, e.q.RetryTopic()) }))
}

// A partner's consumer deleted under its drainer (as another replica does
// when it finds the backlog empty) loses nothing: the drainer creates it
// again and every message is delivered.
func TestPartnerDrainConsumerDeletedMidDrain(t *testing.T) {
	e := newEnv(t, natstest.URL(t), nil)
	ids := divertTo(t, e.q, "P", 200)
	var calls atomic.Int32
	var deleted atomic.Bool
	name := retryqueue.ConsumerName(e.q.Service(), "P")
	rec := newDeliveries()
	startPartnerDrainer(t, e, retryqueue.PartnerDrainerConfig{
		Handler: rec.handler(func(*message.Message) {
			if calls.Add(1) == 50 {
				if err := e.js.DeleteConsumer(context.Background(), e.q.RetryTopic(), name); err != nil {
					t.Errorf("delete consumer: %v", err)
					return
				}
				deleted.Store(true)
			}
		}),
		Gate: func(string) retryqueue.Gate { return openGate },
	})
	natstest.Eventually(t, 60*time.Second, func() bool { return rec.distinct() == 200 && subjectCount(t, e, "P") == 0 }, "200 drained (now %d)", natstest.Now(func() any { return rec.distinct() }))
	if !deleted.Load() {
		t.Fatal("the consumer was never deleted mid-drain")
	}
	t.Logf("duplicates after the consumer was deleted: %d", rec.check(t, ids))
}

// Many partners drain at once, each message once and to its own partner,
// within the shared in-flight bound.
func TestPartnerDrainManyPartners(t *testing.T) {
	e := newEnv(t, natstest.URL(t), nil)
	const partners, each, bound = 100, 5, 16
	var ids []string
	for i := range partners {
		ids = append(ids, divertTo(t, e.q, fmt.Sprintf("partner-%03d", i), each)...)
	}
	rec := newDeliveries()
	var pd *retryqueue.PartnerDrainer
	var over atomic.Int32
	pd = startPartnerDrainer(t, e, retryqueue.PartnerDrainerConfig{
		Handler: rec.handler(func(*message.Message) {
			if pd.InFlight() > bound {
				over.Add(1)
			}
			time.Sleep(2 * time.Millisecond) // a partner call takes a while: handlers overlap

		}),
		Gate:        func(string) retryqueue.Gate { return openGate },
		MaxInFlight: bound,
	})
	natstest.Eventually(t, 90*time.Second, func() bool { return rec.distinct() == partners*each }, "%d drained (now %d)", partners*each, natstest.Now(func() any { return rec.distinct() }))
	if dups := rec.check(t, ids); dups != 0 {
		t.Errorf("%d duplicates", dups)
	}
	rec.mu.Lock()
	peak := rec.peak
	rec.mu.Unlock()
	if peak > bound || over.Load() > 0 {
		t.Fatalf("in flight peaked at %d handlers (%d looks above the bound), want <= MaxInFlight %d", peak, over.Load(), bound)
	}
	natstest.Eventually(t, 30*time.Second, func() bool { return consumerCount(t, e) == 0 }, "consumers deleted")
}

// Partners with a backlog take turns on MaxDraining lanes: a partner
// waiting for its turn holds no consumer, so the consumers on the retry
// stream (each costs the server work on every ack) are bounded by the
// lanes and the partners whose handlers still run (at most MaxInFlight),
// not by the number of partners.
func TestPartnerDrainBoundsLiveConsumers(t *testing.T) {
	e := newEnv(t, natstest.URL(t), nil)
	const partners, each, lanes, bound = 20, 5, 2, 4
	var ids []string
	for i := range partners {
		ids = append(ids, divertTo(t, e.q, fmt.Sprintf("partner-%02d", i), each)...)
	}
	release := make(chan struct{})
	var held atomic.Int32
	rec := newDeliveries()
	pd := startPartnerDrainer(t, e, retryqueue.PartnerDrainerConfig{
		Handler: rec.handler(func(*message.Message) {
			held.Add(1)
			<-release
		}),
		Gate:        func(string) retryqueue.Gate { return openGate },
		MaxInFlight: bound,
		MaxDraining: lanes,
	})
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	t.Cleanup(unblock) // before the drainer's: a failed test does not hang in cleanup
	// Every partner's drain runs and the handlers are full: nothing moves
	// until they are released.
	natstest.Eventually(t, 30*time.Second, func() bool { return len(pd.Partners()) == partners && held.Load() == bound },
		"%d partners draining (now %d), %d handlers held (now %d)", partners, natstest.Now(func() any { return len(pd.Partners()) }), bound, natstest.Now(func() any { return held.Load() }))
	for range 5 {
		if n := consumerCount(t, e); n > lanes+bound {
			t.Fatalf("%d consumers on the retry stream with %d partners draining, want <= MaxDraining %d + MaxInFlight %d", n, partners, lanes, bound)
		}
		time.Sleep(20 * time.Millisecond) // sample again; not a timing assertion
	}
	unblock()
	natstest.Eventually(t, 60*time.Second, func() bool { return rec.distinct() == partners*each }, "%d drained (now %d)", partners*each, natstest.Now(func() any { return rec.distinct() }))
	if dups := rec.check(t, ids); dups != 0 {
		t.Logf("%d duplicates", dups)
	}
	natstest.Eventually(t, 30*time.Second, func() bool { return consumerCount(t, e) == 0 && len(pd.Partners()) == 0 }, "consumers deleted and drains stopped")
}

func TestPartnerDrainerConfigValidate(t *testing.T) {
	e := env{js: nopJetStream{}}
	q, err := retryqueue.New(retryqueue.Config{Publisher: nopPublisher{}, JetStream: nopJetStream{}, Service: "svc", RetryTopic: "r", DeadLetterTopic: "d"})
	if err != nil {
		t.Fatal(err)
	}
	ordered, err := retryqueue.New(retryqueue.Config{Publisher: nopPublisher{}, JetStream: nopJetStream{}, Service: "svc", RetryTopic: "r", DeadLetterTopic: "d", OrderingKey: func(*message.Message) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	h := func(*message.Message) ([]*message.Message, error) { return nil, nil }
	g := func(string) retryqueue.Gate { return openGate }
	valid := retryqueue.PartnerDrainerConfig{JetStream: e.js, Queue: q, Handler: h, Gate: g}
	if err := valid.Validate(); err != nil {
		t.Fatalf("valid config: %v", err)
	}
	for _, tc := range []struct {
		mod  func(*retryqueue.PartnerDrainerConfig)
		want string
	}{
		{func(c *retryqueue.PartnerDrainerConfig) { c.JetStream = nil }, "JetStream is required"},
		{func(c *retryqueue.PartnerDrainerConfig) { c.Queue = nil }, "Queue is required"},
		{func(c *retryqueue.PartnerDrainerConfig) { c.Queue = ordered }, "OrderingKey"},
		{func(c *retryqueue.PartnerDrainerConfig) { c.Handler = nil }, "Handler is required"},
		{func(c *retryqueue.PartnerDrainerConfig) { c.Gate = nil }, "Gate is required"},
		{func(c *retryqueue.PartnerDrainerConfig) { c.MaxInFlight = -1 }, "MaxInFlight must be in 1..100000"},
		{func(c *retryqueue.PartnerDrainerConfig) { c.MaxInFlight = 100001 }, "MaxInFlight must be in 1..100000"},
		{func(c *retryqueue.PartnerDrainerConfig) { c.KeepConsumers = -2 }, "KeepConsumers must be in -1..100000"},
		{func(c *retryqueue.PartnerDrainerConfig) { c.KeepConsumers = 100001 }, "KeepConsumers must be in -1..100000"},
		{func(c *retryqueue.PartnerDrainerConfig) { c.DiscoverInterval = time.Millisecond }, "DiscoverInterval must be >= 10ms"},
		{func(c *retryqueue.PartnerDrainerConfig) { c.MaxDraining = -1 }, "MaxDraining must be in 1..10000"},
		{func(c *retryqueue.PartnerDrainerConfig) { c.MaxDraining = 10001 }, "MaxDraining must be in 1..10000"},
		{func(c *retryqueue.PartnerDrainerConfig) { c.ServiceConsumerFrom = 1 }, "ServiceConsumerFrom must be -1 or in 2..100000"},
		{func(c *retryqueue.PartnerDrainerConfig) { c.ServiceConsumerFrom = -2 }, "ServiceConsumerFrom must be -1 or in 2..100000"},
		{func(c *retryqueue.PartnerDrainerConfig) { c.ServiceConsumerFrom = 100001 }, "ServiceConsumerFrom must be -1 or in 2..100000"},
		{func(c *retryqueue.PartnerDrainerConfig) { c.Drainer.Consumer = "x" }, "Drainer.Consumer must be empty"},
		{func(c *retryqueue.PartnerDrainerConfig) { c.Drainer.AllPartners = true }, "Drainer.AllPartners must be false"},
		{func(c *retryqueue.PartnerDrainerConfig) { c.Drainer.Gate = openGate }, "Drainer.Gate must be unset"},
		{func(c *retryqueue.PartnerDrainerConfig) { c.Drainer.MaxInFlight = 10001 }, "Drainer.MaxInFlight must be in 1..10000"},
		{func(c *retryqueue.PartnerDrainerConfig) { c.Drainer.Rate = -1 }, "Drainer.Rate must be > 0"},
	} {
		c := valid
		tc.mod(&c)
		err := c.Validate()
		if !errors.Is(err, retryqueue.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate() = %v, want ErrInvalidConfig naming %q", err, tc.want)
		}
		if _, err := retryqueue.NewPartnerDrainer(c); err == nil || !strings.HasPrefix(err.Error(), "invalid config: ") {
			t.Errorf("NewPartnerDrainer() = %v, want an invalid config error", err)
		}
	}
}
