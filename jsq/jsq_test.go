package jsq_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/floodgate-go/floodgate/internal/natstest"
	"github.com/floodgate-go/floodgate/jsq"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

type env struct {
	url   string
	nc    *nats.Conn
	js    jetstream.JetStream
	topic string
	pub   *jsq.Publisher
}

func setup(t *testing.T) env {
	t.Helper()
	url := natstest.URL(t)
	nc := natstest.Conn(t, url)
	e := env{url: url, nc: nc, js: natstest.JetStream(t, nc), topic: natstest.Name(t, "src")}
	natstest.DeleteStreams(t, e.js, e.topic)
	if _, err := jsq.EnsureStream(ctx(t), e.js, e.topic); err != nil {
		t.Fatal(err)
	}
	pub, err := jsq.NewPublisher(jsq.PublisherConfig{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pub.Close() })
	e.pub = pub
	return e
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return c
}

func (e env) subscriber(t *testing.T, cfg jsq.SubscriberConfig) *jsq.Subscriber {
	t.Helper()
	cfg.URL = e.url
	s, err := jsq.NewSubscriber(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// runRouter runs a router with one consumer handler; the returned func
// closes it and returns Close's error.
func runRouter(t *testing.T, closeTimeout time.Duration, topic string, sub message.Subscriber, h message.NoPublishHandlerFunc) func() error {
	t.Helper()
	r, err := message.NewRouter(message.RouterConfig{CloseTimeout: closeTimeout}, watermill.NopLogger{})
	if err != nil {
		t.Fatal(err)
	}
	r.AddConsumerHandler("h", topic, sub, h)
	done := make(chan error, 1)
	go func() { done <- r.Run(context.Background()) }()
	select {
	case <-r.Running():
	case err := <-done:
		t.Fatalf("router stopped: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("router not running")
	}
	var once sync.Once
	var closeErr error
	closeFn := func() error {
		once.Do(func() {
			closeErr = r.Close()
			<-done
		})
		return closeErr
	}
	t.Cleanup(func() { _ = closeFn() })
	return closeFn
}

func (e env) consumerInfo(t *testing.T, name string) *jetstream.ConsumerInfo {
	t.Helper()
	c, err := e.js.Consumer(ctx(t), e.topic, name)
	if err != nil {
		t.Fatal(err)
	}
	info, err := c.Info(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	return info
}

func TestAckAndNackPath(t *testing.T) {
	e := setup(t)
	sub := e.subscriber(t, jsq.SubscriberConfig{AckWait: 5 * time.Second, NakDelay: staticDelay(20 * time.Millisecond)})

	var mu sync.Mutex
	deliveries := map[string]int{}
	runRouter(t, time.Second, e.topic, sub, func(m *message.Message) error {
		mu.Lock()
		defer mu.Unlock()
		deliveries[m.UUID]++
		if m.UUID == "fail-once" && deliveries[m.UUID] == 1 {
			return errors.New("transient")
		}
		return nil
	})
	for _, id := range []string{"a", "fail-once", "b"} {
		if err := e.pub.Publish(e.topic, message.NewMessage(id, []byte(id))); err != nil {
			t.Fatal(err)
		}
	}
	name := jsq.DefaultConsumerName(e.topic)
	natstest.Eventually(t, 10*time.Second, func() bool {
		info := e.consumerInfo(t, name)
		return info.AckFloor.Stream == 3 && info.NumAckPending == 0 && info.NumPending == 0
	}, "all 3 messages acked")

	mu.Lock()
	defer mu.Unlock()
	want := map[string]int{"a": 1, "fail-once": 2, "b": 1}
	for id, n := range want {
		if deliveries[id] != n {
			t.Errorf("deliveries[%s] = %d, want %d (all: %v)", id, deliveries[id], n, deliveries)
		}
	}
	info := e.consumerInfo(t, name)
	if info.Config.Durable != name || info.Config.MaxDeliver != -1 || info.Config.AckPolicy != jetstream.AckExplicitPolicy || info.Config.AckWait != 5*time.Second {
		t.Errorf("consumer config = %+v", info.Config)
	}
}

// A message in the handler when the router closes is not acked: the
// durable consumer survives the close and redelivers it after AckWait to
// the next subscriber.
func TestCloseMidFlightRedelivers(t *testing.T) {
	e := setup(t)
	cfg := jsq.SubscriberConfig{AckWait: time.Second}
	started := make(chan *message.Message, 1)
	release := make(chan struct{})
	closeRouter := runRouter(t, 100*time.Millisecond, e.topic, e.subscriber(t, cfg), func(m *message.Message) error {
		started <- m
		<-release
		return nil // acks too late: nobody listens any more
	})
	if err := e.pub.Publish(e.topic, message.NewMessage("inflight", []byte("p"))); err != nil {
		t.Fatal(err)
	}
	var m1 *message.Message
	select {
	case m1 = <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("message not delivered")
	}
	closedAt := time.Now()
	_ = closeRouter() // times out waiting for the blocked handler: expected
	select {
	case <-m1.Context().Done():
	case <-time.After(2 * time.Second):
		t.Fatal("message context not cancelled by close")
	}
	if cause := context.Cause(m1.Context()); !errors.Is(cause, jsq.ErrClosing) {
		t.Errorf("message context cause %v, want jsq.ErrClosing", cause)
	}
	close(release)

	name := jsq.DefaultConsumerName(e.topic)
	info := e.consumerInfo(t, name) // still exists: durable
	if info.AckFloor.Stream != 0 || info.NumAckPending != 1 {
		t.Fatalf("after close: ack floor %d, ack pending %d; want 0, 1 (not acked)", info.AckFloor.Stream, info.NumAckPending)
	}

	got := make(chan string, 4)
	runRouter(t, time.Second, e.topic, e.subscriber(t, cfg), func(m *message.Message) error {
		got <- m.UUID + "|" + string(m.Payload)
		return nil
	})
	select {
	case g := <-got:
		if g != "inflight|p" {
			t.Fatalf("redelivered %q, want inflight|p", g)
		}
		if d := time.Since(closedAt); d < 500*time.Millisecond {
			t.Errorf("redelivered after %s, expected about AckWait (1s)", d)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("message not redelivered after close")
	}
	natstest.Eventually(t, 5*time.Second, func() bool {
		i := e.consumerInfo(t, name)
		return i.AckFloor.Stream == 1 && i.NumAckPending == 0
	}, "redelivered message acked")
}

// watermill-nats' DefaultUnmarshaler fails on a multi-valued header and its
// subscriber then crashes; jsq's keeps the first value and marks the message.
func TestMalformedHeadersAndMissingUUID(t *testing.T) {
	e := setup(t)
	sub := e.subscriber(t, jsq.SubscriberConfig{NakDelay: staticDelay(10 * time.Millisecond)})
	type seen struct {
		uuid string
		md   message.Metadata
	}
	got := make(chan seen, 10)
	var calls atomic.Int32
	runRouter(t, time.Second, e.topic, sub, func(m *message.Message) error {
		got <- seen{m.UUID, m.Metadata}
		if m.Metadata.Get("k") == "no-uuid" && calls.Add(1) == 1 {
			return errors.New("again") // redelivery must keep the derived UUID
		}
		return nil
	})

	multi := nats.NewMsg(e.topic)
	multi.Header.Set(jsq.UUIDHeader, "multi")
	multi.Header.Add("X", "first")
	multi.Header.Add("X", "second")
	multi.Header.Set("Nats-Msg-Id", "dedupe-1")
	if _, err := e.js.PublishMsg(ctx(t), multi); err != nil {
		t.Fatal(err)
	}
	s := <-got
	if s.uuid != "multi" || s.md.Get("X") != "first" || s.md.Get(jsq.MetaMalformed) == "" {
		t.Fatalf("multi-valued header: uuid %q metadata %v", s.uuid, s.md)
	}
	if _, ok := s.md["Nats-Msg-Id"]; ok {
		t.Fatalf("reserved header became metadata: %v", s.md)
	}

	bare := nats.NewMsg(e.topic)
	bare.Header.Set("k", "no-uuid")
	if _, err := e.js.PublishMsg(ctx(t), bare); err != nil {
		t.Fatal(err)
	}
	first, second := <-got, <-got
	if first.uuid == "" || first.uuid != second.uuid {
		t.Fatalf("derived UUIDs %q, %q: want equal and non-empty", first.uuid, second.uuid)
	}
	if _, ok := first.md[jsq.MetaMalformed]; ok {
		t.Fatalf("message without UUID marked malformed: %v", first.md)
	}
}

// Concurrency bounds the messages in handlers and Prefetch the messages
// delivered and waiting behind them: with the handlers blocked the server
// has delivered exactly Concurrency + Prefetch, and the rest stay pending
// on it.
func TestConcurrencyAndPrefetchBound(t *testing.T) {
	for _, c := range []struct{ prefetch, held int }{{prefetch: 2, held: 5}, {prefetch: -1, held: 3}} {
		t.Run(fmt.Sprint("prefetch=", c.prefetch), func(t *testing.T) {
			e := setup(t)
			sub := e.subscriber(t, jsq.SubscriberConfig{Concurrency: 3, Prefetch: c.prefetch})
			var inflight, peak atomic.Int32
			release := make(chan struct{})
			runRouter(t, time.Second, e.topic, sub, func(m *message.Message) error {
				n := inflight.Add(1)
				for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
				}
				<-release
				inflight.Add(-1)
				return nil
			})
			const total = 8
			for i := range total {
				if err := e.pub.Publish(e.topic, message.NewMessage(watermill.NewUUID(), []byte{byte(i)})); err != nil {
					t.Fatal(err)
				}
			}
			name := jsq.DefaultConsumerName(e.topic)
			// The server counts NumPending from its stream's signals, which
			// can lag the deliveries: poll until it settles.
			natstest.Eventually(t, 10*time.Second, func() bool {
				info := e.consumerInfo(t, name)
				return inflight.Load() == 3 && info.NumAckPending == c.held && info.NumPending == uint64(total-c.held)
			}, "3 handlers in flight, %d delivered, %d pending", c.held, total-c.held)
			close(release)
			natstest.Eventually(t, 10*time.Second, func() bool { return e.consumerInfo(t, name).AckFloor.Stream == total }, "all acked")
			if p := peak.Load(); p != 3 {
				t.Fatalf("peak concurrency %d, want 3", p)
			}
		})
	}
}

// Close naks the prefetched messages no handler took, so the next
// subscriber gets them at once, not after AckWait (20s, beyond the hang
// guard); the message in the handler is left to AckWait.
func TestClosePrefetchedNakked(t *testing.T) {
	e := setup(t)
	cfg := jsq.SubscriberConfig{AckWait: 20 * time.Second, Prefetch: 3, CloseGrace: -1}
	waiting := jsq.WatchWaiting(t)
	started := make(chan string, 1)
	release := make(chan struct{})
	defer close(release)
	first := e.subscriber(t, cfg)
	closeRouter := runRouter(t, 100*time.Millisecond, e.topic, first, func(m *message.Message) error {
		started <- m.UUID
		<-release
		return nil
	})
	ids := []string{"inhandler", "p1", "p2", "p3"}
	for _, id := range ids {
		if err := e.pub.Publish(e.topic, message.NewMessage(id, nil)); err != nil {
			t.Fatal(err)
		}
	}
	if id := <-started; id != "inhandler" {
		t.Fatalf("first handled %q, want inhandler", id)
	}
	name := jsq.DefaultConsumerName(e.topic)
	natstest.Eventually(t, 10*time.Second, func() bool { return e.consumerInfo(t, name).NumAckPending == 4 }, "all 4 delivered: 1 in the handler, 3 prefetched")
	// A message the server sent but the subscriber has not received when
	// it closes waits out its AckWait (documented): close once all three
	// wait in the subscriber.
	natstest.Eventually(t, 10*time.Second, func() bool { return waiting() == 3 }, "3 prefetched messages waiting in the subscriber")
	_ = closeRouter()
	_ = first.Close()

	got := make(chan string, 8)
	runRouter(t, time.Second, e.topic, e.subscriber(t, cfg), func(m *message.Message) error {
		got <- m.UUID
		return nil
	})
	var redelivered []string
	for range 3 {
		select {
		case id := <-got:
			redelivered = append(redelivered, id)
		case <-time.After(10 * time.Second):
			t.Fatalf("prefetched messages not redelivered promptly after close; got %v", redelivered)
		}
	}
	slices.Sort(redelivered)
	if !slices.Equal(redelivered, ids[1:]) {
		t.Fatalf("redelivered %v, want %v", redelivered, ids[1:])
	}
}

func TestPublisherErrors(t *testing.T) {
	e := setup(t)
	missing := natstest.Name(t, "missing")
	// No stream answers at once (no responders): the error says so, where
	// a publish that waited for its timeout would say it timed out.
	err := e.pub.PublishContext(ctx(t), missing, message.NewMessage("x", nil))
	if err == nil || !errors.Is(err, jetstream.ErrNoStreamResponse) {
		t.Fatalf("publish to missing stream: err = %v, want ErrNoStreamResponse", err)
	}
	if err := e.pub.Publish("a.*", message.NewMessage("x", nil)); !errors.Is(err, jsq.ErrInvalidTopic) {
		t.Fatalf("topic with a wildcard: err = %v, want ErrInvalidTopic", err)
	}
	bad := message.NewMessage("x", nil)
	bad.Metadata.Set("a/b", "v")
	if err := e.pub.Publish(e.topic, bad); err == nil {
		t.Fatal("publish with invalid header key succeeded")
	}
	_ = e.pub.Close()
	if err := e.pub.Publish(e.topic, message.NewMessage("x", nil)); !errors.Is(err, jsq.ErrPublisherClosed) {
		t.Fatalf("after Close: err = %v", err)
	}
	if _, err := jsq.NewPublisher(jsq.PublisherConfig{}); !errors.Is(err, jsq.ErrInvalidConfig) {
		t.Fatalf("empty config: err = %v", err)
	}
	if _, err := jsq.NewSubscriber(jsq.SubscriberConfig{URL: e.url, AckWait: time.Millisecond}); !errors.Is(err, jsq.ErrInvalidConfig) {
		t.Fatalf("AckWait 1ms: err = %v", err)
	}
}

func TestValidateTopic(t *testing.T) {
	for topic, ok := range map[string]bool{
		"orders": true, "floodgate_retry": true, "a-b_C9": true, "edi.orders.850": true, "a.b=c": true,
		"": false, "a*": false, "a>": false, "a b": false, "a/b": false, `a\b`: false,
		".a": false, "a.": false, "a..b": false, "a.*": false, "a.>": false, "a=2Eb": false,
	} {
		if err := jsq.ValidateTopic(topic); (err == nil) != ok {
			t.Errorf("ValidateTopic(%q) = %v, want ok=%v", topic, err, ok)
		}
	}
	for name, ok := range map[string]bool{"floodgate_retry": true, "a=b": true, "": false, "a.b": false, "a b": false} {
		if err := jsq.ValidateStreamName(name); (err == nil) != ok {
			t.Errorf("ValidateStreamName(%q) = %v, want ok=%v", name, err, ok)
		}
	}
}

// A hierarchical topic gets its own stream, whose name no other valid
// topic's stream has, and messages go through it like a flat topic's.
func TestHierarchicalTopic(t *testing.T) {
	e := setup(t)
	topics := []string{e.topic + ".orders.850", e.topic + ".orders_850", e.topic + "_orders.850"}
	names := map[string]string{e.topic: e.topic}
	for _, topic := range topics {
		if err := jsq.ValidateTopic(topic); err != nil {
			t.Fatal(err)
		}
		name := jsq.StreamName(topic)
		if prev, ok := names[name]; ok {
			t.Fatalf("topics %q and %q share stream %q", prev, topic, name)
		}
		if err := jsq.ValidateStreamName(name); err != nil || jsq.ValidateTopic(name) == nil {
			t.Fatalf("stream name %q of %q: valid stream name %v; also a valid topic: %v", name, topic, err, jsq.ValidateTopic(name) == nil)
		}
		names[name] = topic
		natstest.DeleteStreams(t, e.js, name)
	}
	sub := e.subscriber(t, jsq.SubscriberConfig{})
	for i, topic := range topics {
		ch, err := sub.Subscribe(t.Context(), topic) // lives as long as the test
		if err != nil {
			t.Fatal(err)
		}
		if err := e.pub.Publish(topic, message.NewMessage(fmt.Sprint("m", i), []byte(topic))); err != nil {
			t.Fatal(err)
		}
		select {
		case m := <-ch:
			if m.UUID != fmt.Sprint("m", i) || string(m.Payload) != topic {
				t.Fatalf("topic %q received %s %q", topic, m.UUID, m.Payload)
			}
			// The Delivery names the stream an operator reads the message
			// from, not the subject.
			if d, _ := jsq.DeliveryFrom(m.Context()); d.Stream != jsq.StreamName(topic) || d.StreamSeq != 1 {
				t.Errorf("topic %q: Delivery stream %q seq %d, want %q seq 1", topic, d.Stream, d.StreamSeq, jsq.StreamName(topic))
			}
			m.Ack()
		case <-time.After(10 * time.Second):
			t.Fatalf("topic %q: nothing received", topic)
		}
		if _, err := e.js.Consumer(ctx(t), jsq.StreamName(topic), jsq.DefaultConsumerName(topic)); err != nil {
			t.Fatalf("consumer of %q on stream %q: %v", topic, jsq.StreamName(topic), err)
		}
	}
}

func TestValidHeaderKey(t *testing.T) {
	for k, ok := range map[string]bool{
		"floodgate_attempt": true, "X-Trace": true, "a.b": true,
		"": false, "a b": false, "a:b": false, "a/b": false, "é": false, "a\nb": false,
	} {
		if got := jsq.ValidHeaderKey(k); got != ok {
			t.Errorf("ValidHeaderKey(%q) = %v, want %v", k, got, ok)
		}
	}
}

func TestExponentialDelay(t *testing.T) {
	d := jsq.ExponentialDelay{Base: time.Second, Max: 10 * time.Second}
	for n, want := range map[uint64]time.Duration{0: time.Second, 1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second, 4: 8 * time.Second, 5: 10 * time.Second, 1000: 10 * time.Second} {
		if got := d.WaitTime(n); got != want {
			t.Errorf("WaitTime(%d) = %s, want %s", n, got, want)
		}
	}
	if got := (jsq.ExponentialDelay{}).WaitTime(1); got != 500*time.Millisecond {
		t.Errorf("zero value WaitTime(1) = %s, want 500ms", got)
	}
}

// A handler that finishes within CloseGrace after the subscription ended is
// acked: no redelivery, no duplicate. Its context stays alive meanwhile.
func TestCloseGraceAcksFinishingHandler(t *testing.T) {
	e := setup(t)
	sub := e.subscriber(t, jsq.SubscriberConfig{AckWait: 2 * time.Second, CloseGrace: time.Second})
	c, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, err := sub.Subscribe(c, e.topic)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.pub.Publish(e.topic, message.NewMessage("graceful", nil)); err != nil {
		t.Fatal(err)
	}
	m := <-ch
	cancel() // the router closes
	if err := m.Context().Err(); err != nil {
		t.Fatalf("message context cancelled within the grace: %v", err)
	}
	m.Ack()
	for range ch { // closed once the loop settled the message
	}
	info := e.consumerInfo(t, jsq.DefaultConsumerName(e.topic))
	if info.AckFloor.Stream != 1 || info.NumAckPending != 0 {
		t.Fatalf("ack floor %d, ack pending %d; want 1, 0 (acked within the grace)", info.AckFloor.Stream, info.NumAckPending)
	}
}

// A handler that neither acks nor nacks within AckWait: the subscriber
// gives up and cancels the message's context with cause ErrAckWait, a
// context.DeadlineExceeded, so a middleware counts it as a timeout.
func TestAckWaitCancelsWithCause(t *testing.T) {
	e := setup(t)
	sub := e.subscriber(t, jsq.SubscriberConfig{AckWait: time.Second})
	c, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, err := sub.Subscribe(c, e.topic)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.pub.Publish(e.topic, message.NewMessage("slow", nil)); err != nil {
		t.Fatal(err)
	}
	m := <-ch
	select {
	case <-m.Context().Done():
	case <-time.After(10 * time.Second):
		t.Fatal("message context not cancelled after AckWait")
	}
	cause := context.Cause(m.Context())
	if !errors.Is(cause, jsq.ErrAckWait) || !errors.Is(cause, context.DeadlineExceeded) {
		t.Errorf("cause %v, want jsq.ErrAckWait wrapping context.DeadlineExceeded", cause)
	}
	if !errors.Is(m.Context().Err(), context.Canceled) {
		t.Errorf("Err %v, want context.Canceled", m.Context().Err())
	}
}

func staticDelay(d time.Duration) func(uint64) time.Duration {
	return func(uint64) time.Duration { return d }
}

// A handler blocked for longer than AckWait while more messages wait
// prefetched behind it: the waiting messages get in-progress acks, so none
// is redelivered. Each blocked message is given up at AckWait (cause
// ErrAckWait) and redelivered, which frees the handler for the next one;
// the last queued message waits behind two give-ups, twice AckWait, so a
// subscriber that let a prefetched message's AckWait run out would deliver
// it twice. Prefetch exceeds the messages, so a pull request with free
// credit is always waiting on the server, ready to take a redelivery.
func TestNoRedeliveryBehindBlockedHandler(t *testing.T) {
	e := setup(t)
	sub := e.subscriber(t, jsq.SubscriberConfig{AckWait: time.Second, CloseGrace: -1, Prefetch: 8})
	release := make(chan struct{})
	var mu sync.Mutex
	counts := map[string][]uint64{} // UUID -> Delivery.Count of each delivery
	gaveUp := make(chan error, 2)
	runRouter(t, time.Second, e.topic, sub, func(m *message.Message) error {
		d, ok := jsq.DeliveryFrom(m.Context())
		if !ok {
			t.Errorf("%s: no Delivery in the message context", m.UUID)
		}
		mu.Lock()
		counts[m.UUID] = append(counts[m.UUID], d.Count)
		mu.Unlock()
		if strings.HasPrefix(m.UUID, "stuck") && d.Count == 1 {
			<-m.Context().Done()
			gaveUp <- context.Cause(m.Context())
			<-release // blocked on, past the give-up
		}
		return nil
	})
	ids := []string{"stuck1", "stuck2", "queued1", "queued2", "queued3"}
	for _, id := range ids {
		if err := e.pub.Publish(e.topic, message.NewMessage(id, []byte(id))); err != nil {
			t.Fatal(err)
		}
	}
	name := jsq.DefaultConsumerName(e.topic)
	// All five are delivered at once (1 in the handler, 4 waiting), and
	// none is acked before stuck1 and stuck2 are given up.
	natstest.Eventually(t, 10*time.Second, func() bool {
		i := e.consumerInfo(t, name)
		return i.NumPending == 0 && i.NumAckPending == len(ids) && i.AckFloor.Stream == 0
	}, "all messages delivered, waiting prefetched behind stuck1")
	natstest.Eventually(t, 30*time.Second, func() bool {
		i := e.consumerInfo(t, name)
		return i.NumPending == 0 && i.NumAckPending == 0
	}, "all messages acked while the first deliveries of stuck1 and stuck2 are still blocked")
	close(release)
	for range 2 {
		if cause := <-gaveUp; !errors.Is(cause, jsq.ErrAckWait) {
			t.Errorf("blocked message's context cause %v, want jsq.ErrAckWait", cause)
		}
	}

	mu.Lock()
	defer mu.Unlock()
	for _, id := range ids {
		want := []uint64{1}
		if strings.HasPrefix(id, "stuck") {
			want = []uint64{1, 2} // given up at AckWait, redelivered once
		}
		if !slices.Equal(counts[id], want) {
			t.Errorf("%s: delivery counts %v, want %v (all: %v)", id, counts[id], want, counts)
		}
	}
	if info := e.consumerInfo(t, name); info.NumRedelivered != 0 || info.AckFloor.Stream != uint64(len(ids)) {
		t.Errorf("consumer: %d redelivered pending, ack floor %d; want 0, %d", info.NumRedelivered, info.AckFloor.Stream, len(ids))
	}
}

// An ack the server does not confirm is logged with the message, not
// lost silently: the consumer is deleted while the handler runs, so the
// ack finds no responder (a 503 status on the confirmation subject).
func TestAckNotConfirmedIsLogged(t *testing.T) {
	e := setup(t)
	logs := &errorLog{}
	sub := e.subscriber(t, jsq.SubscriberConfig{Logger: logs})
	started, release := make(chan struct{}), make(chan struct{})
	runRouter(t, time.Second, e.topic, sub, func(m *message.Message) error {
		close(started)
		<-release
		return nil
	})
	if err := e.pub.Publish(e.topic, message.NewMessage("m1", nil)); err != nil {
		t.Fatal(err)
	}
	<-started
	if err := e.js.DeleteConsumer(ctx(t), e.topic, jsq.DefaultConsumerName(e.topic)); err != nil {
		t.Fatal(err)
	}
	close(release)
	natstest.Eventually(t, 10*time.Second, func() bool { return logs.has("ack not confirmed", "m1") }, "the unconfirmed ack of m1 logged")
}

// errorLog records the errors logged, safe for concurrent use.
type errorLog struct {
	watermill.NopLogger
	mu   sync.Mutex
	msgs []string // msg + " " + message_uuid
}

func (l *errorLog) Error(msg string, _ error, fields watermill.LogFields) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.msgs = append(l.msgs, fmt.Sprint(msg, " ", fields["message_uuid"]))
}

func (l *errorLog) With(watermill.LogFields) watermill.LoggerAdapter { return l }

// has reports whether an error containing msg was logged for the message
// with uuid.
func (l *errorLog) has(msg, uuid string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.ContainsFunc(l.msgs, func(m string) bool { return strings.Contains(m, msg) && strings.HasSuffix(m, " "+uuid) })
}

// Messages reach the handler in the consumer's order: the subscriber has
// one pull request at a time on the server. With two, the server would
// spread new messages over both in turn, and their batches could overtake
// each other. After three messages trickled in and were acked, enough
// credit is free for another pull while the first still waits for two
// more; it must not be sent.
func TestOnePullAtATimeKeepsOrder(t *testing.T) {
	e := setup(t)
	sub := e.subscriber(t, jsq.SubscriberConfig{Prefetch: 4, AckWait: 2 * time.Minute, FetchWait: 2 * time.Minute}) // no pull expires mid-test
	got := make(chan string, 64)
	runRouter(t, time.Second, e.topic, sub, func(m *message.Message) error {
		got <- m.UUID
		return nil
	})
	name := jsq.DefaultConsumerName(e.topic)
	var order []string
	for i := range 3 {
		id := fmt.Sprint("t", i)
		if err := e.pub.Publish(e.topic, message.NewMessage(id, nil)); err != nil {
			t.Fatal(err)
		}
		order = append(order, <-got)
	}
	natstest.Eventually(t, 10*time.Second, func() bool { return e.consumerInfo(t, name).AckFloor.Stream == 3 }, "3 acked")
	for range 20 { // the old feeder's second pull followed within milliseconds
		if w := e.consumerInfo(t, name).NumWaiting; w != 1 {
			t.Fatalf("%d pull requests waiting on the server, want 1", w)
		}
		time.Sleep(10 * time.Millisecond)
	}
	for i := 3; i < 40; i++ {
		if err := e.pub.Publish(e.topic, message.NewMessage(fmt.Sprint("t", i), nil)); err != nil {
			t.Fatal(err)
		}
	}
	for len(order) < 40 {
		select {
		case id := <-got:
			order = append(order, id)
		case <-time.After(20 * time.Second):
			t.Fatalf("handled %d of 40", len(order))
		}
	}
	for i, id := range order {
		if id != fmt.Sprint("t", i) {
			t.Fatalf("handling order %v, want t0..t39", order)
		}
	}
}
