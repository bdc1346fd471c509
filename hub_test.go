package floodgate_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/floodgate-go/floodgate"
	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/internal/natstest"
	"github.com/floodgate-go/floodgate/jsq"
	"github.com/floodgate-go/floodgate/middleware"
	"github.com/floodgate-go/floodgate/partner"
	"github.com/floodgate-go/floodgate/retryqueue"
)

// hub is a set of partners behind one or more floodgates. Each message's
// UUID is "<partner>-<n>": its intended partner, set by the producer. The
// hub delivers a message to the partner floodgate routed it to (the
// drained route's partner, or the live message's partner key) and counts a
// misdelivery when that is not the intended one.
type hub struct {
	peers     map[string]*peer // fixed after newHub
	order     []string
	work      time.Duration // each delivery's latency (a partner's round trip)
	probeWork time.Duration // a probe's extra latency, so probes overlap

	mu        sync.Mutex
	delivered map[string]int // UUID -> deliveries
	wrong     atomic.Int64
	dups      atomic.Int64
	healthy   atomic.Int64    // unique deliveries to partners without an outage
	latencies []time.Duration // publish -> first delivery, partners without an outage (when timing)
	timing    bool
}

// peer is one partner and what the test observed of it.
type peer struct {
	key    string
	outage bool // given an outage during the run

	down      atomic.Bool  // fails every call that is not a probe
	failProbe atomic.Int64 // the next this-many probes fail (fragile recovery)

	probes      atomic.Int64 // probes in flight (all replicas)
	maxProbes   atomic.Int64
	probesTotal atomic.Int64
	trips       atomic.Int64 // transitions to open (all replicas)
	closes      atomic.Int64 // transitions to closed
}

func newHub(n int, outages ...int) *hub {
	h := &hub{peers: map[string]*peer{}, delivered: map[string]int{}}
	for i := range n {
		k := fmt.Sprintf("p%03d", i)
		h.peers[k] = &peer{key: k}
		h.order = append(h.order, k)
	}
	for _, i := range outages {
		h.peers[h.order[i]].outage = true
	}
	return h
}

// startOutage makes p fail every call until probes come, then fail the
// first failProbes probes, then recover.
func (p *peer) startOutage(failProbes int) {
	p.failProbe.Store(int64(failProbes))
	p.down.Store(true)
}

// via is the partner floodgate routed msg to.
func via(msg *message.Message) string {
	if k, ok := retryqueue.DrainedPartner(msg.Context(), msg); ok {
		return k
	}
	return msg.Metadata.Get("partner")
}

func intended(uuid string) string { k, _, _ := strings.Cut(uuid, "-"); return k }

func (h *hub) deliver(msg *message.Message) error {
	to := via(msg)
	p := h.peers[to]
	if p == nil {
		h.wrong.Add(1)
		return fmt.Errorf("no partner %q", to)
	}
	probe := middleware.IsProbe(msg.Context())
	if probe {
		n := p.probes.Add(1)
		defer p.probes.Add(-1)
		for m := p.maxProbes.Load(); n > m && !p.maxProbes.CompareAndSwap(m, n); m = p.maxProbes.Load() {
		}
		p.probesTotal.Add(1)
		time.Sleep(h.probeWork)
	}
	if h.work > 0 {
		time.Sleep(h.work)
	}
	if probe {
		if p.failProbe.Add(-1) >= 0 {
			return errors.New("partner fragile: probe failed")
		}
		p.down.Store(false)
	} else if p.down.Load() {
		return errors.New("partner down")
	}
	now := time.Now() // the partner has the message
	if intended(msg.UUID) != to {
		h.wrong.Add(1)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.delivered[msg.UUID]++
	if h.delivered[msg.UUID] > 1 {
		h.dups.Add(1)
		return nil
	}
	if !p.outage {
		h.healthy.Add(1)
		if h.timing {
			if sent, err := strconv.ParseInt(msg.Metadata.Get("sent"), 10, 64); err == nil {
				h.latencies = append(h.latencies, now.Sub(time.Unix(0, sent)))
			}
		}
	}
	return nil
}

func (h *hub) onTransition(p *partner.Partner, t breaker.Transition) {
	pe := h.peers[p.Key()]
	if pe == nil {
		return
	}
	switch t.To {
	case breaker.StateOpen:
		pe.trips.Add(1)
	case breaker.StateClosed:
		pe.closes.Add(1)
	}
}

// inOutage reports whether an outage partner is down or its breaker not
// closed.
func (h *hub) inOutage() bool {
	for _, p := range h.peers {
		if p.outage && (p.down.Load() || p.trips.Load() > p.closes.Load()) {
			return true
		}
	}
	return false
}

// lost returns the published UUIDs never delivered.
func (h *hub) lost(published []string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, id := range published {
		if h.delivered[id] == 0 {
			out = append(out, id)
		}
	}
	return out
}

func (h *hub) uniqueDelivered() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.delivered)
}

