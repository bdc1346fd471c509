package floodgate_test

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

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/floodgate-go/floodgate"
	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/internal/natstest"
	"github.com/floodgate-go/floodgate/jsq"
	"github.com/floodgate-go/floodgate/metrics"
	"github.com/floodgate-go/floodgate/partner"
	"github.com/floodgate-go/floodgate/retryqueue"
)

// partners records deliveries per partner and fails the partners marked
// down.
type partners struct {
	mu        sync.Mutex
	delivered map[string]map[string]int // partner key -> message UUID -> deliveries
	wrong     int                       // deliveries to a partner other than the message's
	down      sync.Map                  // partner key -> bool
	calls     atomic.Int64
}

func (p *partners) deliver(msg *message.Message) error {
	p.calls.Add(1)
	key := msg.Metadata.Get("partner")
	if v, ok := p.down.Load(key); ok && v.(bool) {
		return errors.New("partner down")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !strings.HasPrefix(msg.UUID, key+"-") {
		p.wrong++
	}
	if p.delivered[key] == nil {
		p.delivered[key] = map[string]int{}
	}
	p.delivered[key][msg.UUID]++
	return nil
}

func (p *partners) count(key string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.delivered[key])
}

// One call wires a breaker per partner, the retry queue and the drain into
// a router: a partner that fails trips only its own breaker, its messages
// wait in the retry queue and are delivered once it recovers; the others
// flow meanwhile. Nothing is lost or misdelivered, and the drain stops with
// the router.
func TestNewGuardsEachPartnerAndDrainsWithTheRouter(t *testing.T) {
	url := natstest.URL(t)
	nc := natstest.Conn(t, url)
	js := natstest.JetStream(t, nc)
	topic := natstest.Name(t, "orders")
	retry, dead := natstest.Name(t, "retry"), natstest.Name(t, "dead")
	natstest.DeleteStreams(t, js, jsq.StreamName(topic), retry, dead)
	baseline := ourGoroutines()

	sub, err := jsq.NewSubscriber(jsq.SubscriberConfig{URL: url, Concurrency: 4})
	if err != nil {
		t.Fatal(err)
	}
	router, err := message.NewRouter(message.RouterConfig{CloseTimeout: 20 * time.Second}, watermill.NopLogger{})
	if err != nil {
		t.Fatal(err)
	}
	p := &partners{delivered: map[string]map[string]int{}}
	p.down.Store("B", true)
	var trips sync.Map
	reg := prometheus.NewRegistry()
	fg, err := floodgate.New(context.Background(), router, floodgate.Config{
		Name: "as2", Topic: topic, Subscriber: sub, JetStream: js,
		Deliver:    p.deliver,
		Metrics:    reg,
		PartnerKey: func(m *message.Message) string { return m.Metadata.Get("partner") },
		Partner: partner.PartnerConfig{Breaker: breaker.Config{
			ConsecutiveFailures: 3, BaseOpenWindow: 100 * time.Millisecond, MaxOpenWindow: 200 * time.Millisecond,
			SuccessesToClose: 2, ProbeConcurrency: 1,
		}},
		Queue: retryqueue.Config{RetryTopic: retry, DeadLetterTopic: dead, Backoff: func(int) time.Duration { return 10 * time.Millisecond }},
		Drain: retryqueue.PartnerDrainerConfig{DiscoverInterval: 100 * time.Millisecond, Drainer: retryqueue.DrainerConfig{PollInterval: 20 * time.Millisecond}},
		OnTransition: func(pt *partner.Partner, tr breaker.Transition) {
			if tr.To == breaker.StateOpen {
				n, _ := trips.LoadOrStore(pt.Key(), new(atomic.Int64))
				n.(*atomic.Int64).Add(1)
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer fg.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	runDone := startRouter(ctx, router)

	pub, err := jsq.NewPublisher(jsq.PublisherConfig{Conn: nc})
	if err != nil {
		t.Fatal(err)
	}
	const per = 30
	keys := []string{"A", "B", "C"}
	for i := range per {
		for _, k := range keys {
			m := message.NewMessage(fmt.Sprintf("%s-%d", k, i), nil)
			m.Metadata.Set("partner", k)
			if err := pub.Publish(topic, m); err != nil {
				t.Fatal(err)
			}
		}
	}
	// A and C are delivered while B is down; B trips.
	natstest.Eventually(t, 30*time.Second, func() bool { return p.count("A") == per && p.count("C") == per }, "A and C delivered while B is down (A %d, C %d)", natstest.Now(func() any { return p.count("A") }), natstest.Now(func() any { return p.count("C") }))
	natstest.Eventually(t, 30*time.Second, func() bool { n, ok := trips.Load("B"); return ok && n.(*atomic.Int64).Load() > 0 }, "B's breaker trips")
	for _, k := range []string{"A", "C"} {
		if _, ok := trips.Load(k); ok {
			t.Errorf("partner %s tripped, though only B failed", k)
		}
	}
	p.down.Store("B", false)
	natstest.Eventually(t, 60*time.Second, func() bool { return p.count("B") == per }, "B's messages delivered after it recovered (%d of %d)", natstest.Now(func() any { return p.count("B") }), per)
	natstest.Eventually(t, 30*time.Second, func() bool {
		b, ok := fg.Partners().Lookup("B")
		return ok && b.Breaker().State() == breaker.StateClosed && !fg.Drain().HasBacklog("B")
	}, "B closed with no backlog")

	p.mu.Lock()
	if p.wrong != 0 {
		t.Errorf("%d deliveries to the wrong partner", p.wrong)
	}
	p.mu.Unlock()
	// The metrics carry each partner's own series.
	for _, c := range []struct {
		name   string
		labels map[string]string
		min    float64
	}{
		{metrics.NameCalls, map[string]string{"partner": "A", "outcome": "success"}, per},
		{metrics.NameCalls, map[string]string{"partner": "B", "outcome": "failure"}, 3},
		{metrics.NameTransitions, map[string]string{"partner": "B", "from": "closed", "to": "open"}, 1},
	} {
		if got := metricValue(t, reg, c.name, c.labels); got < c.min {
			t.Errorf("%s%v = %v, want >= %v", c.name, c.labels, got, c.min)
		}
	}
	if got := metricValue(t, reg, metrics.NameTransitions, map[string]string{"partner": "A", "from": "closed", "to": "open"}); got != 0 {
		t.Errorf("A's trips = %v, want 0", got)
	}
	if n := len(natstest.StreamMsgs(t, js, dead)); n != 0 {
		t.Errorf("%d dead letters, want 0", n)
	}

	if err := router.Close(); err != nil {
		t.Fatal(err)
	}
	natstest.Finishes(t, 30*time.Second, func() {
		if err := <-runDone; err != nil {
			t.Error(err)
		}
	}, "router.Run returns after Close")
	_ = pub.Close()
	_ = sub.Close()
	natstest.Eventually(t, 10*time.Second, func() bool { return ourGoroutines() <= baseline }, "goroutines back to the baseline %d after the router closed (now %d)", baseline, natstest.Now(func() any { return ourGoroutines() }))
}

// A bad configuration fails at New with an error naming the field.
func TestNewRejectsBadConfig(t *testing.T) {
	ok := floodgate.Config{Name: "h", Topic: "t", Subscriber: nopSub{}, Deliver: func(*message.Message) error { return nil }, JetStream: natstest.JetStream(t, natstest.Conn(t, natstest.URL(t)))}
	for name, c := range map[string]struct {
		mut   func(*floodgate.Config)
		field string
	}{
		"no name":       {func(c *floodgate.Config) { c.Name = "" }, "Name"},
		"bad topic":     {func(c *floodgate.Config) { c.Topic = "a.*" }, "Topic"},
		"no subscriber": {func(c *floodgate.Config) { c.Subscriber = nil }, "Subscriber"},
		"no deliver":    {func(c *floodgate.Config) { c.Deliver = nil }, "Deliver"},
		"no jetstream":  {func(c *floodgate.Config) { c.JetStream = nil }, "JetStream"},
		"queue source":  {func(c *floodgate.Config) { c.Queue.Source = "x" }, "Queue.Source"},
		"ordering":      {func(c *floodgate.Config) { c.Queue.OrderingKey = func(*message.Message) string { return "" } }, "Queue.OrderingKey"},
		"drain queue":   {func(c *floodgate.Config) { c.Drain.Gate = func(string) retryqueue.Gate { return nil } }, "Drain.Gate"},
		// A drain on another stream than the diversions' would never drain them.
		"drain stream": {func(c *floodgate.Config) { c.Drain.Drainer.Stream = "elsewhere" }, "Drain.Drainer.Stream"},
		"drain stream, other retry topic": {func(c *floodgate.Config) {
			c.Queue.RetryTopic, c.Drain.Drainer.Stream = "r", retryqueue.DefaultRetryTopic
		}, "Drain.Drainer.Stream"},
		// A drained delivery must settle within its consumer's AckWait.
		"timeout past ack wait": {func(c *floodgate.Config) { c.Timeout = 20 * time.Second; c.Drain.Drainer.AckWait = 10 * time.Second }, "Drain.Drainer.AckWait"},
		// The packages' own checks name the floodgate.Config field too.
		"queue field":    {func(c *floodgate.Config) { c.Queue.MaxAttempts = -1 }, "Config.Queue: retryqueue: invalid config: MaxAttempts"},
		"bad retry":      {func(c *floodgate.Config) { c.Queue.RetryTopic = "a.b" }, "Config.Queue"},
		"partner field":  {func(c *floodgate.Config) { c.Partner.MaxInFlight = -1 }, "Config.Partner: partner: invalid config"},
		"drain field":    {func(c *floodgate.Config) { c.Drain.MaxInFlight = -1 }, "Config.Drain: retryqueue: invalid config: MaxInFlight"},
		"metadata limit": {func(c *floodgate.Config) { c.MaxMetadataSize = 100 }, "MaxMetadataSize is 100, want 0 (the default, 32768 bytes), -1 (no limit) or 1024..16777216"},
	} {
		c2 := ok
		c.mut(&c2)
		r, _ := message.NewRouter(message.RouterConfig{}, watermill.NopLogger{})
		_, err := floodgate.New(context.Background(), r, c2)
		if !errors.Is(err, floodgate.ErrInvalidConfig) || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%s: err = %v, want ErrInvalidConfig naming %s", name, err, c.field)
		}
	}
	r, _ := message.NewRouter(message.RouterConfig{}, watermill.NopLogger{})
	same := ok
	same.Drain.Drainer.Stream = retryqueue.DefaultRetryTopic // the queue's own: allowed
	fg, err := floodgate.New(context.Background(), r, same)
	if err != nil {
		t.Fatalf("Drain.Drainer.Stream naming the queue's retry stream: %v", err)
	}
	defer fg.Close()
	// A second floodgate with the same Name on that router is an error
	// naming Name, not Watermill's duplicate-handler panic.
	for _, name := range []string{ok.Name, floodgate.DrainHandlerName(ok.Name)} {
		dup := ok
		dup.Name = name
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Errorf("New with Name %q already on the router panicked: %v", name, p)
				}
			}()
			if _, err := floodgate.New(context.Background(), r, dup); !errors.Is(err, floodgate.ErrInvalidConfig) || !strings.Contains(err.Error(), "Name") {
				t.Errorf("New with Name %q already on the router: err = %v, want ErrInvalidConfig naming Name", name, err)
			}
		}()
	}
	bad := ok
	bad.Partner.Breaker.ConsecutiveFailures = -1
	r, _ = message.NewRouter(message.RouterConfig{}, watermill.NopLogger{})
	if _, err := floodgate.New(context.Background(), r, bad); err == nil || !strings.Contains(err.Error(), "ConsecutiveFailures") {
		t.Errorf("bad breaker template: err = %v, want an error naming ConsecutiveFailures", err)
	}
}

