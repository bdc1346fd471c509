package wmnats_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/floodgate-go/floodgate/internal/natstest"
	"github.com/floodgate-go/floodgate/jsq"
	"github.com/floodgate-go/floodgate/wmnats"
)

// setup returns a server URL, a JetStream context on it, a fresh topic
// whose stream exists, and a context bounded by a hang guard.
func setup(t *testing.T) (string, jetstream.JetStream, string, context.Context) {
	t.Helper()
	url := natstest.URL(t)
	js := natstest.JetStream(t, natstest.Conn(t, url))
	topic := natstest.Name(t, "wmnats")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	if _, err := jsq.EnsureStream(ctx, js, topic); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = js.DeleteStream(context.Background(), topic) })
	return url, js, topic, ctx
}

func newSubscriber(t *testing.T, cfg wmnats.Config) *wmnats.Subscriber {
	t.Helper()
	s, err := wmnats.NewSubscriber(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// TestSubscribeRefusesDifferingDurable: an existing durable that differs
// from wmnats' consumer (here watermill-nats' own defaults: MaxAckPending
// 1000, AckWait 30 s) is refused with a *jsq.ConfigMismatchError naming
// the fields, and left unchanged on the server, never updated.
func TestSubscribeRefusesDifferingDurable(t *testing.T) {
	url, js, topic, ctx := setup(t)
	existing := jetstream.ConsumerConfig{
		Durable:       "orders-as2",
		AckPolicy:     jetstream.AckExplicitPolicy,
		DeliverPolicy: jetstream.DeliverAllPolicy,
		AckWait:       30 * time.Second,
		MaxDeliver:    5,
		MaxAckPending: 1000,
	}
	if _, err := js.CreateConsumer(ctx, topic, existing); err != nil {
		t.Fatal(err)
	}
	s := newSubscriber(t, wmnats.Config{URL: url, Durable: "orders-as2", Handlers: 4, AckWait: 10 * time.Second})
	_, err := s.Subscribe(ctx, topic)
	var mismatch *jsq.ConfigMismatchError
	if !errors.As(err, &mismatch) || !errors.Is(err, jsq.ErrConfigMismatch) {
		t.Fatalf("Subscribe: %v, want a *jsq.ConfigMismatchError", err)
	}
	got := map[string]bool{}
	for _, f := range mismatch.Fields {
		got[f.Field] = true
	}
	for _, f := range []string{"AckWait", "MaxDeliver", "MaxAckPending"} {
		if !got[f] {
			t.Errorf("mismatch %v does not name %s", mismatch, f)
		}
	}
	c, err := js.Consumer(ctx, topic, "orders-as2")
	if err != nil {
		t.Fatal(err)
	}
	cc := c.CachedInfo().Config
	if cc.AckWait != existing.AckWait || cc.MaxDeliver != existing.MaxDeliver || cc.MaxAckPending != existing.MaxAckPending {
		t.Errorf("existing durable changed: AckWait %s, MaxDeliver %d, MaxAckPending %d; want %s, %d, %d",
			cc.AckWait, cc.MaxDeliver, cc.MaxAckPending, existing.AckWait, existing.MaxDeliver, existing.MaxAckPending)
	}
}

// TestSubscribeCreatesKeepsAndBindsDurable: Subscribe creates the durable
// with ConsumerConfig (MaxDeliver -1, MaxAckPending 2 × Handlers); Close
// keeps it with the ack recorded; a second Subscriber binds the equal
// durable and receives only what came after.
func TestSubscribeCreatesKeepsAndBindsDurable(t *testing.T) {
	url, js, topic, ctx := setup(t)
	cfg := wmnats.Config{URL: url, Durable: "orders-as2", Handlers: 3, AckWait: 10 * time.Second}
	s := newSubscriber(t, cfg)
	if got := s.ConsumerConfig(); got.MaxDeliver != -1 || got.MaxAckPending != 6 || got.AckWait != 10*time.Second {
		t.Fatalf("ConsumerConfig %+v, want MaxDeliver -1, MaxAckPending 6, AckWait 10s", got)
	}
	out, err := s.Subscribe(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	publish(t, ctx, js, topic, "first")
	receiveAck(t, out, "first")
	natstest.Finishes(t, time.Minute, func() { _ = s.Close() }, "Close")

	c, err := js.Consumer(ctx, topic, "orders-as2")
	if err != nil {
		t.Fatalf("durable gone after Close: %v", err)
	}
	info := c.CachedInfo()
	if info.Config.MaxDeliver != -1 || info.Config.MaxAckPending != 6 || info.AckFloor.Stream != 1 {
		t.Fatalf("durable MaxDeliver %d, MaxAckPending %d, ack floor %d; want -1, 6, 1",
			info.Config.MaxDeliver, info.Config.MaxAckPending, info.AckFloor.Stream)
	}
	if _, err := s.Subscribe(ctx, topic); !errors.Is(err, wmnats.ErrClosed) {
		t.Errorf("Subscribe after Close: %v, want ErrClosed", err)
	}

	s2 := newSubscriber(t, cfg)
	out2, err := s2.Subscribe(ctx, topic)
	if err != nil {
		t.Fatalf("binding the equal durable: %v", err)
	}
	publish(t, ctx, js, topic, "second")
	receiveAck(t, out2, "second")
}

// TestCloseWaitsForHandlerAck: Close called while a message is in its
// handler returns only after the handler acks it, and the ack reaches the
// server: the plain watermill-nats subscriber drains its connection at
// once and drops that ack, so the message would come again.
func TestCloseWaitsForHandlerAck(t *testing.T) {
	url, js, topic, ctx := setup(t)
	s := newSubscriber(t, wmnats.Config{URL: url, Durable: "orders-as2", AckWait: 10 * time.Second})
	out, err := s.Subscribe(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	publish(t, ctx, js, topic, "in-handler")
	var m *message.Message
	select {
	case m = <-out:
	case <-ctx.Done():
		t.Fatal("no message")
	}
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	m.Ack()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatalf("Close: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("Close did not return")
	}
	c, err := js.Consumer(ctx, topic, "orders-as2")
	if err != nil {
		t.Fatal(err)
	}
	if info := c.CachedInfo(); info.AckFloor.Stream != 1 || info.NumAckPending != 0 {
		t.Fatalf("after Close: ack floor %d, %d pending; want 1, 0: the handler's ack was dropped",
			info.AckFloor.Stream, info.NumAckPending)
	}
}

func publish(t *testing.T, ctx context.Context, js jetstream.JetStream, topic, id string) {
	t.Helper()
	m := nats.NewMsg(topic)
	m.Header.Set(jsq.UUIDHeader, id)
	if _, err := js.PublishMsg(ctx, m); err != nil {
		t.Fatal(err)
	}
}

func receiveAck(t *testing.T, out <-chan *message.Message, id string) {
	t.Helper()
	select {
	case m := <-out:
		if m.UUID != id {
			t.Fatalf("received %q, want %q", m.UUID, id)
		}
		m.Ack()
	case <-time.After(time.Minute):
		t.Fatalf("%q not received", id)
	}
}
