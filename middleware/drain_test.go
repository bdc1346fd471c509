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

// slotHeld is a tripped breaker now half-open, whose one probe slot a live
// call holds until release, over a retry backlog of n messages (the
// diversions that tripped it purged). base is the retry stream's last
// sequence before the n were diverted.
type slotHeld struct {
	*env
	base    uint64
	release func()
	live    chan error
}

func holdSlot(t *testing.T, n int) slotHeld {
	t.Helper()
	e := tripped(t, smallBreaker)
	rs, err := e.js.Stream(context.Background(), e.qcfg.RetryTopic)
	if err != nil {
		t.Fatal(err)
	}
	if err := rs.Purge(context.Background()); err != nil {
		t.Fatal(err)
	}
	h := slotHeld{env: e, base: streamState(t, e).LastSeq, live: make(chan error, 1)}
	for range n {
		if err := e.q.Divert(context.Background(), newMsg(), retryqueue.ReasonOpen, breaker.ErrOpen); err != nil {
			t.Fatal(err)
		}
	}
	e.clock.Advance(2 * time.Second) // half-open, 1 probe slot
	ch := make(chan struct{})
	var once sync.Once
	h.release = func() { once.Do(func() { close(ch) }) }
	t.Cleanup(h.release)
	probing := make(chan struct{})
	go func() {
		_, err := e.mw(func(*message.Message) ([]*message.Message, error) {
			close(probing)
			<-ch
			return nil, nil
		})(newMsg())
		h.live <- err
	}()
	<-probing
	return h
}

// startDrain runs a drainer over h's backlog whose gate always admits one
// message (as a replica's gate does when another replica holds the
// fleet's probe slots), with h's middleware around handler.
func (h slotHeld) startDrain(t *testing.T, poll time.Duration, handler message.HandlerFunc) *retryqueue.Drainer {
	t.Helper()
	d, err := retryqueue.NewDrainer(retryqueue.DrainerConfig{
		JetStream: h.js, Queue: h.q, PollInterval: poll, Rate: 200,
		Gate:    retryqueue.GateFunc(func() int { return 1 }),
		Handler: h.mw(handler),
	})
	if err != nil {
		t.Fatal(err)
	}
	natstest.Run(t, d.Run)
	return d
}

// A drained message the breaker turns away (its one probe slot is held)
// stays where it is in the backlog: nakked with a delay, no copy
// published, no attempt counted, and so do the messages fetched with it.
// Once the breaker admits them, they are delivered and acked.
func TestDrainedRejectionStaysInPlace(t *testing.T) {
	const n = 3
	h := holdSlot(t, n)
	var mu sync.Mutex
	delivered := map[string]int{}
	d := h.startDrain(t, 10*time.Millisecond, func(m *message.Message) ([]*message.Message, error) {
		mu.Lock()
		delivered[m.UUID]++
		mu.Unlock()
		return nil, nil
	})

	natstest.Eventually(t, 10*time.Second, func() bool { return d.Stats().Deferred >= 5 }, "drained messages turned away")
	st := streamState(t, h.env)
	if st.Msgs != n || st.LastSeq != h.base+n {
		t.Fatalf("retry stream while the slot is held: %d messages, last sequence %d; want %d, %d (no copies)", st.Msgs, st.LastSeq, n, h.base+n)
	}
	if s := d.Stats(); s.Drained != 0 || s.Failures != 0 {
		t.Fatalf("drainer stats %+v: want nothing drained, no failures", s)
	}
	h.mu.Lock()
	var turned int
	for _, ev := range h.events {
		if ev.Action == middleware.Deferred && ev.Reason == "probe-limit" {
			turned++
		}
	}
	h.mu.Unlock()
	// Each round's first message reaches the breaker and is turned away;
	// the others fetched with it (at most n) go back without a call.
	if turned < 2 {
		t.Errorf("%d probe-limit events, want >= 2 (one per round at least)", turned)
	}

	h.release()
	if err := <-h.live; err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 10*time.Second, func() bool { return d.Stats().Drained == n }, "backlog drained once admitted")
	natstest.Eventually(t, 30*time.Second, func() bool { return streamState(t, h.env).Msgs == 0 }, "retry stream empty")
	if st := streamState(t, h.env); st.LastSeq != h.base+n {
		t.Errorf("retry stream last sequence %d, want %d: a drained message was published again", st.LastSeq, h.base+n)
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
	if s := h.b.State(); s != breaker.StateClosed {
		t.Errorf("breaker %s after the probes succeeded, want closed", s)
	}
}

// After the breaker turns a drained message away, the drainer waits a
// poll interval before it fetches again, rather than fetching (and
// nakking) at its drain rate. With an hour's poll interval it fetches one
// batch only (the gate's budget of 1 and what it fetched ahead, each
// turned away in turn) of a backlog of 20.
func TestDrainWaitsAfterRejection(t *testing.T) {
	const n = 20
	h := holdSlot(t, n)
	d := h.startDrain(t, time.Hour, ok)
	natstest.Eventually(t, 10*time.Second, func() bool {
		s := d.Stats()
		return s.Deferred >= 1 && s.Deferred == s.Fetched
	}, "the first batch turned away (stats %+v)", natstest.Now(func() any { return d.Stats() }))
	// A drainer that did not wait would fetch the next batch within
	// 1/Rate (5 ms); one that waits never does in this test.
	first := d.Stats()
	time.Sleep(300 * time.Millisecond)
	s := d.Stats()
	if s.Fetched != first.Fetched || s.Fetched >= n || s.Deferred != s.Fetched || s.Drained != 0 {
		t.Errorf("stats %+v, 300ms before %+v: want one batch fetched, each message turned away, nothing fetched since (waiting a poll interval)", s, first)
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
