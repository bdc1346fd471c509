package retryqueue_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/floodgate-go/floodgate/internal/natstest"
	fgpartner "github.com/floodgate-go/floodgate/partner"
	"github.com/floodgate-go/floodgate/retryqueue"
)

// gate is a Gate the test sets.
type gate struct{ budget atomic.Int64 }

func (g *gate) Budget() int { return int(g.budget.Load()) }

func seed(t *testing.T, e env, n int) []string {
	t.Helper()
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("m%03d", i)
		if err := e.q.Divert(context.Background(), message.NewMessage(ids[i], []byte(ids[i])), retryqueue.ReasonOpen, errOpen); err != nil {
			t.Fatal(err)
		}
	}
	return ids
}

// startDrainer runs d until the test ends and waits for its consumer.
func startDrainer(t *testing.T, e env, cfg retryqueue.DrainerConfig) *retryqueue.Drainer {
	t.Helper()
	cfg.JetStream, cfg.Queue = e.js, e.q
	d, err := retryqueue.NewDrainer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	natstest.Run(t, d.Run)
	natstest.Eventually(t, 10*time.Second, func() bool { _, err := d.Backlog(context.Background()); return err == nil }, "drain consumer created")
	return d
}

type recorder struct {
	mu        sync.Mutex
	calls     []string
	at        []time.Time
	inflight  int
	peak      int
	fromDrain bool
}

func (r *recorder) handler(inner func(*message.Message) error) message.HandlerFunc {
	return func(m *message.Message) ([]*message.Message, error) {
		r.mu.Lock()
		r.calls = append(r.calls, m.UUID)
		r.at = append(r.at, time.Now())
		r.inflight++
		r.peak = max(r.peak, r.inflight)
		r.fromDrain = retryqueue.FromDrain(m.Context())
		r.mu.Unlock()
		var err error
		if inner != nil {
			err = inner(m)
		}
		r.mu.Lock()
		r.inflight--
		r.mu.Unlock()
		return nil, err
	}
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.calls)
}

// While the gate admits nothing, nothing is fetched; when it admits, the
// whole backlog goes through the handler in order and is acked.
func TestDrainOnlyWhileGateAdmits(t *testing.T) {
	e := newEnv(t, natstest.URL(t), nil)
	ids := seed(t, e, 20)
	g := &gate{}
	rec := &recorder{}
	d := startDrainer(t, e, retryqueue.DrainerConfig{Handler: rec.handler(nil), Gate: g, Rate: 1000, Burst: 5, MaxInFlight: 5, PollInterval: 20 * time.Millisecond})

	natstest.Eventually(t, 30*time.Second, func() bool { return d.Stats().GateClosed >= 5 }, "drainer polled the closed gate")
	if s := d.Stats(); s.Fetched != 0 || rec.count() != 0 {
		t.Fatalf("gate 0: fetched %d, handled %d; want 0, 0", s.Fetched, rec.count())
	}
	if n, err := d.Backlog(context.Background()); err != nil || n != 20 {
		t.Fatalf("backlog = %d, %v; want 20", n, err)
	}

	g.budget.Store(1 << 30)
	d.Wake()
	natstest.Eventually(t, 10*time.Second, func() bool { return d.Stats().Drained == 20 }, "20 drained")
	natstest.Eventually(t, 30*time.Second, func() bool { return streamCount(t, e.js, e.q.RetryTopic()) == 0 }, "retry stream empty (work queue)")
	if n, _ := d.Backlog(context.Background()); n != 0 {
		t.Fatalf("backlog after drain = %d", n)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.calls) != 20 || !rec.fromDrain {
		t.Fatalf("handled %d (from drain %v), want 20", len(rec.calls), rec.fromDrain)
	}
	seen := map[string]bool{}
	for _, id := range rec.calls {
		seen[id] = true
	}
	for _, id := range ids {
		if !seen[id] {
			t.Errorf("%s not drained", id)
		}
	}
	if rec.peak > 5 {
		t.Errorf("peak concurrency %d > MaxInFlight 5", rec.peak)
	}
}

