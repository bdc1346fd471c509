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

// Under a bounded budget (a partner's bulkhead: the gate's budget is its
// size less the calls admitted), the drain does not wait for a whole batch
// before its next fetch: a call that never returns holds one slot of the
// bulkhead, and the rest of the backlog still flows through the others,
// never more calls at once than the bulkhead.
func TestDrainPipelinesUnderBoundedBudget(t *testing.T) {
	e := newEnv(t, natstest.URL(t), nil)
	ids := seed(t, e, 24)
	const bulkhead = 4
	var (
		mu       sync.Mutex
		admitted int
		peak     int
		stuck    string
		done     = map[string]bool{}
	)
	release := make(chan struct{})
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	g := retryqueue.GateFunc(func() int {
		mu.Lock()
		defer mu.Unlock()
		return bulkhead - admitted
	})
	h := func(m *message.Message) ([]*message.Message, error) {
		mu.Lock()
		admitted++
		peak = max(peak, admitted)
		first := stuck == ""
		if first {
			stuck = m.UUID
		}
		mu.Unlock()
		if first {
			<-release // the first call hangs until the test releases it
		}
		mu.Lock()
		admitted--
		done[m.UUID] = true
		mu.Unlock()
		return nil, nil
	}
	// MaxInFlight above the bulkhead, as a partner drain's template (64)
	// is above the default bulkhead (16).
	d := startDrainer(t, e, retryqueue.DrainerConfig{Handler: h, Gate: g, Rate: 1000, MaxInFlight: 16, PollInterval: 20 * time.Millisecond})
	t.Cleanup(unblock) // runs before the drainer's (last in, first out): a failed test does not hang in cleanup
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(done)
	}
	natstest.Eventually(t, 30*time.Second, func() bool { return count() == len(ids)-1 },
		"%d of the other %d messages delivered while one call hangs", natstest.Now(func() any { return count() }), len(ids)-1)
	unblock()
	natstest.Eventually(t, 30*time.Second, func() bool { return d.Stats().Drained == uint64(len(ids)) }, "all drained")
	mu.Lock()
	defer mu.Unlock()
	if peak > bulkhead {
		t.Errorf("peak %d calls at once, want <= the bulkhead %d", peak, bulkhead)
	}
	for _, id := range ids {
		if !done[id] {
			t.Errorf("%s not delivered", id)
		}
	}
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
	const bulkhead = 4
	var (
		mu       sync.Mutex
		admitted int
		peak     int
		done     = map[string]bool{}
	)
	release := make(chan struct{})
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	g := retryqueue.GateFunc(func() int {
		mu.Lock()
		defer mu.Unlock()
		return bulkhead - admitted
	})
	h := func(m *message.Message) ([]*message.Message, error) {
		mu.Lock()
		admitted++ // the gate counts it now
		peak = max(peak, admitted)
		mu.Unlock()
		retryqueue.Admitted(m.Context(), m)
		retryqueue.Admitted(m.Context(), m) // a second call changes nothing
		<-release
		mu.Lock()
		admitted--
		done[m.UUID] = true
		mu.Unlock()
		return nil, nil
	}
	// Burst 1: a message per fetch, so the calls already blocked are in
	// the budget of every fetch after the first.
	d := startDrainer(t, e, retryqueue.DrainerConfig{Handler: h, Gate: g, Rate: 1000, Burst: 1, MaxInFlight: 16, PollInterval: 20 * time.Millisecond})
	t.Cleanup(unblock)
	inCall := func() int {
		mu.Lock()
		defer mu.Unlock()
		return admitted
	}
	natstest.Eventually(t, 30*time.Second, func() bool { return inCall() == bulkhead },
		"%d calls at once, want the whole budget %d", natstest.Now(func() any { return inCall() }), bulkhead)
	unblock()
	natstest.Eventually(t, 30*time.Second, func() bool { return d.Stats().Drained == uint64(len(ids)) }, "all drained")
	mu.Lock()
	defer mu.Unlock()
	if peak > bulkhead {
		t.Errorf("peak %d calls at once, want <= the budget %d", peak, bulkhead)
	}
	for _, id := range ids {
		if !done[id] {
			t.Errorf("%s not delivered", id)
		}
	}
}
