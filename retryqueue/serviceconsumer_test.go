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
	"github.com/floodgate-go/floodgate/jsq"
	"github.com/floodgate-go/floodgate/retryqueue"
)

// breakerGate is a [retryqueue.ClosedGate] a test trips and closes: closed
// it admits everything, open nothing.
type breakerGate struct{ open atomic.Bool }

func (g *breakerGate) Budget() int {
	if g.open.Load() {
		return 0
	}
	return 1 << 30
}

func (g *breakerGate) Closed() bool { return !g.open.Load() }

// svcBacklog diverts first messages to the first of partners partners and
// each to every other, and returns their keys, a closed gate for each and
// the messages' UUIDs.
func svcBacklog(t *testing.T, e env, partners, first, each int) (keys []string, gates map[string]*breakerGate, ids []string) {
	t.Helper()
	gates = map[string]*breakerGate{}
	for i := range partners {
		k := fmt.Sprintf("partner-%02d", i)
		keys = append(keys, k)
		gates[k] = &breakerGate{}
		n := each
		if i == 0 {
			n = first
		}
		ids = append(ids, divertTo(t, e.q, k, n)...)
	}
	return keys, gates, ids
}

// svcConfig drains with 2 lanes (the service consumer from 3 partners),
// each partner starting at 50 msg/s.
func svcConfig(h message.HandlerFunc, gates map[string]*breakerGate) retryqueue.PartnerDrainerConfig {
	return retryqueue.PartnerDrainerConfig{
		Handler:     h,
		Gate:        func(k string) retryqueue.Gate { return gates[k] },
		MaxDraining: 2,
		Drainer:     retryqueue.DrainerConfig{Rate: 50, PollInterval: 20 * time.Millisecond, AckWait: 2 * time.Second},
	}
}