// p99 returns the 99th percentile of the recorded latencies.
func (h *hub) p99() (time.Duration, int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	l := append([]time.Duration(nil), h.latencies...)
	if len(l) == 0 {
		return 0, 0
	}
	sort.Slice(l, func(i, j int) bool { return l[i] < l[j] })
	return l[(len(l)*99)/100], len(l)
}

// env is one NATS server for a test or benchmark.
type env struct {
	url string
	nc  *nats.Conn
	js  jetstream.JetStream
	pub *jsq.Publisher
}

func newEnv(t testing.TB) *env {
	url := natstest.URL(t)
	nc := natstest.Conn(t, url)
	pub, err := jsq.NewPublisher(jsq.PublisherConfig{Conn: nc})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pub.Close() })
	return &env{url: url, nc: nc, js: natstest.JetStream(t, nc), pub: pub}
}

// route is one service's topic and retry and dead-letter streams.
type route struct{ topic, retry, dead string }

func newRoute(t testing.TB, e *env) route {
	r := route{natstest.Name(t, "orders"), natstest.Name(t, "retry"), natstest.Name(t, "dead")}
	natstest.DeleteStreams(t, e.js, jsq.StreamName(r.topic), r.retry, r.dead)
	return r
}

// fastBreaker is the partners' template: short open windows so outages
// and recoveries take a fraction of a second.
func fastBreaker() partner.PartnerConfig {
	return partner.PartnerConfig{Breaker: breaker.Config{
		ConsecutiveFailures: 3, BaseOpenWindow: 30 * time.Millisecond, MaxOpenWindow: 120 * time.Millisecond,
		SuccessesToClose: 2, ProbeConcurrency: probeCap,
	}}
}

const probeCap = 2

// replica is one floodgate.New on its own router, subscriber and
// connection: one replica of the service.
type replica struct {
	fg     *floodgate.Floodgate
	router *message.Router
	done   chan error
	cancel context.CancelFunc
	stop   func() // closes the router and waits for it; idempotent
}

// startReplica builds floodgate on a new router for h on rt, lets mut
// adjust the config, and runs the router until the test ends.
func startReplica(t testing.TB, e *env, rt route, h *hub, mut func(*floodgate.Config)) *replica {
	t.Helper()
	nc := natstest.Conn(t, e.url)
	js := natstest.JetStream(t, nc)
	sub, err := jsq.NewSubscriber(jsq.SubscriberConfig{URL: e.url, Concurrency: 8})
	if err != nil {
		t.Fatal(err)
	}
	router, err := message.NewRouter(message.RouterConfig{CloseTimeout: 20 * time.Second}, watermill.NopLogger{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := floodgate.Config{
		Name: "as2", Topic: rt.topic, Subscriber: sub, JetStream: js,
		Deliver:      h.deliver,
		PartnerKey:   func(m *message.Message) string { return m.Metadata.Get("partner") },
		Partner:      fastBreaker(),
		Queue:        retryqueue.Config{RetryTopic: rt.retry, DeadLetterTopic: rt.dead, Backoff: func(int) time.Duration { return 10 * time.Millisecond }},
		Drain:        retryqueue.PartnerDrainerConfig{DiscoverInterval: 100 * time.Millisecond, Drainer: retryqueue.DrainerConfig{PollInterval: 20 * time.Millisecond}},
		OnTransition: h.onTransition,
	}
	if mut != nil {
		mut(&cfg)
	}
	fg, err := floodgate.New(context.Background(), router, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &replica{fg: fg, router: router, done: make(chan error, 1), cancel: cancel}
	go func() { r.done <- router.Run(ctx) }()
	<-router.Running()
	r.stop = sync.OnceFunc(func() {
		_ = router.Close()
		cancel()
		<-r.done
		_ = fg.Close()
		_ = sub.Close()
	})
	t.Cleanup(r.stop)
	return r
}

// publish publishes message n for partner key.
// A message marked timed has its delivery latency recorded when the hub
// is timing.
func (e *env) publish(t testing.TB, topic, key string, n int, timed bool) string {
	id := fmt.Sprintf("%s-%d", key, n)
	m := message.NewMessage(id, nil)
	m.Metadata.Set("partner", key)
	if timed {
		m.Metadata.Set("sent", strconv.FormatInt(time.Now().UnixNano(), 10))
	}
	if err := e.pub.Publish(topic, m); err != nil {
		t.Fatal(err)
	}
	return id
}

// settled reports whether key's breaker is closed with no backlog on r.
func (r *replica) settled(key string) bool {
	p, ok := r.fg.Partners().Lookup(key)
	return ok && p.Breaker().State() == breaker.StateClosed && !r.fg.Drain().HasBacklog(key)
}