// The drain never exceeds its rate; a half-open budget of 1 means one
// message at a time.
func TestDrainRateAndBudget(t *testing.T) {
	e := newEnv(t, natstest.URL(t), nil)
	seed(t, e, 30)
	rec := &recorder{}
	// A half-open gate with one probe slot: 1 minus the probes in flight,
	// as middleware.DrainGate reports it.
	g := retryqueue.GateFunc(func() int {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		return 1 - rec.inflight
	})
	d := startDrainer(t, e, retryqueue.DrainerConfig{Handler: rec.handler(func(*message.Message) error {
		time.Sleep(2 * time.Millisecond) // a real call takes time
		return nil
	}), Gate: g, Rate: 20, Burst: 4, FixedRate: true, PollInterval: 10 * time.Millisecond})
	natstest.Eventually(t, 20*time.Second, func() bool { return d.Stats().Drained == 30 }, "30 drained")

	rec.mu.Lock()
	defer rec.mu.Unlock()
	if rec.peak != 1 {
		t.Errorf("budget 1: peak concurrency %d, want 1", rec.peak)
	}
	// 30 messages at 20/s with a burst of 4: at least (30-4)/20 = 1.3 s.
	elapsed := rec.at[len(rec.at)-1].Sub(rec.at[0])
	if elapsed < 1200*time.Millisecond {
		t.Errorf("30 messages in %s: faster than the 20/s limit", elapsed)
	}
	// No window of one second holds more than rate+burst = 24 calls.
	for i := range rec.at {
		n := 0
		for j := i; j < len(rec.at) && rec.at[j].Sub(rec.at[i]) < time.Second; j++ {
			n++
		}
		if n > 24 {
			t.Fatalf("%d calls within 1s from call %d, limit 20/s burst 4", n, i)
		}
	}
}

// A message is acked only after the handler returned nil; on an error it is
// nakked and comes back.
func TestDrainAcksOnlyAfterHandlerSucceeded(t *testing.T) {
	e := newEnv(t, natstest.URL(t), nil)
	seed(t, e, 1)
	g := &gate{}
	g.budget.Store(1 << 30)
	release := make(chan struct{})
	var calls atomic.Int32
	d := startDrainer(t, e, retryqueue.DrainerConfig{
		Handler: func(m *message.Message) ([]*message.Message, error) {
			switch calls.Add(1) {
			case 1:
				return nil, errors.New("diversion not confirmed")
			case 2:
				<-release
			}
			return nil, nil
		},
		Gate: g, NakDelay: func(uint64) time.Duration { return 50 * time.Millisecond }, PollInterval: 10 * time.Millisecond,
	})
	// On a failure below, release the handler before the drainer's cleanup
	// waits for it (cleanups run last in, first out).
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	t.Cleanup(unblock)
	natstest.Eventually(t, 10*time.Second, func() bool { return calls.Load() == 2 }, "redelivered after the handler error")
	// The second delivery is in the handler: the message is still stored and
	// ack-pending.
	c, err := e.js.Consumer(context.Background(), d.Stream(), d.Consumer())
	if err != nil {
		t.Fatal(err)
	}
	info, err := c.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if info.NumAckPending != 1 || streamCount(t, e.js, e.q.RetryTopic()) != 1 {
		t.Fatalf("while handling: ack pending %d, stream %d; want 1, 1", info.NumAckPending, streamCount(t, e.js, e.q.RetryTopic()))
	}
	if s := d.Stats(); s.Redelivered != 1 || s.Drained != 0 {
		t.Fatalf("stats %+v, want 1 redelivered, 0 drained", s)
	}
	unblock()
	natstest.Eventually(t, 30*time.Second, func() bool { return d.Stats().Drained == 1 }, "acked after success")
	natstest.Eventually(t, 30*time.Second, func() bool { return streamCount(t, e.js, e.q.RetryTopic()) == 0 }, "removed from the retry stream")
}