func consumerNames(t *testing.T, e env) []string {
	t.Helper()
	st, err := e.js.Stream(testCtx(t), e.q.RetryTopic())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	names := st.ConsumerNames(testCtx(t))
	for n := range names.Name() {
		out = append(out, n)
	}
	if err := names.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// Many closed partners drain through the one service consumer: the
// partners' own consumers are gone meanwhile, every message reaches its
// own partner once, and at the end nothing is left on the stream.
func TestServiceConsumerDrainsManyPartners(t *testing.T) {
	e := newEnv(t, natstest.URL(t), nil)
	_, gates, ids := svcBacklog(t, e, 12, 150, 150)
	rec := newDeliveries()
	pd := startPartnerDrainer(t, e, svcConfig(rec.handler(nil), gates))
	only := []string{retryqueue.ServiceConsumerName(e.q.Service())}
	natstest.Eventually(t, 60*time.Second, func() bool { return pd.ServiceConsumer() && slices.Equal(consumerNames(t, e), only) },
		"the service consumer drains alone (consumers now %v)", natstest.Now(func() any { return consumerNames(t, e) }))
	natstest.Eventually(t, 60*time.Second, func() bool { return rec.distinct() == len(ids) }, "%d drained (now %d)", len(ids), natstest.Now(func() any { return rec.distinct() }))
	if dups := rec.check(t, ids); dups != 0 {
		t.Errorf("%d duplicates", dups)
	}
	natstest.Eventually(t, 30*time.Second, func() bool {
		return !pd.ServiceConsumer() && consumerCount(t, e) == 0 && len(pd.Partners()) == 0 && streamCount(t, e.js, e.q.RetryTopic()) == 0
	}, "service consumer left, consumers deleted, drains stopped, stream empty")
	if runs, leaves := retryqueue.ServiceConsumerRuns(pd); runs == 0 || leaves != runs {
		t.Errorf("service consumer ran %d times and left %d times, want at least once and as often", runs, leaves)
	}
}

var errPartnerDown = errors.New("partner down")

// A partner whose breaker leaves closed while the service consumer drains
// ends it: the partners go back to their own consumers, the tripped
// partner's backlog waits while its breaker is open, the others drain,
// and once it closes its backlog drains too.
func TestServiceConsumerLeavesWhenAPartnerTrips(t *testing.T) {
	e := newEnv(t, natstest.URL(t), nil)
	// The bad partner has more than the service consumer has in flight.
	keys, gates, ids := svcBacklog(t, e, 12, 600, 150)
	bad := keys[0]
	rec := newDeliveries()
	record := rec.handler(nil)
	var pdp atomic.Pointer[retryqueue.PartnerDrainer] // set once started
	var tripped atomic.Bool
	h := func(m *message.Message) ([]*message.Message, error) {
		if pd := pdp.Load(); string(m.Payload) == bad && pd != nil && pd.ServiceConsumer() && !tripped.Swap(true) {
			// The partner's breaker trips (on live traffic, say) as the
			// service consumer reaches it; this call went through.
			gates[bad].open.Store(true)
			pd.Wake(bad)
		}
		return record(m)
	}
	pd := startPartnerDrainer(t, e, svcConfig(h, gates))
	pdp.Store(pd)
	natstest.Eventually(t, 60*time.Second, func() bool { return tripped.Load() }, "the service consumer reached the bad partner")
	natstest.Eventually(t, 60*time.Second, func() bool {
		for _, k := range keys[1:] {
			if rec.forKey(k) < 150 {
				return false
			}
		}
		return !pd.ServiceConsumer()
	}, "the healthy partners drained and the service consumer left (on: %v)", natstest.Now(func() any { return pd.ServiceConsumer() }))
	if n := subjectCount(t, e, bad); n == 0 {
		t.Fatal("the open partner's backlog was drained")
	}
	if _, leaves := retryqueue.ServiceConsumerRuns(pd); leaves == 0 {
		t.Fatal("the service consumer never left")
	}
	gates[bad].open.Store(false)
	pd.Wake(bad)
	natstest.Eventually(t, 60*time.Second, func() bool { return rec.distinct() == len(ids) }, "%d drained (now %d)", len(ids), natstest.Now(func() any { return rec.distinct() }))
	rec.check(t, ids)
	natstest.Eventually(t, 30*time.Second, func() bool { return consumerCount(t, e) == 0 && streamCount(t, e.js, e.q.RetryTopic()) == 0 }, "consumers deleted, stream empty")
}

// A call that fails while the service consumer drains ends it, though the
// partner's breaker stays closed: the partners go back to their own
// consumers and rates, and everything is delivered in the end.
func TestServiceConsumerLeavesOnAFailedCall(t *testing.T) {
	e := newEnv(t, natstest.URL(t), nil)
	keys, gates, ids := svcBacklog(t, e, 12, 200, 200)
	rec := newDeliveries()
	record := rec.handler(nil)
	var pdp atomic.Pointer[retryqueue.PartnerDrainer] // set once started
	var failed atomic.Bool
	h := func(m *message.Message) ([]*message.Message, error) {
		if pd := pdp.Load(); string(m.Payload) == keys[0] && pd != nil && pd.ServiceConsumer() && !failed.Swap(true) {
			return nil, errPartnerDown
		}
		return record(m)
	}
	cfg := svcConfig(h, gates)
	cfg.Drainer.FixedRate = true // 50 msg/s a partner: the backlog lasts
	pd := startPartnerDrainer(t, e, cfg)
	pdp.Store(pd)
	natstest.Eventually(t, 60*time.Second, func() bool {
		return failed.Load() && !pd.ServiceConsumer() && streamCount(t, e.js, e.q.RetryTopic()) > 0
	}, "the service consumer left with the backlog not drained (failed %v, on %v)", natstest.Now(func() any { return failed.Load() }), natstest.Now(func() any { return pd.ServiceConsumer() }))
	natstest.Eventually(t, 60*time.Second, func() bool { return rec.distinct() == len(ids) }, "%d drained (now %d)", len(ids), natstest.Now(func() any { return rec.distinct() }))
	rec.check(t, ids)
	natstest.Eventually(t, 30*time.Second, func() bool { return consumerCount(t, e) == 0 && streamCount(t, e.js, e.q.RetryTopic()) == 0 }, "consumers deleted, stream empty")
}

// secondReplica returns e with its own connection, publisher and Queue on
// the same streams and service: another replica of the service.
func secondReplica(t *testing.T, e env) env {
	t.Helper()
	e2 := e
	e2.nc = natstest.Conn(t, e.url)
	e2.js = natstest.JetStream(t, e2.nc)
	pub, err := jsq.NewPublisher(jsq.PublisherConfig{URL: e.url})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pub.Close() })
	e2.pub, e2.cfg.Publisher = pub, pub
	if e2.q, err = retryqueue.New(e2.cfg); err != nil {
		t.Fatal(err)
	}
	return e2
}

// Two replicas drain the same service, each with its partner drains and
// service consumer: every message reaches its own partner and is acked,
// and no consumer is left behind.
func TestServiceConsumerTwoReplicas(t *testing.T) {
	e := newEnv(t, natstest.URL(t), nil)
	e2 := secondReplica(t, e)
	_, gates, ids := svcBacklog(t, e, 12, 150, 150)
	rec := newDeliveries()
	pd1 := startPartnerDrainer(t, e, svcConfig(rec.handler(nil), gates))
	pd2 := startPartnerDrainer(t, e2, svcConfig(rec.handler(nil), gates))
	natstest.Eventually(t, 90*time.Second, func() bool { return rec.distinct() == len(ids) }, "%d drained (now %d)", len(ids), natstest.Now(func() any { return rec.distinct() }))
	dups := rec.check(t, ids)
	natstest.Eventually(t, 30*time.Second, func() bool {
		return consumerCount(t, e) == 0 && len(pd1.Partners())+len(pd2.Partners()) == 0 && streamCount(t, e.js, e.q.RetryTopic()) == 0
	}, "consumers deleted, drains stopped, stream empty")
	r1, _ := retryqueue.ServiceConsumerRuns(pd1)
	r2, _ := retryqueue.ServiceConsumerRuns(pd2)
	t.Logf("service consumer runs: %d and %d; %d duplicates", r1, r2, dups)
}

