package retryqueue_test

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/floodgate-go/floodgate/internal/natstest"
	"github.com/floodgate-go/floodgate/retryqueue"
)

// A key's head (re-diverted after a failure, so its copy is at the back of
// the stream) that the breaker keeps turning away for longer than 2*AckWait
// must still go before the key's later messages.
func TestTurnedAwayHeadKeepsKeyOrder(t *testing.T) {
	clk := newFakeClock()
	e := newEnv(t, natstest.URL(t), func(c *retryqueue.Config) {
		c.OrderingKey = func(m *message.Message) string { return m.Metadata.Get("key") }
		c.Backoff = func(int) time.Duration { return 100 * time.Millisecond }
		c.Clock = clk
	})
	ctx := testCtx(t)
	for i := 1; i <= 3; i++ {
		m := message.NewMessage(fmt.Sprintf("A%d", i), nil)
		m.Metadata.Set("key", "A")
		if err := e.q.Divert(ctx, m, retryqueue.ReasonOpen, errOpen); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	var order []string
	var failedAt time.Time
	turned := 0
	handler := func(m *message.Message) ([]*message.Message, error) {
		mu.Lock()
		if m.UUID == "A1" && failedAt.IsZero() {
			failedAt = time.Now()
			mu.Unlock()
			err := e.q.Divert(m.Context(), m, retryqueue.ReasonFailure, errors.New("HTTP 503"))
			clk.Advance(time.Second) // the copy's not-before has passed when it is fetched
			return nil, err
		}
		if m.UUID == "A1" && time.Since(failedAt) < 3500*time.Millisecond {
			// Half-open, another replica holds the fleet's probe slots.
			turned++
			mu.Unlock()
			return nil, e.q.Divert(m.Context(), m, retryqueue.ReasonProbeLimit, errors.New("breaker: probe limit"))
		}
		order = append(order, m.UUID)
		mu.Unlock()
		return nil, nil
	}
	g := &gate{}
	g.budget.Store(1 << 30)
	startDrainer(t, e, retryqueue.DrainerConfig{Handler: handler, Gate: g, AckWait: time.Second,
		Rate: 1000, FixedRate: true, PollInterval: 20 * time.Millisecond})
	natstest.Eventually(t, 15*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return len(order) == 3 }, "3 delivered")
	mu.Lock()
	defer mu.Unlock()
	t.Logf("head turned away %d times", turned)
	if want := []string{"A1", "A2", "A3"}; !slices.Equal(order, want) {
		t.Errorf("key A delivered in order %v, want %v", order, want)
	}
}

// A key's head fails and the breaker opens (the gate closes) for longer
// than the hold's expiry (2*AckWait): the time paused does not count, and
// when the breaker goes half-open with one probe slot the head still goes
// before the key's later messages.
func TestLongPauseKeepsKeyOrder(t *testing.T) {
	e := newEnv(t, natstest.URL(t), func(c *retryqueue.Config) {
		c.OrderingKey = func(m *message.Message) string { return m.Metadata.Get("key") }
		c.Backoff = func(int) time.Duration { return 100 * time.Millisecond }
	})
	ctx := testCtx(t)
	for i := 1; i <= 3; i++ {
		m := message.NewMessage(fmt.Sprintf("A%d", i), nil)
		m.Metadata.Set("key", "A")
		if err := e.q.Divert(ctx, m, retryqueue.ReasonOpen, errOpen); err != nil {
			t.Fatal(err)
		}
	}
	g := &gate{}
	g.budget.Store(1 << 30)
	var mu sync.Mutex
	var order []string
	failed := false
	handler := func(m *message.Message) ([]*message.Message, error) {
		mu.Lock()
		defer mu.Unlock()
		if m.UUID == "A1" && !failed {
			failed = true
			g.budget.Store(0) // the failure trips the breaker
			return nil, e.q.Divert(m.Context(), m, retryqueue.ReasonFailure, errors.New("HTTP 503"))
		}
		order = append(order, m.UUID)
		return nil, nil
	}
	startDrainer(t, e, retryqueue.DrainerConfig{Handler: handler, Gate: g, AckWait: time.Second,
		Rate: 1000, FixedRate: true, PollInterval: 20 * time.Millisecond})
	natstest.Eventually(t, 30*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return failed }, "A1 failed")
	time.Sleep(3500 * time.Millisecond) // open window
	g.budget.Store(1)                   // half-open: one probe slot
	natstest.Eventually(t, 15*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return len(order) == 3 }, "3 delivered")
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"A1", "A2", "A3"}; !slices.Equal(order, want) {
		t.Errorf("key A delivered in order %v, want %v", order, want)
	}
}
