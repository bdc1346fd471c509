package floodgate_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/floodgate-go/floodgate"
	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/internal/natstest"
	"github.com/floodgate-go/floodgate/jsq"
	"github.com/floodgate-go/floodgate/partner"
	"github.com/floodgate-go/floodgate/retryqueue"
)

// A message's W3C trace context reaches the partner unchanged when the
// message went the long way: diverted while the partner was down, then
// drained once it recovered.
func TestTraceContextReachesThePartnerThroughTheDrain(t *testing.T) {
	url := natstest.URL(t)
	nc := natstest.Conn(t, url)
	js := natstest.JetStream(t, nc)
	topic := natstest.Name(t, "orders")
	retry, dead := natstest.Name(t, "retry"), natstest.Name(t, "dead")
	natstest.DeleteStreams(t, js, jsq.StreamName(topic), retry, dead)

	sub, err := jsq.NewSubscriber(jsq.SubscriberConfig{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	router, err := message.NewRouter(message.RouterConfig{CloseTimeout: 20 * time.Second}, watermill.NopLogger{})
	if err != nil {
		t.Fatal(err)
	}
	var (
		down    atomic.Bool
		failed  atomic.Int64
		mu      sync.Mutex
		seen    = map[string]string{} // UUID -> traceparent at delivery
		drained = map[string]bool{}
	)
	down.Store(true)
	fg, err := floodgate.New(context.Background(), router, floodgate.Config{
		Name: "as2", Topic: topic, Subscriber: sub, JetStream: js,
		Deliver: func(m *message.Message) error {
			if down.Load() {
				failed.Add(1)
				return errors.New("HTTP 503")
			}
			mu.Lock()
			defer mu.Unlock()
			seen[m.UUID] = m.Metadata.Get("traceparent")
			if m.Metadata.Get(retryqueue.MetaAttempt) != "" {
				drained[m.UUID] = true
			}
			return nil
		},
		Partner: partner.PartnerConfig{Breaker: breaker.Config{
			ConsecutiveFailures: 2, BaseOpenWindow: 100 * time.Millisecond, MaxOpenWindow: 200 * time.Millisecond,
			SuccessesToClose: 1, ProbeConcurrency: 1,
		}},
		Queue: retryqueue.Config{RetryTopic: retry, DeadLetterTopic: dead, Backoff: func(int) time.Duration { return 10 * time.Millisecond }},
		Drain: retryqueue.PartnerDrainerConfig{DiscoverInterval: 100 * time.Millisecond, Drainer: retryqueue.DrainerConfig{PollInterval: 20 * time.Millisecond}},
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
	defer pub.Close()
	const n = 10
	want := map[string]string{}
	for i := range n {
		m := message.NewMessage(fmt.Sprintf("order-%d", i), []byte("ISA*00*..."))
		tp := fmt.Sprintf("00-4bf92f3577b34da6a3ce929d0e0e47%02d-00f067aa0ba902b7-01", i)
		m.Metadata.Set("traceparent", tp)
		want[m.UUID] = tp
		if err := pub.Publish(topic, m); err != nil {
			t.Fatal(err)
		}
	}
	natstest.Eventually(t, 30*time.Second, func() bool { return fg.Drain().HasBacklog(retryqueue.DefaultPartner) && failed.Load() >= 2 },
		"messages diverted while the partner is down")
	down.Store(false)
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(seen) }
	natstest.Eventually(t, 60*time.Second, func() bool { return count() == n },
		"every message delivered after recovery (%d of %d)", natstest.Now(func() any { return count() }), n)

	mu.Lock()
	defer mu.Unlock()
	if len(drained) == 0 {
		t.Fatal("no message was delivered through the drain: the test did not exercise it")
	}
	for id, tp := range want {
		if seen[id] != tp {
			t.Errorf("%s reached the partner with traceparent %q, want %q (drained: %v)", id, seen[id], tp, drained[id])
		}
	}
	cancel()
	<-runDone
}
