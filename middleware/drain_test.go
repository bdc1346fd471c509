package middleware_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/internal/natstest"
	"github.com/floodgate-go/floodgate/middleware"
	"github.com/floodgate-go/floodgate/retryqueue"
)

// A drained message the breaker turns away (here: its one probe slot is
// held by a live call, and the gate lets the drainer fetch anyway, as a
// replica's gate does when another replica holds the fleet's slots) stays
// where it is in the backlog: nakked with a delay, no copy published, no
// attempt counted. Once the breaker admits it, it is delivered and acked.
func TestDrainedRejectionStaysInPlace(t *testing.T) {
	e := tripped(t, smallBreaker)
	// Start from an empty backlog: drop the diversions that tripped it.
	rs, err := e.js.Stream(context.Background(), e.qcfg.RetryTopic)
	if err != nil {
		t.Fatal(err)
	}
	if err := rs.Purge(context.Background()); err != nil {
		t.Fatal(err)
	}
	base := streamState(t, e).LastSeq
	const n = 3
	for range n {
		if err := e.q.Divert(context.Background(), newMsg(), retryqueue.ReasonOpen, breaker.ErrOpen); err != nil {
			t.Fatal(err)
		}
	}
	e.clock.Advance(2 * time.Second) // half-open, 1 probe slot
	release := make(chan struct{})
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	t.Cleanup(unblock)
	probing := make(chan struct{})
	live := make(chan error, 1)
	go func() {
		_, err := e.mw(func(*message.Message) ([]*message.Message, error) {
			close(probing)
			<-release
			return nil, nil
		})(newMsg())
		live <- err
	}()
	<-probing

	var mu sync.Mutex
	delivered := map[string]int{}
	d, err := retryqueue.NewDrainer(retryqueue.DrainerConfig{
		JetStream: e.js, Queue: e.q, PollInterval: 10 * time.Millisecond, Rate: 200,
		Gate: retryqueue.GateFunc(func() int { return 1 }),
		Handler: e.mw(func(m *message.Message) ([]*message.Message, error) {
			mu.Lock()
			delivered[m.UUID]++
			mu.Unlock()
			return nil, nil
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})

	natstest.Eventually(t, 10*time.Second, func() bool { return d.Stats().Deferred >= 5 }, "drained messages turned away")
	st := streamState(t, e)
	if st.Msgs != n || st.LastSeq != base+n {
		t.Fatalf("retry stream while the slot is held: %d messages, last sequence %d; want %d, %d (no copies)", st.Msgs, st.LastSeq, n, base+n)
	}
	if s := d.Stats(); s.Drained != 0 || s.Failures != 0 {
		t.Fatalf("drainer stats %+v: want nothing drained, no failures", s)
	}
	e.mu.Lock()
	var turned int
	for _, ev := range e.events {
		if ev.Action == middleware.Diverted && ev.Reason == "probe-limit" {
			turned++
		}
	}
	e.mu.Unlock()
	if turned < 5 {
		t.Errorf("%d probe-limit events, want >= 5", turned)
	}

	unblock()
	if err := <-live; err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 10*time.Second, func() bool { return d.Stats().Drained == n }, "backlog drained once admitted")
	natstest.Eventually(t, 5*time.Second, func() bool { return streamState(t, e).Msgs == 0 }, "retry stream empty")
	if st := streamState(t, e); st.LastSeq != base+n {
		t.Errorf("retry stream last sequence %d, want %d: a drained message was published again", st.LastSeq, base+n)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(delivered) != n {
		t.Errorf("%d backlog messages delivered, want %d", len(delivered), n)
	}
	for id, c := range delivered {
		if c != 1 {
			t.Errorf("%s delivered %d times", id, c)
		}
	}
	if s := e.b.State(); s != breaker.StateClosed {
		t.Errorf("breaker %s after the probes succeeded, want closed", s)
	}
}

// streamState is the retry stream's message count and last sequence.
func streamState(t *testing.T, e *env) struct{ Msgs, LastSeq uint64 } {
	t.Helper()
	s, err := e.js.Stream(context.Background(), e.qcfg.RetryTopic)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return struct{ Msgs, LastSeq uint64 }{info.State.Msgs, info.State.LastSeq}
}
