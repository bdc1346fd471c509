package integration

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wmjs "github.com/ThreeDotsLabs/watermill-nats/v2/pkg/jetstream"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/floodgate-go/floodgate/internal/natstest"
	"github.com/floodgate-go/floodgate/jsq"
	"github.com/floodgate-go/floodgate/retryqueue"
)

// The recipe of the README's "Using watermill-nats": watermill-nats'
// pkg/jetstream subscriber made safe for floodgate's middleware. The tests
// below run the same checks as jsq's with it: outage and drain, close
// mid-diversion, restart, a multi-valued header, the retry stream away.
const (
	// wmnatsAckWait is the consumer's AckWait and the subscriber's
	// AckWaitTimeout. It must exceed the longest a message can wait in
	// a subscription plus its own handling: (PullMaxMessages + 1) × the
	// longest handler call, the middleware's Timeout plus the diversion's
	// PublishTimeout (3 s + 2 s in this harness): 2 × 5 s < 12 s.
	wmnatsAckWait = 12 * time.Second
	// wmnatsPrefetch is PullMaxMessages: messages a subscription holds
	// beyond the one in its handler.
	wmnatsPrefetch = 1
)

// wmnatsDurable names the recipe's durable consumer on topic's stream.
func wmnatsDurable(topic string) string { return "floodgate_wmnats_" + jsq.StreamName(topic) }

// newWatermillNATSSubscriber is the recipe: a watermill-nats pkg/jetstream
// subscriber on the durable consumer named durable, for handlers router
// handlers on one topic (each is one subscription, handled one message at
// a time), wrapped in a [closeGate].
func newWatermillNATSSubscriber(url, durable string, handlers int) (*closeGate, error) {
	// A connection of its own: Subscriber.Close drains its connection.
	nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		return nil, err
	}
	g := &closeGate{}
	g.Subscriber, err = wmjs.NewSubscriber(wmjs.SubscriberConfig{
		Conn:   nc,
		Logger: watermill.NopLogger{},
		// Wait for the handler as long as the server waits for the ack.
		AckWaitTimeout: wmnatsAckWait,
		// A durable consumer, never deleted on Close (no closer).
		ResourceInitializer: func(ctx context.Context, js jetstream.JetStream, topic string) (jetstream.Consumer, func(context.Context, watermill.LoggerAdapter), error) {
			s, err := jsq.EnsureStream(ctx, js, topic) // or js.Stream: the stream your publisher writes
			if err != nil {
				return nil, nil, err
			}
			c, err := s.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
				Durable:       durable,
				AckPolicy:     jetstream.AckExplicitPolicy,
				DeliverPolicy: jetstream.DeliverAllPolicy,
				AckWait:       wmnatsAckWait,
				MaxDeliver:    -1, // the broker never gives up; floodgate dead-letters
				MaxAckPending: handlers * (wmnatsPrefetch + 1),
			})
			return gatedConsumer{c, g}, nil, err
		},
		// Bounded prefetch: no message waits in the client past AckWait.
		ConsumeOptions: []jetstream.PullConsumeOpt{jetstream.PullMaxMessages(wmnatsPrefetch)},
		// A nack (diversion not confirmed) is redelivered after a pause;
		// never a MaxRetryDelay, whose Term drops the message.
		NakDelay: wmjs.NewStaticDelay(200 * time.Millisecond),
		AckAsync: false, // DoubleAck: acked only once the server confirms
		// Never fails: a multi-valued header is dead-lettered as malformed.
		Unmarshaler: jsq.Unmarshaler{},
	})
	if err != nil {
		nc.Close()
		return nil, err
	}
	return g, nil
}

// closeGate wraps the watermill-nats pkg/jetstream subscriber (v2.1.3) to
// close it safely. Its Close stops taking messages (one arriving is nacked
// with a short delay), waits for the messages in its handlers to be acked
// or nacked, and only then closes the subscriber. Closed at once, the
// subscriber drops the acks of messages still in handlers (each is
// redelivered after AckWait) and may send a message on the channel it is
// closing: a data race, and a "send on closed channel" panic. The end of
// the context given to Subscribe closes that channel too, so Subscribe
// hides it from the subscriber and runs Close when it ends.
type closeGate struct {
	*wmjs.Subscriber

	mu       sync.Mutex
	closing  bool
	inflight sync.WaitGroup
}