type nopSub struct{}

func (nopSub) Subscribe(context.Context, string) (<-chan *message.Message, error) {
	return nil, errors.New("nop")
}
func (nopSub) Close() error { return nil }

// startRouter runs router until ctx is done and returns once it is
// running; the channel gets Run's result.
func startRouter(ctx context.Context, router *message.Router) <-chan error {
	done := make(chan error, 1)
	go func() { done <- router.Run(ctx) }()
	<-router.Running()
	return done
}

// ourGoroutines counts the goroutines running floodgate's or Watermill's
// code (other than this test's own), leaving out the embedded NATS server's
// and the NATS clients'.
func ourGoroutines() int {
	buf := make([]byte, 1<<22)
	n := 0
	for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
		if strings.Contains(g, "floodgate_test.") || strings.Contains(g, "nats-server/v2/server") {
			continue
		}
		if strings.Contains(g, "floodgate-go/floodgate/") || strings.Contains(g, "ThreeDotsLabs/watermill") {
			n++
		}
	}
	return n
}

// metricValue is the value of the series of name whose labels include
// labels, or -1 when there is none.
func metricValue(t *testing.T, g prometheus.Gatherer, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for k, v := range labels {
				if have[k] != v {
					continue next
				}
			}
			if c := m.GetCounter(); c != nil {
				return c.GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	return -1
}
