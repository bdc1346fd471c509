package middleware_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/floodgate-go/floodgate/internal/natstest"
	"github.com/floodgate-go/floodgate/jsq"
	"github.com/floodgate-go/floodgate/middleware"
	"github.com/floodgate-go/floodgate/retryqueue"
)

// Regression (issue 12): with a finite MaxDeliver (allowed explicitly) a
// message whose handling fails on its last delivery, and whose diversion
// fails too, was nacked, and the broker dropped it silently. It now ends in
// the dead-letter stream with reason max-deliver: 0 lost.
func TestLastDeliveryIsDeadLetteredNotDropped(t *testing.T) {
	e := newEnv(t, smallBreaker)
	// No retry stream: every diversion fails; the dead-letter stream works.
	source := e.sourceWithoutRetryStream()
	sub, err := jsq.NewSubscriber(jsq.SubscriberConfig{
		URL: e.url, AckWait: 10 * time.Second, MaxDeliver: 2, AllowFiniteMaxDeliver: true,
		NakDelay: func(uint64) time.Duration { return 20 * time.Millisecond },
	})
	if err != nil {
		t.Fatal(err)
	}
	router, err := message.NewRouter(message.RouterConfig{CloseTimeout: 5 * time.Second}, watermill.NopLogger{})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var seen []jsq.Delivery
	guarded := e.mw(failWith(errPartner503))
	router.AddConsumerHandler("deliver", source, sub, func(msg *message.Message) error {
		d, _ := jsq.DeliveryFrom(msg.Context())
		mu.Lock()
		seen = append(seen, d)
		mu.Unlock()
		_, err := guarded(msg)
		return err
	})
	ctx, cancel := context.WithCancel(context.Background())
	routerDone := make(chan struct{})
	go func() { _ = router.Run(ctx); close(routerDone) }()
	t.Cleanup(func() { cancel(); <-routerDone; _ = sub.Close() })
	<-router.Running()

	msg := newMsg()
	if err := e.qcfg.Publisher.Publish(source, msg); err != nil {
		t.Fatal(err)
	}
	// Done when the consumer has settled the message (acked, or given up
	// after the last nak) after two deliveries.
	natstest.Eventually(t, 20*time.Second, func() bool {
		mu.Lock()
		n := len(seen)
		mu.Unlock()
		c, err := e.js.Consumer(context.Background(), source, jsq.DefaultConsumerName(source))
		if err != nil {
			return false
		}
		info, err := c.Info(context.Background())
		return err == nil && n >= 2 && info.NumPending == 0 && info.NumAckPending == 0
	}, "two deliveries, then the message settled")

	mu.Lock()
	if len(seen) != 2 || seen[1].Count != 2 || seen[1].MaxDeliver != 2 || !seen[1].Last() || seen[0].Last() || seen[1].StreamSeq != 1 {
		t.Errorf("deliveries %+v, want counts 1 and 2 of MaxDeliver 2, the second the last", seen)
	}
	mu.Unlock()
	dead := e.dead()
	if len(dead) != 1 {
		t.Fatalf("%d dead letters, want 1: the message was lost", len(dead))
	}
	if dead[0].UUID != msg.UUID || dead[0].Metadata.Get(retryqueue.MetaDeadReason) != middleware.DeadReasonMaxDeliver {
		t.Errorf("dead letter %s with reason %q, want %s with %q", dead[0].UUID, dead[0].Metadata.Get(retryqueue.MetaDeadReason), msg.UUID, middleware.DeadReasonMaxDeliver)
	}
	if ev := e.lastEvent(); ev.Action != middleware.DeadLettered || ev.Reason != middleware.DeadReasonMaxDeliver || ev.Err == nil {
		t.Errorf("event %+v, want dead-lettered for max-deliver with the cause", ev)
	}
}

// Regression (issue 12): a message whose context is done before admission
// on its last delivery was nacked and dropped by the broker. It is now
// dead-lettered with reason max-deliver; when even that publish fails, the
// event says max-deliver and the handler returns the error. An earlier
// delivery is nacked as before.
func TestLastDeliveryContextDone(t *testing.T) {
	e := newEnv(t, smallBreaker)
	h := e.mw(ok)
	run := func(d jsq.Delivery) (*message.Message, error) {
		msg := newMsg()
		ctx, cancel := context.WithCancelCause(jsq.WithDelivery(context.Background(), d))
		cancel(jsq.ErrClosing)
		msg.SetContext(ctx)
		_, err := h(msg)
		return msg, err
	}
	last := jsq.Delivery{Stream: "orders", Consumer: "c", StreamSeq: 7, Count: 3, MaxDeliver: 3}

	if _, err := run(jsq.Delivery{Count: 2, MaxDeliver: 3}); err == nil {
		t.Fatal("not the last delivery: want a nack")
	}
	if ev := e.lastEvent(); ev.Action != middleware.Nacked || ev.Reason != "" {
		t.Errorf("event %+v, want a plain nack", ev)
	}

	msg, err := run(last)
	if err != nil {
		t.Fatalf("last delivery: %v, want nil (dead-lettered, acked)", err)
	}
	if ev := e.lastEvent(); ev.Action != middleware.DeadLettered || ev.Reason != middleware.DeadReasonMaxDeliver || ev.Admitted {
		t.Errorf("event %+v, want dead-lettered for max-deliver, not admitted", ev)
	}
	if dead := e.dead(); len(dead) != 1 || dead[0].UUID != msg.UUID || dead[0].Metadata.Get(retryqueue.MetaDeadReason) != middleware.DeadReasonMaxDeliver {
		t.Errorf("dead letters %v, want %s for max-deliver", dead, msg.UUID)
	}

	// No dead-letter stream either: reported, not silent.
	if err := e.js.DeleteStream(context.Background(), e.qcfg.DeadLetterTopic); err != nil {
		t.Fatal(err)
	}
	if _, err := run(last); err == nil {
		t.Fatal("dead letter failed: want an error")
	}
	if ev := e.lastEvent(); ev.Action != middleware.Nacked || ev.Reason != middleware.DeadReasonMaxDeliver || ev.Err == nil {
		t.Errorf("event %+v, want nacked for max-deliver with the error", ev)
	}
}