// Subscribe subscribes with a context the subscriber never sees
// cancelled; when ctx ends (the router's Run context) it runs Close.
func (g *closeGate) Subscribe(ctx context.Context, topic string) (<-chan *message.Message, error) {
	out, err := g.Subscriber.Subscribe(context.WithoutCancel(ctx), topic)
	if err == nil {
		go func() { <-ctx.Done(); _ = g.Close() }()
	}
	return out, err
}

// Close stops taking messages, waits for those in handlers (each at most
// AckWaitTimeout), then closes the subscriber. The router calls it once
// per handler, concurrently.
func (g *closeGate) Close() error {
	g.mu.Lock()
	g.closing = true
	g.mu.Unlock()
	g.inflight.Wait()
	return g.Subscriber.Close()
}

// gatedConsumer passes each message to the subscriber only while its gate
// is open, and tracks it until the subscriber's callback returns (acked,
// nacked or timed out).
type gatedConsumer struct {
	jetstream.Consumer
	g *closeGate
}

func (c gatedConsumer) Consume(cb jetstream.MessageHandler, opts ...jetstream.PullConsumeOpt) (jetstream.ConsumeContext, error) {
	return c.Consumer.Consume(func(msg jetstream.Msg) {
		c.g.mu.Lock()
		if c.g.closing {
			c.g.mu.Unlock()
			_ = msg.NakWithDelay(500 * time.Millisecond) // for the next run
			return
		}
		c.g.inflight.Add(1)
		c.g.mu.Unlock()
		defer c.g.inflight.Done()
		cb(msg)
	}, opts...)
}

// wmnatsSetup is one test's server, streams, partner and consumer config.
func wmnatsSetup(t *testing.T) (consumerConfig, *partner, jetstream.JetStream, context.Context) {
	t.Helper()
	skipShort(t)
	t.Parallel()
	url := natstest.URL(t)
	tp := newTopics(t)
	js := natstest.JetStream(t, natstest.Conn(t, url))
	natstest.DeleteStreams(t, js, tp.Source, tp.Retry, tp.Dead)
	p := newPartner(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	if _, err := jsq.EnsureStream(ctx, js, tp.Source); err != nil { // as the publishing side would
		t.Fatal(err)
	}
	return consumerConfig{NATSURL: url, PartnerURL: p.srv.URL, Topics: tp, WatermillNATS: true}, p, js, ctx
}

// retryCopies counts the messages of ids in the retry stream: unique ones
// and the extra copies (a message diverted again after a redelivery).
func retryCopies(t *testing.T, js jetstream.JetStream, stream string, ids []string) (unique, extra int) {
	t.Helper()
	n := map[string]int{}
	for _, m := range natstest.StreamMsgs(t, js, stream) {
		n[m.UUID]++
	}
	for _, id := range ids {
		if n[id] > 0 {
			unique++
			extra += n[id] - 1
		}
	}
	return unique, extra
}

// TestWatermillNATSOutageAndDrain: through the recipe, a partner outage
// and the drain after it lose nothing; duplicates are counted and logged.
func TestWatermillNATSOutageAndDrain(t *testing.T) {
	cfg, p, _, ctx := wmnatsSetup(t)
	c, err := startConsumer(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.stop()
	prod := newProducer(t, cfg.NATSURL, cfg.Topics.Source)
	if err := prod.publish(ctx, 50); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, time.Minute, func() bool { return c.events.delivered.Load() >= 50 }, "healthy phase")
	p.down.Store(true)
	const outage = 300
	if err := prod.publish(ctx, outage); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 2*time.Minute, func() bool { return c.events.diverted.Load() >= outage },
		"outage: %d of %d diverted", natstest.Now(func() any { return c.events.diverted.Load() }), outage)
	peak := backlog(c)
	p.down.Store(false)
	if err := prod.publish(ctx, 50); err != nil { // live traffic during the drain
		t.Fatal(err)
	}
	ids := prod.published()
	natstest.Eventually(t, 2*time.Minute, func() bool { _, _, lost := p.tally(ids); return lost == 0 && backlog(c) == 0 },
		"everything delivered (backlog %d)", natstest.Now(func() any { return backlog(c) }))
	unique, dups, lost := p.tally(ids)
	t.Logf("watermill-nats recipe: produced %d, delivered %d unique, duplicates %d, lost %d; backlog at recovery %d; drainer %+v",
		len(ids), unique, dups, lost, peak, c.drainer.Stats())
	if lost != 0 || unique != len(ids) {
		t.Errorf("lost %d of %d", lost, len(ids))
	}
}

