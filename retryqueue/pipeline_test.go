package retryqueue_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/floodgate-go/floodgate/internal/natstest"
	"github.com/floodgate-go/floodgate/retryqueue"
)

// bulkhead is a partner's bulkhead for the drain tests: its gate's budget
// is its size less the calls it admitted, and its handler records each
// call, holding it while hold says so until release.
type bulkhead struct {
	size    int
	mu      sync.Mutex
	inCall  int
	peak    int
	calls   int
	done    map[string]bool
	release chan struct{}
	once    sync.Once
}

func newBulkhead(size int) *bulkhead {
	return &bulkhead{size: size, done: map[string]bool{}, release: make(chan struct{})}
}

func (b *bulkhead) gate() retryqueue.Gate {
	return retryqueue.GateFunc(func() int {
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.size - b.inCall
	})
}

// handler admits each call (counted by the gate from then on), tells the
// drainer so when admitted is set, and holds the calls for which hold(n)
// is true, n counting calls from 1, until unblock.
func (b *bulkhead) handler(admitted bool, hold func(n int) bool) message.HandlerFunc {
	return func(m *message.Message) ([]*message.Message, error) {
		b.mu.Lock()
		b.inCall++
		b.peak = max(b.peak, b.inCall)
		b.calls++
		held := hold(b.calls)
		b.mu.Unlock()
		if admitted {
			retryqueue.Admitted(m.Context(), m)
			retryqueue.Admitted(m.Context(), m) // a second call changes nothing
		}
		if held {
			<-b.release
		}
		b.mu.Lock()
		b.inCall--
		b.done[m.UUID] = true
		b.mu.Unlock()
		return nil, nil
	}
}

func (b *bulkhead) unblock() { b.once.Do(func() { close(b.release) }) }

func (b *bulkhead) calling() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.inCall
}

func (b *bulkhead) delivered() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.done)
}

// check reports a peak above the bulkhead and any of ids not delivered.
func (b *bulkhead) check(t *testing.T, ids []string) {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.peak > b.size {
		t.Errorf("peak %d calls at once, want <= the bulkhead %d", b.peak, b.size)
	}
	for _, id := range ids {
		if !b.done[id] {
			t.Errorf("%s not delivered", id)
		}
	}
}

// Under a bounded budget (a partner's bulkhead: the gate's budget is its
// size less the calls admitted), the drain does not wait for a whole batch
// before its next fetch: a call that never returns holds one slot of the
// bulkhead, and the rest of the backlog still flows through the others,
// never more calls at once than the bulkhead.
func TestDrainPipelinesUnderBoundedBudget(t *testing.T) {
	e := newEnv(t, natstest.URL(t), nil)
	ids := seed(t, e, 24)
	b := newBulkhead(4)
	h := b.handler(false, func(n int) bool { return n == 1 }) // the first call hangs until the test releases it
	// MaxInFlight above the bulkhead, as a partner drain's template (64)
	// is above the default bulkhead (16).
	d := startDrainer(t, e, retryqueue.DrainerConfig{Handler: h, Gate: b.gate(), Rate: 1000, MaxInFlight: 16, PollInterval: 20 * time.Millisecond})
	t.Cleanup(b.unblock) // runs before the drainer's (last in, first out): a failed test does not hang in cleanup
	natstest.Eventually(t, 30*time.Second, func() bool { return b.delivered() == len(ids)-1 },
		"%d of the other %d messages delivered while one call hangs", natstest.Now(func() any { return b.delivered() }), len(ids)-1)
	b.unblock()
	natstest.Eventually(t, 30*time.Second, func() bool { return d.Stats().Drained == uint64(len(ids)) }, "all drained")
	b.check(t, ids)
}