// A message diverted after a failure is not handed to the handler before
// its not_before; it is deferred without counting as an attempt.
func TestDrainRespectsNotBefore(t *testing.T) {
	const backoff = 600 * time.Millisecond
	e := newEnv(t, natstest.URL(t), func(c *retryqueue.Config) {
		c.Backoff = func(int) time.Duration { return backoff }
	})
	// The drainer and its consumer are ready (gate closed) before the
	// diversion, so its first fetch comes well before not_before.
	g := &gate{}
	rec := &recorder{}
	var attempt atomic.Value
	d := startDrainer(t, e, retryqueue.DrainerConfig{Handler: rec.handler(func(m *message.Message) error {
		attempt.Store(m.Metadata.Get(retryqueue.MetaAttempt))
		return nil
	}), Gate: g, PollInterval: 10 * time.Millisecond})
	diverted := time.Now()
	if err := e.q.Divert(context.Background(), message.NewMessage("later", nil), retryqueue.ReasonFailure, errors.New("HTTP 503")); err != nil {
		t.Fatal(err)
	}
	g.budget.Store(1 << 30)
	d.Wake()
	natstest.Eventually(t, 10*time.Second, func() bool { return d.Stats().Drained == 1 }, "drained after not_before")
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if early := rec.at[0].Sub(diverted); early < backoff {
		t.Fatalf("handled %s after diversion, before not_before (%s)", early, backoff)
	}
	if s := d.Stats(); s.Deferred < 1 || len(rec.calls) != 1 {
		t.Fatalf("stats %+v, calls %d; want >= 1 deferred, 1 call", s, len(rec.calls))
	}
	if a := attempt.Load(); a != "1" {
		t.Fatalf("attempt %v after deferral, want 1 (deferral is not an attempt)", a)
	}
}

// Malformed messages in the retry stream are dead-lettered by the drainer,
// never handed to the handler; a panicking handler does not stop the drain.
func TestDrainMalformedAndPanic(t *testing.T) {
	e := newEnv(t, natstest.URL(t), nil)
	bad := message.NewMessage("bad", nil)
	bad.Metadata.Set(retryqueue.MetaAttempt, "abc")
	bad.Metadata.Set(retryqueue.MetaService, e.q.Service())
	bad.Metadata.Set(retryqueue.MetaPartnerToken, fgpartner.Token(e.q.Partner()))
	publishRaw(t, e, e.q.RetrySubject(), bad)
	seed(t, e, 1)
	g := &gate{}
	g.budget.Store(1 << 30)
	var panicked atomic.Bool
	rec := &recorder{}
	d := startDrainer(t, e, retryqueue.DrainerConfig{Handler: rec.handler(func(m *message.Message) error {
		if !panicked.Swap(true) {
			panic("boom")
		}
		return nil
	}), Gate: g, NakDelay: func(uint64) time.Duration { return 20 * time.Millisecond }, PollInterval: 10 * time.Millisecond})
	natstest.Eventually(t, 10*time.Second, func() bool { s := d.Stats(); return s.DeadLettered == 1 && s.Drained == 1 }, "bad dead-lettered, good drained")
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, id := range rec.calls {
		if id == "bad" {
			t.Fatal("malformed message reached the handler")
		}
	}
	if d.Stats().Redelivered != 1 {
		t.Fatalf("stats %+v, want the panic counted as 1 redelivery", d.Stats())
	}
	dead := last(t, e.js, e.q.DeadLetterTopic())
	if dead.UUID != "bad" || dead.Metadata.Get(retryqueue.MetaDeadReason) != retryqueue.DeadReasonMalformed {
		t.Fatalf("dead letter %s %v", dead.UUID, dead.Metadata)
	}
}

