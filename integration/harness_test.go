package integration

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/time/rate"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/deliver/as2"
	"github.com/floodgate-go/floodgate/deliver/as2/as2partner"
	"github.com/floodgate-go/floodgate/internal/natstest"
	"github.com/floodgate-go/floodgate/jsq"
	"github.com/floodgate-go/floodgate/middleware"
	"github.com/floodgate-go/floodgate/retryqueue"
)

const (
	ourID     = "FLOODGATE-IT"
	partnerID = "PARTNER-IT"
	idDomain  = "it.floodgate"
)

// partner is an AS2 partner on a real HTTP server whose health the test
// switches: down answers HTTP 503; a capacity answers 503 beyond it.
type partner struct {
	as2  *as2partner.Partner
	srv  *httptest.Server
	down atomic.Bool
	lim  atomic.Pointer[rate.Limiter]

	errors atomic.Int64

	mu    sync.Mutex
	order []string // Message-IDs of processed requests, in order
}

func newPartner(t testing.TB) *partner {
	t.Helper()
	p, err := as2partner.New(as2partner.Config{AS2ID: partnerID})
	if err != nil {
		t.Fatal(err)
	}
	p.Start()
	pt := &partner{as2: p}
	pt.srv = httptest.NewServer(pt)
	t.Cleanup(pt.srv.Close)
	return pt
}

func (p *partner) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if p.down.Load() {
		p.errors.Add(1)
		http.Error(w, "down", http.StatusServiceUnavailable)
		return
	}
	if l := p.lim.Load(); l != nil && !l.Allow() {
		p.errors.Add(1)
		http.Error(w, "over capacity", http.StatusServiceUnavailable)
		return
	}
	rw := &statusWriter{ResponseWriter: w}
	p.as2.ServeHTTP(rw, r)
	if rw.status == 0 || rw.status == http.StatusOK {
		p.mu.Lock()
		p.order = append(p.order, r.Header.Get("Message-ID"))
		p.mu.Unlock()
	}
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

// deliveryOrder returns the Message-IDs the partner processed, in order.
func (p *partner) deliveryOrder() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.order...)
}

// setCapacity limits the partner to perMsg messages per second (0: none).
func (p *partner) setCapacity(perSec float64) {
	if perSec <= 0 {
		p.lim.Store(nil)
		return
	}
	p.lim.Store(rate.NewLimiter(rate.Limit(perSec), max(1, int(perSec/20))))
}

// tally counts unique deliveries and duplicates of ids.
func (p *partner) tally(ids []string) (unique, dups, lost int) {
	rec := p.as2.Received()
	for _, id := range ids {
		n := rec[as2.MessageID(id, idDomain)]
		switch {
		case n == 0:
			lost++
		default:
			unique++
			dups += n - 1
		}
	}
	return unique, dups, lost
}

// topics names one pipeline's streams.
type topics struct{ Source, Retry, Dead string }

func newTopics(t testing.TB) topics {
	return topics{natstest.Name(t, "src"), natstest.Name(t, "retry"), natstest.Name(t, "dead")}
}

// consumerConfig is everything a consumer (in this process or a child
// process) needs.
type consumerConfig struct {
	NATSURL, PartnerURL string
	Topics              topics
	// MaxAckPending of the source consumer; 0 = jsq default.
	MaxAckPending int
	// ForceOpen keeps the breaker open.
	ForceOpen bool
	// DrainRate is the drainer's start rate; 0 = 50.
	DrainRate float64
	// Ordered turns on per-key ordering by the "key" metadata, with the
	// check the middleware gets for it (Queue.Holds before the breaker),
	// and one source pull loop, so live consumption is ordered too.
	Ordered bool
	// WatermillNATS consumes the source topic with watermill-nats'
	// pkg/jetstream subscriber through package wmnats (wmnats_test.go),
	// one router handler per unit of concurrency, instead of jsq.
	WatermillNATS bool
	// PublishTimeout bounds each diversion's publish; 0 = 2 s.
	PublishTimeout time.Duration
}

// consumer is the floodgate side: router (source topic, guarded AS2
// delivery) and drainer, with a breaker and retry queue.
type consumer struct {
	b       *breaker.Breaker
	q       *retryqueue.Queue
	drainer *retryqueue.Drainer
	router  *message.Router
	sub     message.Subscriber
	pub     *jsq.Publisher
	nc      *nats.Conn

	mu    sync.Mutex
	trans []transition

	events struct{ diverted, delivered, dead, nacked atomic.Int64 }

	cancel context.CancelFunc
	done   sync.WaitGroup
}