// A partner's consumer is kept from one of its turns to the next
// (PartnerDrainerConfig.KeepConsumers), not created and deleted per turn;
// it is deleted once the partner's backlog is empty.
func TestPartnerDrainKeepsConsumerBetweenTurns(t *testing.T) {
	e := newEnv(t, natstest.URL(t), nil)
	const each = 120
	keys := []string{"partner-a", "partner-b"}
	var ids []string
	for _, k := range keys {
		ids = append(ids, divertTo(t, e.q, k, each)...)
	}
	var (
		mu      sync.Mutex
		order   []string               // partner of each delivery, in order
		created = map[time.Time]bool{} // partner-a's consumer's creation times seen
	)
	var infoErr atomic.Value
	rec := newDeliveries()
	consA := retryqueue.ConsumerName(e.q.Service(), keys[0])
	startPartnerDrainer(t, e, retryqueue.PartnerDrainerConfig{
		Handler: rec.handler(func(m *message.Message) {
			k, _ := retryqueue.DrainedPartner(m.Context(), m)
			var at time.Time
			if k == keys[0] {
				c, err := e.js.Consumer(context.Background(), e.q.RetryTopic(), consA)
				if err != nil {
					infoErr.Store(fmt.Errorf("consumer info of %s during its delivery: %w", consA, err))
				} else {
					at = c.CachedInfo().Created
				}
			}
			time.Sleep(2 * time.Millisecond) // a real call takes time: turns end on their slice
			mu.Lock()
			order = append(order, k)
			if !at.IsZero() {
				created[at] = true
			}
			mu.Unlock()
		}),
		Gate:          func(string) retryqueue.Gate { return openGate },
		MaxInFlight:   2,
		MaxDraining:   1, // one lane: the partners take turns
		KeepConsumers: 2,
	})
	natstest.Eventually(t, 60*time.Second, func() bool { return rec.distinct() == len(ids) }, "%d drained (now %d)", len(ids), natstest.Now(func() any { return rec.distinct() }))
	if err, ok := infoErr.Load().(error); ok {
		t.Fatal(err)
	}
	mu.Lock()
	turnsA := 0
	for i, k := range order {
		if k == keys[0] && (i == 0 || order[i-1] != k) {
			turnsA++
		}
	}
	nCreated := len(created)
	mu.Unlock()
	if turnsA < 2 {
		t.Fatalf("partner-a had %d turn(s); the test needs at least 2 (the lane was never handed over)", turnsA)
	}
	if nCreated != 1 {
		t.Errorf("partner-a's consumer was created %d times over its %d turns, want once (kept between turns)", nCreated, turnsA)
	}
	rec.check(t, ids)
	natstest.Eventually(t, 30*time.Second, func() bool { return consumerCount(t, e) == 0 }, "consumers deleted once the backlogs are empty")
}

// A guard that calls Admitted once its gate counts a drained call lets the
// drain fill the gate's budget with calls that do not return: the drainer
// no longer takes them off the budget a second time. Without Admitted,
// each is counted twice and the drain stops at half the budget.
func TestAdmittedCallsCountOnce(t *testing.T) {
	e := newEnv(t, natstest.URL(t), nil)
	ids := seed(t, e, 12)
	b := newBulkhead(4)
	h := b.handler(true, func(int) bool { return true })
	// Burst 1: a message per fetch, so the calls already blocked are in
	// the budget of every fetch after the first.
	d := startDrainer(t, e, retryqueue.DrainerConfig{Handler: h, Gate: b.gate(), Rate: 1000, Burst: 1, MaxInFlight: 16, PollInterval: 20 * time.Millisecond})
	t.Cleanup(b.unblock)
	natstest.Eventually(t, 30*time.Second, func() bool { return b.calling() == b.size },
		"%d calls at once, want the whole budget %d", natstest.Now(func() any { return b.calling() }), b.size)
	b.unblock()
	natstest.Eventually(t, 30*time.Second, func() bool { return d.Stats().Drained == uint64(len(ids)) }, "all drained")
	b.check(t, ids)
}

