package jsq_test

import (
	"context"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/message/subscriber"
	"github.com/ThreeDotsLabs/watermill/pubsub/tests"

	"github.com/floodgate-go/floodgate/internal/natstest"
	"github.com/floodgate-go/floodgate/jsq"
)

// TestConformance runs Watermill's Pub/Sub conformance suite
// (pubsub/tests.TestPubSub) on jsq, three times:
//
//   - "ordered": Concurrency 1, flat topics ("<run>_<id>"), with
//     GuaranteedOrder: a subscription hands out messages in stream order,
//     one at a time, as long as none is nacked or runs out of AckWait (a
//     nacked message is redelivered after its NakDelay, behind later ones).
//     Several subscribers of one durable consumer share its messages, so
//     order holds only with a single subscriber
//     (GuaranteedOrderWithSingleSubscriber).
//   - "concurrent": Concurrency 8: no order, so TestNoAck and
//     TestPublishSubscribeInOrder skip themselves.
//   - "hierarchical": Concurrency 1 on topics "jsqconf.<run>.<id>" (subjects
//     of several tokens, streams named by [jsq.StreamName]).
//
// Features declared for all three: Persistent (file-storage streams,
// durable consumers that Close never deletes); ConsumerGroups (a group is a
// durable consumer, [jsq.SubscriberConfig.ConsumerName]; subscribers of the
// same topic and name compete for its messages, so
// NewSubscriberReceivesOldMessages is false and TestNewSubscriberReceives-
// OldMessages skips itself); ExactlyOnceDelivery false (at-least-once:
// the suite de-duplicates); RequireSingleInstance false; ContextPreserved
// false (a message's context is not transported).
//
// The suite runs its short mode (ForceShort: testing.Short is not set in
// CI): 50-100 messages a test where the long mode sends up to 10,000.
//
// No RestartServiceCommand is given, so the suite's TestReconnect skips
// itself: it has a data race of its own that -race reports whatever the
// adapter, and TestConformanceReconnect runs the same scenario without it.
// AckWait is 5s, so a message whose delivery or ack was lost comes back
// well within the suite's read timeouts.
func TestConformance(t *testing.T) {
	url := natstest.URL(t)
	run := natstest.Name(t, "jsqconf")
	t.Cleanup(func() { deleteConformanceStreams(t, url, run) })

	for _, pass := range []struct {
		name         string
		concurrency  int
		ordered      bool
		hierarchical bool
	}{
		{name: "ordered", concurrency: 1, ordered: true},
		{name: "concurrent", concurrency: 8},
		{name: "hierarchical", concurrency: 1, ordered: true, hierarchical: true},
	} {
		t.Run(pass.name, func(t *testing.T) {
			features := tests.Features{
				ConsumerGroups:                      true,
				ExactlyOnceDelivery:                 false,
				GuaranteedOrder:                     pass.ordered,
				GuaranteedOrderWithSingleSubscriber: pass.ordered,
				Persistent:                          true,
				RestartServiceCommand:               nil, // TestConformanceReconnect
				RequireSingleInstance:               false,
				NewSubscriberReceivesOldMessages:    false,
				ForceShort:                          true,
				ContextPreserved:                    false,
				GenerateTopicFunc: func(tc tests.TestContext) string {
					if pass.hierarchical {
						return "jsqconf." + run + "." + string(tc.TestID)
					}
					return run + "_" + string(tc.TestID)
				},
			}
			newPubSub := func(t *testing.T, group string) (message.Publisher, message.Subscriber) {
				pub, err := jsq.NewPublisher(jsq.PublisherConfig{URL: url})
				if err != nil {
					t.Fatal(err)
				}
				cfg := jsq.SubscriberConfig{URL: url, AckWait: 5 * time.Second, Concurrency: pass.concurrency}
				if group != "" {
					cfg.ConsumerName = func(string) string { return group }
				}
				sub, err := jsq.NewSubscriber(cfg)
				if err != nil {
					t.Fatal(err)
				}
				return pub, sub
			}
			tests.TestPubSub(t, features,
				func(t *testing.T) (message.Publisher, message.Subscriber) { return newPubSub(t, "") },
				newPubSub,
			)
		})
	}
}

// deleteConformanceStreams deletes the streams of the run's topics, so a
// run against an external server leaves nothing behind.
func deleteConformanceStreams(t *testing.T, url, run string) {
	nc := natstest.Conn(t, url)
	js := natstest.JetStream(t, nc)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var names []string
	for info := range js.ListStreams(ctx).Info() {
		for _, s := range info.Config.Subjects {
			if strings.Contains(s, run) {
				names = append(names, info.Config.Name)
				break
			}
		}
	}
	for _, n := range names {
		_ = js.DeleteStream(ctx, n)
	}
}

// TestConformanceReconnect is the conformance suite's TestReconnect
// (watermill v1.5.1, pubsub/tests/test_pubsub.go) without its data race: 100
// publishers publish 10,000 messages, one in ten after a 500 ms pause, and
// the server restarts (same port and store, natsserver.Server.Restart) when
// the 3,333rd and the 5,000th are handed to the publishers; every message
// published must be received. The suite's version appends to its list of
// published messages on one goroutine (test_pubsub.go:1086) and reads it
// on another (:1120) with nothing ordering the two, which -race reports in
// about one run in ten, whatever the adapter; here the list has a mutex
// and is read after every publisher finished. It always uses an embedded
// server (NATS_URL cannot be restarted).
func TestConformanceReconnect(t *testing.T) {
	srv := natstest.Server(t)
	url := srv.ClientURL()
	topic := natstest.Name(t, "reconnect")
	pub, err := jsq.NewPublisher(jsq.PublisherConfig{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	sub, err := jsq.NewSubscriber(jsq.SubscriberConfig{URL: url, AckWait: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if err := sub.SubscribeInitialize(topic); err != nil {
		t.Fatal(err)
	}
	msgs, err := sub.Subscribe(context.Background(), topic)
	if err != nil {
		t.Fatal(err)
	}

	const count, publishers = 10000, 100
	var (
		mu        sync.Mutex
		published message.Messages
		restarts  sync.WaitGroup
		pubs      sync.WaitGroup
	)
	work, stop := make(chan struct{}), make(chan struct{})
	defer close(stop)
	go func() {
		defer close(work)
		for i := range count {
			select {
			case work <- struct{}{}:
			case <-stop: // every publisher gave up
				return
			}
			if i == count/3 || i == count/2 {
				restarts.Go(func() {
					if err := srv.Restart(); err != nil {
						t.Errorf("restart: %v", err)
					}
				})
			}
		}
	}()
	giveUp := time.Now().Add(2 * time.Minute) // hang guard
	for range publishers {
		pubs.Go(func() {
			for range work {
				m := message.NewMessage(watermill.NewUUID(), []byte("x"))
				if rand.IntN(10) == 0 {
					time.Sleep(500 * time.Millisecond)
				}
				for err := pub.Publish(topic, m); err != nil; err = pub.Publish(topic, m) {
					if time.Now().After(giveUp) {
						t.Errorf("publish %s: %v", m.UUID, err)
						return
					}
					time.Sleep(100 * time.Millisecond)
				}
				mu.Lock()
				published = append(published, m)
				mu.Unlock()
			}
		})
	}
	received, all := subscriber.BulkReadWithDeduplication(msgs, count, time.Minute)
	pubs.Wait()
	restarts.Wait()
	if !all {
		t.Errorf("received %d of %d messages", len(received), count)
	}
	mu.Lock()
	defer mu.Unlock()
	tests.AssertAllMessagesReceived(t, published, received)
}