// A replica that dies while its service consumer holds messages leaves the
// consumer behind, its messages unacked. Another replica, its partners'
// consumers refused beside it, joins it and drains everything: the
// dead replica's messages come back after AckWait, nothing is lost.
func TestServiceConsumerReplicaDiesMidFlight(t *testing.T) {
	e := newEnv(t, natstest.URL(t), nil)
	dead := secondReplica(t, e)
	_, gates, ids := svcBacklog(t, e, 12, 150, 150)
	rec := newDeliveries()
	release := make(chan struct{})
	var held atomic.Int32
	var pdDead *retryqueue.PartnerDrainer
	cfg := svcConfig(rec.handler(func(*message.Message) {
		if pdDead.ServiceConsumer() {
			held.Add(1)
			<-release
		}
	}), gates)
	cfg.JetStream, cfg.Queue = dead.js, dead.q
	cfg.Drainer = svcConfig(nil, nil).Drainer
	pdDead, err := retryqueue.NewPartnerDrainer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- pdDead.Run(ctx) }()
	defer cancel()
	natstest.Eventually(t, 60*time.Second, func() bool { return held.Load() > 0 }, "the service consumer's handlers hold messages")
	dead.nc.Close() // the replica dies: no ack, no consumer delete
	cancel()
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	name := retryqueue.ServiceConsumerName(e.q.Service())
	left, err := e.js.Consumer(testCtx(t), e.q.RetryTopic(), name)
	if err != nil {
		t.Fatalf("the dead replica's service consumer: %v (the test no longer covers a join)", err)
	}
	pd := startPartnerDrainer(t, e, svcConfig(rec.handler(nil), gates))
	natstest.Eventually(t, 60*time.Second, pd.ServiceConsumer, "the live replica drains through the service consumer")
	// Its messages come back after AckWait: the consumer is still there.
	if c, err := e.js.Consumer(testCtx(t), e.q.RetryTopic(), name); err != nil || !c.CachedInfo().Created.Equal(left.CachedInfo().Created) {
		t.Fatalf("the live replica drains through a new service consumer (%v), not the one left behind", err)
	}
	natstest.Eventually(t, 90*time.Second, func() bool { return rec.distinct() == len(ids) }, "%d drained (now %d)", len(ids), natstest.Now(func() any { return rec.distinct() }))
	rec.check(t, ids)
	natstest.Eventually(t, 60*time.Second, func() bool {
		return consumerCount(t, e) == 0 && len(pd.Partners()) == 0 && streamCount(t, e.js, e.q.RetryTopic()) == 0
	}, "every message acked, consumers deleted (now %v)", natstest.Now(func() any { return consumerNames(t, e) }))
}

// Through the service consumer each partner keeps its own drain rate: a
// partner whose backlog is ahead of the others' in the stream does not
// take the service consumer's whole rate (24 partners' worth). The bound
// checked is the token bucket's (a second's burst and a second's rate in
// any second, and half as much again for the scheduler's bunching), an
// invariant, not a timing.
func TestServiceConsumerKeepsEachPartnersRate(t *testing.T) {
	e := newEnv(t, natstest.URL(t), nil)
	const rate = 50
	keys, gates, ids := svcBacklog(t, e, 24, 500, 100) // the first partner's backlog comes first
	rec := newDeliveries()
	var mu sync.Mutex
	var times []time.Time
	var pdp atomic.Pointer[retryqueue.PartnerDrainer] // set once started
	var through atomic.Int32
	cfg := svcConfig(rec.handler(func(m *message.Message) {
		if string(m.Payload) == keys[0] {
			mu.Lock()
			times = append(times, time.Now())
			mu.Unlock()
			if pd := pdp.Load(); pd != nil && pd.ServiceConsumer() {
				through.Add(1)
			}
		}
	}), gates)
	cfg.Drainer.Rate, cfg.Drainer.FixedRate = rate, true
	pd := startPartnerDrainer(t, e, cfg)
	pdp.Store(pd)
	natstest.Eventually(t, 120*time.Second, func() bool { return rec.distinct() == len(ids) }, "%d drained (now %d)", len(ids), natstest.Now(func() any { return rec.distinct() }))
	rec.check(t, ids)
	if through.Load() == 0 {
		t.Fatal("no call to the first partner went through the service consumer: the test checks nothing")
	}
	mu.Lock()
	defer mu.Unlock()
	for i, j := 0, 0; j < len(times); j++ {
		for times[j].Sub(times[i]) > time.Second {
			i++
		}
		if n := j - i + 1; n > 3*(rate+rate)/2 {
			t.Fatalf("%d calls to the first partner within a second (%d through the service consumer in all), want at most %d: its own rate %d/s, burst %d", n, through.Load(), 3*(rate+rate)/2, rate, rate)
		}
	}
}