type transition struct {
	to breaker.State
	at time.Time
}

// startConsumer builds and runs a consumer until stop or ctx ends.
func startConsumer(ctx context.Context, cfg consumerConfig) (*consumer, error) {
	c := &consumer{}
	b, err := breaker.New(breaker.Config{
		Name:                 "it",
		WindowSize:           100,
		MinimumCalls:         20,
		FailureRateThreshold: 0.5,
		SlowCallDuration:     2 * time.Second,
		BaseOpenWindow:       200 * time.Millisecond,
		MaxOpenWindow:        time.Second,
		Jitter:               0.2,
		ProbeConcurrency:     2,
		SuccessesToClose:     5,
	})
	if err != nil {
		return nil, err
	}
	c.b = b
	if cfg.ForceOpen {
		b.ForceOpen()
	}
	nc, err := jsq.Connect(cfg.NATSURL)
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	publishTimeout := cfg.PublishTimeout
	if publishTimeout == 0 {
		publishTimeout = 2 * time.Second
	}
	c.pub, err = jsq.NewPublisher(jsq.PublisherConfig{Conn: nc, PublishTimeout: publishTimeout})
	if err != nil {
		return nil, err
	}
	qcfg := retryqueue.Config{
		Publisher:       c.pub,
		Source:          cfg.Topics.Source,
		Handler:         "deliver",
		RetryTopic:      cfg.Topics.Retry,
		DeadLetterTopic: cfg.Topics.Dead,
		PublishTimeout:  publishTimeout,
		Backoff:         retryqueue.ExponentialBackoff(200*time.Millisecond, 2*time.Second),
		MaxAttempts:     1000,
	}
	if cfg.Ordered {
		qcfg.OrderingKey = func(m *message.Message) string { return m.Metadata.Get("key") }
	}
	pctx, pcancel := context.WithTimeout(ctx, time.Minute)
	defer pcancel()
	for {
		if err = retryqueue.Provision(pctx, js, qcfg); err == nil {
			break
		}
		if pctx.Err() != nil {
			return nil, err
		}
		time.Sleep(100 * time.Millisecond)
	}
	if c.q, err = retryqueue.New(qcfg); err != nil {
		return nil, err
	}
	sender, err := as2.NewSender(as2.Config{
		URL: cfg.PartnerURL, From: ourID, To: partnerID,
		Timeout: 3 * time.Second, MessageIDDomain: idDomain,
	})
	if err != nil {
		return nil, err
	}
	var drainer *retryqueue.Drainer
	guard, err := middleware.New(middleware.Config{
		Breaker: b, Queue: c.q, Timeout: 3 * time.Second,
		OnEvent: func(ev middleware.Event) {
			switch ev.Action {
			case middleware.Diverted:
				c.events.diverted.Add(1)
			case middleware.Delivered:
				c.events.delivered.Add(1)
			case middleware.DeadLettered:
				c.events.dead.Add(1)
			case middleware.Nacked:
				c.events.nacked.Add(1)
			}
			if ev.Admitted {
				drainer.Observe(ev.UUID, ev.Action == middleware.Diverted && ev.Reason == string(retryqueue.ReasonFailure), ev.Latency)
			}
		},
	})
	if err != nil {
		return nil, err
	}
	guarded := guard(func(m *message.Message) ([]*message.Message, error) {
		_, err := sender.Send(m.Context(), m.UUID, m.Payload)
		return nil, err
	})
	if cfg.Ordered {
		// The lines proposed for the middleware, before it asks the
		// breaker: a live message whose key has backlog queues behind it.
		inner := guarded
		guarded = func(m *message.Message) ([]*message.Message, error) {
			if c.q.Holds(m) {
				if err := c.q.Divert(m.Context(), m, retryqueue.ReasonOrdering, nil); err != nil {
					return nil, err
				}
				c.events.diverted.Add(1)
				return nil, nil
			}
			return inner(m)
		}
	}
	concurrency := 8
	if cfg.Ordered {
		concurrency = 1
	}
	rate0 := cfg.DrainRate
	if rate0 == 0 {
		rate0 = 50
	}
	drainer, err = retryqueue.NewDrainer(retryqueue.DrainerConfig{
		JetStream: js, Queue: c.q, Handler: guarded, Gate: middleware.DrainGate(b),
		Rate: rate0, SlowCall: b.Config().SlowCallDuration,
		AckWait: 5 * time.Second, PollInterval: 20 * time.Millisecond,
	})
	if err != nil {
		return nil, err
	}
	c.drainer = drainer
	b.AddListener(func(t breaker.Transition) {
		c.mu.Lock()
		c.trans = append(c.trans, transition{t.To, time.Now()})
		c.mu.Unlock()
		drainer.Wake()
	})
	handlers := 1
	if cfg.WatermillNATS {
		c.sub, err = newWatermillNATSSubscriber(cfg.NATSURL, wmnatsDurable(cfg.Topics.Source), concurrency)
		handlers = concurrency
	} else {
		c.sub, err = jsq.NewSubscriber(jsq.SubscriberConfig{
			URL: cfg.NATSURL, Concurrency: concurrency, AckWait: 5 * time.Second, MaxAckPending: cfg.MaxAckPending,
			NakDelay: func(uint64) time.Duration { return 200 * time.Millisecond },
		})
	}
	if err != nil {
		return nil, err
	}
	c.router, err = message.NewRouter(message.RouterConfig{CloseTimeout: 5 * time.Second}, watermill.NopLogger{})
	if err != nil {
		return nil, err
	}
	for i := range handlers {
		name := "deliver"
		if i > 0 {
			name = fmt.Sprint("deliver-", i)
		}
		c.router.AddConsumerHandler(name, cfg.Topics.Source, c.sub, func(m *message.Message) error {
			_, err := guarded(m)
			return err
		})
	}
	rctx, cancel := context.WithCancel(ctx)
	c.cancel = cancel
	c.done.Add(2)
	go func() { defer c.done.Done(); _ = c.router.Run(rctx) }()
	go func() { defer c.done.Done(); _ = drainer.Run(rctx) }()
	select {
	case <-c.router.Running():
	case <-time.After(time.Minute):
		cancel()
		return nil, errors.New("router did not start")
	}
	c.nc = nc
	return c, nil
}

