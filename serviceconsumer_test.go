package floodgate_test

import (
	"context"
	"errors"
	"fmt"
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

// Many partners recovering at once drain through the service consumer,
// with the real middleware, registry and gates: a partner that fails
// meanwhile trips its own breaker and ends it, the others drain, and once
// it recovers everything is delivered, each message to its own partner,
// and nothing is left on the stream.
func TestNewDrainsManyPartnersThroughTheServiceConsumer(t *testing.T) {
	url := natstest.URL(t)
	js := natstest.JetStream(t, natstest.Conn(t, url))
	topic, retry, dead := natstest.Name(t, "orders"), natstest.Name(t, "retry"), natstest.Name(t, "dead")
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
	p := &partners{delivered: map[string]map[string]int{}}
	var fgp atomic.Pointer[floodgate.Floodgate]
	var downed atomic.Bool
	const bad = "P00"
	fg, err := floodgate.New(context.Background(), router, floodgate.Config{
		Name: "svc", Topic: topic, Subscriber: sub, JetStream: js,
		Deliver: func(m *message.Message) error {
			if f := fgp.Load(); m.Metadata.Get("partner") == bad && f != nil && f.Drain().ServiceConsumer() && !downed.Swap(true) {
				p.down.Store(bad, true) // goes down as the service consumer reaches it
			}
			return p.deliver(m)
		},
		PartnerKey: func(m *message.Message) string { return m.Metadata.Get("partner") },
		Partner: partner.PartnerConfig{Breaker: breaker.Config{
			ConsecutiveFailures: 3, BaseOpenWindow: 100 * time.Millisecond, MaxOpenWindow: 200 * time.Millisecond,
			SuccessesToClose: 2, ProbeConcurrency: 1,
		}},
		Queue: retryqueue.Config{RetryTopic: retry, DeadLetterTopic: dead, Backoff: func(int) time.Duration { return 10 * time.Millisecond }},
		Drain: retryqueue.PartnerDrainerConfig{MaxDraining: 2, Drainer: retryqueue.DrainerConfig{PollInterval: 20 * time.Millisecond}},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer fg.Close()
	fgp.Store(fg)
	const keys, per = 12, 100
	for k := range keys {
		key := fmt.Sprintf("P%02d", k)
		for i := range per {
			m := message.NewMessage(fmt.Sprintf("%s-%d", key, i), nil)
			m.Metadata.Set("partner", key)
			if _, err := fg.Queue().RouteTo(context.Background(), m, key, retryqueue.ReasonOpen, errors.New("open")); err != nil {
				t.Fatal(err)
			}
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	runDone := startRouter(ctx, router)
	natstest.Eventually(t, 60*time.Second, func() bool {
		b, ok := fg.Partners().Lookup(bad)
		return downed.Load() && ok && b.Breaker().State() != breaker.StateClosed && !fg.Drain().ServiceConsumer()
	}, "the failing partner tripped and the service consumer left")
	for k := 1; k < keys; k++ {
		key := fmt.Sprintf("P%02d", k)
		natstest.Eventually(t, 60*time.Second, func() bool { return p.count(key) == per }, "%s drained beside the tripped partner (%d of %d)", key, natstest.Now(func() any { return p.count(key) }), per)
	}
	p.down.Store(bad, false)
	natstest.Eventually(t, 60*time.Second, func() bool { return p.count(bad) == per }, "the recovered partner's backlog delivered (%d of %d)", natstest.Now(func() any { return p.count(bad) }), per)
	natstest.Eventually(t, 30*time.Second, func() bool {
		return natstest.StreamCount(t, js, retry) == 0 && len(fg.Drain().Partners()) == 0
	}, "the retry stream empty and every drain stopped")
	p.mu.Lock()
	if p.wrong != 0 {
		t.Errorf("%d deliveries to the wrong partner", p.wrong)
	}
	p.mu.Unlock()
	if n := natstest.StreamCount(t, js, dead); n != 0 {
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
}