// TestWatermillNATSCloseMidDiversion: closing the router (and so the
// watermill-nats subscriber) while messages are being diverted loses
// nothing: after a restart on the same durable every message is in the
// retry stream. A message diverted but not acked at the close is
// redelivered and diverted again: at most MaxAckPending extra copies.
func TestWatermillNATSCloseMidDiversion(t *testing.T) {
	cfg, _, js, ctx := wmnatsSetup(t)
	cfg.ForceOpen = true
	const n = 1000 // stored first, so the consumer runs ahead of no producer
	prod := newProducer(t, cfg.NATSURL, cfg.Topics.Source)
	if err := prod.publish(ctx, n); err != nil {
		t.Fatal(err)
	}
	c, err := startConsumer(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, time.Minute, func() bool { return c.events.diverted.Load() >= 50 }, "diverting")
	c.stop()
	first := c.events.diverted.Load()
	if first >= n {
		t.Log("all diverted before the close; the close raced nothing")
	}
	c2, err := startConsumer(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.stop()
	ids := prod.published()
	natstest.Eventually(t, 2*time.Minute, func() bool {
		unique, _ := retryCopies(t, js, cfg.Topics.Retry, ids)
		return unique == len(ids)
	}, "every message in the retry stream")
	_, extra := retryCopies(t, js, cfg.Topics.Retry, ids)
	bound := 8 * (wmnatsPrefetch + 1) // MaxAckPending: the harness runs 8 handlers
	t.Logf("closed after %d of %d diversions; %d diverted twice (bound %d)", first, n, extra, bound)
	if extra > bound {
		t.Errorf("%d messages diverted again after the restart, more than MaxAckPending %d: acked messages were redelivered", extra, bound)
	}
}

// TestWatermillNATSRestartResendsOnlyUnacked: a second run on the same
// durable consumer does not re-deliver acked messages. The first run is
// closed while delivering; only the messages delivered but not yet acked
// at the close (at most MaxAckPending) may reach the partner twice, where
// the adapter's default consumer, deleted on Close, re-sends the stream.
func TestWatermillNATSRestartResendsOnlyUnacked(t *testing.T) {
	cfg, p, _, ctx := wmnatsSetup(t)
	const n = 1000 // stored first, so the consumer runs ahead of no producer
	prod := newProducer(t, cfg.NATSURL, cfg.Topics.Source)
	if err := prod.publish(ctx, n); err != nil {
		t.Fatal(err)
	}
	c, err := startConsumer(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, time.Minute, func() bool { return c.events.delivered.Load() >= 100 }, "first run delivering")
	c.stop()
	first := c.events.delivered.Load()
	c2, err := startConsumer(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.stop()
	if err := prod.publish(ctx, 20); err != nil { // the second run's own traffic
		t.Fatal(err)
	}
	ids := prod.published()
	natstest.Eventually(t, 2*time.Minute, func() bool { _, _, lost := p.tally(ids); return lost == 0 && backlog(c2) == 0 },
		"everything delivered")
	unique, dups, lost := p.tally(ids)
	bound := 8 * (wmnatsPrefetch + 1) // MaxAckPending: the harness runs 8 handlers
	t.Logf("first run delivered %d of %d; after the restart: %d unique, %d re-sent (bound %d), %d lost",
		first, n, unique, dups, bound, lost)
	if lost != 0 {
		t.Errorf("lost %d of %d", lost, len(ids))
	}
	if dups > bound {
		t.Errorf("%d messages re-sent after the restart, more than MaxAckPending %d: acked messages were redelivered", dups, bound)
	}
}

// TestWatermillNATSMultiValuedHeader: a message with a header of two
// values, which crashes the process in watermill-nats' DefaultUnmarshaler
// (it returns a nil message the subscriber then reads), is dead-lettered
// as malformed through jsq.Unmarshaler; the messages around it are
// delivered.
func TestWatermillNATSMultiValuedHeader(t *testing.T) {
	cfg, p, js, ctx := wmnatsSetup(t)
	c, err := startConsumer(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.stop()
	prod := newProducer(t, cfg.NATSURL, cfg.Topics.Source)
	if err := prod.publish(ctx, 5); err != nil {
		t.Fatal(err)
	}
	bad := nats.NewMsg(cfg.Topics.Source)
	bad.Header.Set(jsq.UUIDHeader, "multi-valued")
	bad.Header.Add("X-Tag", "a")
	bad.Header.Add("X-Tag", "b")
	bad.Data = []byte("ISA*00*PO multi~")
	if _, err := js.PublishMsg(ctx, bad); err != nil {
		t.Fatal(err)
	}
	if err := prod.publish(ctx, 5); err != nil {
		t.Fatal(err)
	}
	ids := prod.published()
	natstest.Eventually(t, time.Minute, func() bool { _, _, lost := p.tally(ids); return lost == 0 }, "the others delivered")
	var reason string
	natstest.Eventually(t, time.Minute, func() bool {
		for _, m := range natstest.StreamMsgs(t, js, cfg.Topics.Dead) {
			if m.UUID == "multi-valued" {
				reason = m.Metadata.Get(retryqueue.MetaDeadReason)
				return true
			}
		}
		return false
	}, "the multi-valued message dead-lettered")
	if reason != retryqueue.DeadReasonMalformed {
		t.Errorf("dead reason %q, want %q", reason, retryqueue.DeadReasonMalformed)
	}
}

// TestWatermillNATSRetryStreamAwayLosesNothing: with the retry stream gone
// (diversions unconfirmed, so nacked) for longer than five deliveries of
// every message, nothing is lost once it is back: the recipe's MaxDeliver
// is unlimited. With MaxDeliver 5 the broker would give up on each message
// after its fifth nack, and the adapter hides the delivery count from the
// middleware, which so cannot dead-letter it first.
func TestWatermillNATSRetryStreamAwayLosesNothing(t *testing.T) {
	cfg, _, js, ctx := wmnatsSetup(t)
	cfg.ForceOpen = true
	c, err := startConsumer(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.stop()
	if err := js.DeleteStream(ctx, cfg.Topics.Retry); err != nil {
		t.Fatal(err)
	}
	const n = 20
	prod := newProducer(t, cfg.NATSURL, cfg.Topics.Source)
	if err := prod.publish(ctx, n); err != nil {
		t.Fatal(err)
	}
	const deliveries = 6 // per message, beyond a MaxDeliver of 5
	natstest.Eventually(t, 2*time.Minute, func() bool { return c.events.nacked.Load() >= deliveries*n },
		"nacked %d of %d", natstest.Now(func() any { return c.events.nacked.Load() }), deliveries*n)
	if _, err := js.CreateStream(ctx, retryqueue.RetryStreamConfig(cfg.Topics.Retry)); err != nil {
		t.Fatal(err)
	}
	ids := prod.published()
	natstest.Eventually(t, time.Minute, func() bool {
		unique, _ := retryCopies(t, js, cfg.Topics.Retry, ids)
		return unique == len(ids)
	}, "every message in the retry stream")
	t.Logf("%d nacks while the retry stream was away, %d messages, 0 lost", c.events.nacked.Load(), n)
}