// stop closes the router (acks in flight are sent) and the drainer.
func (c *consumer) stop() {
	c.cancel()
	_ = c.router.Close()
	c.done.Wait()
	c.nc.Close() // after the router: no diversion loses its publisher
}

// trips returns the transitions to open at or after t.
func (c *consumer) tripsSince(t time.Time) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, tr := range c.trans {
		if tr.to == breaker.StateOpen && !tr.at.Before(t) {
			n++
		}
	}
	return n
}

// closedSince returns the first transition to closed at or after t.
func (c *consumer) closedSince(t time.Time) (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, tr := range c.trans {
		if tr.to == breaker.StateClosed && !tr.at.Before(t) {
			return tr.at, true
		}
	}
	return time.Time{}, false
}

// producer publishes numbered messages to a topic at a rate.
type producer struct {
	pub   *jsq.Publisher
	topic string

	keys int // > 0: metadata "key" cycles through this many keys

	mu  sync.Mutex
	ids []string
	n   int
}

func newProducer(t testing.TB, url, topic string) *producer {
	t.Helper()
	pub, err := jsq.NewPublisher(jsq.PublisherConfig{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pub.Close() })
	return &producer{pub: pub, topic: topic}
}

// publish publishes n messages now, retrying each until confirmed.
func (p *producer) publish(ctx context.Context, n int) error {
	for range n {
		p.mu.Lock()
		p.n++
		id := fmt.Sprintf("%s-%06d", p.topic, p.n)
		p.mu.Unlock()
		m := message.NewMessage(id, []byte("ISA*00*PO "+id+"~"))
		if p.keys > 0 {
			m.Metadata.Set("key", fmt.Sprintf("k%d", p.n%p.keys))
		}
		for {
			err := p.pub.PublishContext(ctx, p.topic, m)
			if err == nil {
				break
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			time.Sleep(50 * time.Millisecond)
		}
		p.mu.Lock()
		p.ids = append(p.ids, id)
		p.mu.Unlock()
	}
	return nil
}

// run publishes at perSec until ctx ends.
func (p *producer) run(ctx context.Context, perSec float64) {
	lim := rate.NewLimiter(rate.Limit(perSec), 1)
	for lim.Wait(ctx) == nil {
		if p.publish(ctx, 1) != nil {
			return
		}
	}
}

func (p *producer) published() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.ids...)
}

// backlog returns the retry backlog of c's drainer, -1 on error. Its
// deadline is a hang guard (natstest.ReadGuard), not a bound: a test that
// reads the backlog once, after a poll, must not see -1 because the
// machine is loaded.
func backlog(c *consumer) int {
	ctx, cancel := context.WithTimeout(context.Background(), natstest.ReadGuard)
	defer cancel()
	n, err := c.drainer.Backlog(ctx)
	if err != nil {
		return -1
	}
	return int(n)
}

func round2(x float64) float64 { return math.Round(x*100) / 100 }