// A FIFO drain fetches ahead of its gate's budget (several budgets at
// once), but a message fetched ahead starts its call only when the gate
// has room: never more calls at once than the bulkhead. One that cannot
// get room while a call hangs goes back to the backlog (nakked, no
// attempt) after half of what AckWait leaves past HandlerTimeout, so
// JetStream never redelivers a message still waiting here; once the call
// returns, every message is delivered exactly once.
func TestFetchedAheadWaitsForRoomThenGoesBack(t *testing.T) {
	e := newEnv(t, natstest.URL(t), nil)
	ids := seed(t, e, 12)
	b := newBulkhead(1)
	h := b.handler(true, func(n int) bool { return n == 1 }) // the first call hangs until the test releases it
	var mu sync.Mutex
	calls := map[string]int{}
	count := func(m *message.Message) ([]*message.Message, error) {
		mu.Lock()
		calls[m.UUID]++
		mu.Unlock()
		return h(m)
	}
	d := startDrainer(t, e, retryqueue.DrainerConfig{
		Handler: count, Gate: b.gate(), Rate: 1000, MaxInFlight: 16, PollInterval: 20 * time.Millisecond,
		AckWait: 2 * time.Second, HandlerTimeout: time.Second, // a fetched message waits at most 500ms for room
	})
	t.Cleanup(b.unblock)
	natstest.Eventually(t, 30*time.Second, func() bool { return b.calling() == 1 }, "first call hangs")
	natstest.Eventually(t, 30*time.Second, func() bool { return d.Stats().Deferred >= 1 },
		"a message fetched ahead went back while the call hung (stats %+v)", natstest.Now(func() any { return d.Stats() }))
	if s := d.Stats(); s.Fetched < 2 {
		t.Errorf("fetched %d, want more than the budget of 1 (fetched ahead)", s.Fetched)
	}
	if n := b.delivered(); n != 0 {
		t.Errorf("%d delivered while the bulkhead's one slot was held, want 0", n)
	}
	b.unblock()
	natstest.Eventually(t, 30*time.Second, func() bool { return d.Stats().Drained == uint64(len(ids)) }, "all drained")
	b.check(t, ids)
	mu.Lock()
	defer mu.Unlock()
	for id, n := range calls {
		if n != 1 {
			t.Errorf("%s called %d times, want 1", id, n)
		}
	}
}

// A partner's drain that ends (its context done) while a pull request it
// sent ahead awaits its answer gives back the shared in-flight slots that
// request held: the bound is whole again for the next Run. The gate lets
// the first fetch bring a full batch of 4 (a budget of 1, fetched 4
// budgets ahead), then opens (a request of its own is sent ahead) and
// ends the drain's context at that look.
func TestPartnerDrainEndReleasesSharedSlotsSentAhead(t *testing.T) {
	e := newEnv(t, natstest.URL(t), nil)
	divertTo(t, e.q, "P", 40)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var looks atomic.Int32
	gate := retryqueue.GateFunc(func() int {
		// Looks 1-2: before the turn; 3-4: the round's fetch; 5: the
		// look before the request sent ahead (no call looks before).
		if looks.Add(1) <= 4 {
			return 1
		}
		cancel()
		return 40
	})
	var calls atomic.Int32
	pd, err := retryqueue.NewPartnerDrainer(retryqueue.PartnerDrainerConfig{
		JetStream: e.js, Queue: e.q,
		Drainer: retryqueue.DrainerConfig{Rate: 1000, Burst: 100, PollInterval: 20 * time.Millisecond, AckWait: 10 * time.Second},
		Handler: func(*message.Message) ([]*message.Message, error) { calls.Add(1); return nil, nil },
		Gate:    func(string) retryqueue.Gate { return gate },
	})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- pd.Run(ctx) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
	if looks.Load() < 5 {
		t.Fatalf("the gate was looked at %d times, want the look before a request sent ahead (5)", looks.Load())
	}
	cons, err := e.js.Consumer(testCtx(t), e.q.RetryTopic(), retryqueue.ConsumerName(e.q.Service(), "P"))
	if err != nil {
		t.Fatal(err)
	}
	if got := cons.CachedInfo().Delivered.Consumer; got <= 4 {
		t.Fatalf("%d delivered on the consumer, want more than the first batch of 4 (a request sent ahead answered)", got)
	}
	if n := pd.InFlight(); n != 0 {
		t.Errorf("%d shared in-flight slots held after Run returned (%d calls), want 0", n, calls.Load())
	}
}