func TestDrainerConfigValidation(t *testing.T) {
	e := newEnv(t, natstest.URL(t), nil)
	h := func(*message.Message) ([]*message.Message, error) { return nil, nil }
	base := func() retryqueue.DrainerConfig {
		return retryqueue.DrainerConfig{JetStream: e.js, Queue: e.q, Handler: h, Gate: &gate{}}
	}
	cases := map[string]func(*retryqueue.DrainerConfig){
		"JetStream":      func(c *retryqueue.DrainerConfig) { c.JetStream = nil },
		"Queue":          func(c *retryqueue.DrainerConfig) { c.Queue = nil },
		"Handler":        func(c *retryqueue.DrainerConfig) { c.Handler = nil },
		"Gate":           func(c *retryqueue.DrainerConfig) { c.Gate = nil },
		"Rate":           func(c *retryqueue.DrainerConfig) { c.Rate = -1 },
		"Burst":          func(c *retryqueue.DrainerConfig) { c.Burst = -1 },
		"AckWait":        func(c *retryqueue.DrainerConfig) { c.AckWait = time.Millisecond },
		"MaxInFlight":    func(c *retryqueue.DrainerConfig) { c.MaxInFlight = -1 },
		"HandlerTimeout": func(c *retryqueue.DrainerConfig) { c.AckWait = 2 * time.Second; c.HandlerTimeout = 3 * time.Second },
		"Consumer":       func(c *retryqueue.DrainerConfig) { c.Consumer = "a.b" },
		"MinRate":        func(c *retryqueue.DrainerConfig) { c.Rate = 10; c.MinRate = 20 },
		"MaxRate":        func(c *retryqueue.DrainerConfig) { c.Rate = 10; c.MaxRate = 5 },
		"AdjustInterval": func(c *retryqueue.DrainerConfig) { c.AdjustInterval = time.Millisecond },
		"Increase":       func(c *retryqueue.DrainerConfig) { c.Increase = -1 },
		"Decrease":       func(c *retryqueue.DrainerConfig) { c.Decrease = 1.5 },
		"SlowCall":       func(c *retryqueue.DrainerConfig) { c.SlowCall = -time.Second },
	}
	for field, mod := range cases {
		c := base()
		mod(&c)
		_, err := retryqueue.NewDrainer(c)
		if !errors.Is(err, retryqueue.ErrInvalidConfig) || !strings.Contains(err.Error(), field) {
			t.Errorf("%s: err = %v, want invalid config naming it", field, err)
		}
	}
	if _, err := retryqueue.NewDrainer(base()); err != nil {
		t.Fatalf("valid config: %v", err)
	}
}

// The NATS server restarts in the middle of a drain: every backlog message
// still reaches the handler and the backlog empties.
func TestDrainSurvivesServerRestart(t *testing.T) {
	srv := natstest.Server(t)
	// The drainer's acks wait at most PublishTimeout for confirmation.
	e := newEnv(t, srv.ClientURL(), func(c *retryqueue.Config) { c.PublishTimeout = 300 * time.Millisecond })
	ids := seed(t, e, 100)
	g := &gate{}
	g.budget.Store(1 << 30)
	var mu sync.Mutex
	seen := map[string]int{}
	stopped := make(chan struct{})
	d := startDrainer(t, e, retryqueue.DrainerConfig{
		Handler: func(m *message.Message) ([]*message.Message, error) {
			mu.Lock()
			seen[m.UUID]++
			n, times := len(seen), seen[m.UUID]
			mu.Unlock()
			if n == 30 && times == 1 {
				srv.Stop() // this message's ack and its batch's fail
				close(stopped)
			}
			return nil, nil
		},
		Gate: g, Rate: 500, Burst: 10, AckWait: 2 * time.Second, PollInterval: 20 * time.Millisecond,
	})
	<-stopped
	natstest.Eventually(t, 10*time.Second, func() bool { return d.Stats().AckErrors >= 1 }, "acks failing while the server is down")
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 20*time.Second, func() bool {
		n, err := d.Backlog(context.Background())
		return err == nil && n == 0
	}, "backlog empty after the restart")
	mu.Lock()
	defer mu.Unlock()
	dups := 0
	for _, id := range ids {
		if seen[id] == 0 {
			t.Errorf("%s never reached the handler", id)
		}
		dups += seen[id] - 1
	}
	// An unconfirmed ack may still reach the server (it sits in the client's
	// reconnect buffer), so duplicates are possible, not certain.
	t.Logf("100 backlog messages, %d handled more than once, stats %+v", dups, d.Stats())
}
