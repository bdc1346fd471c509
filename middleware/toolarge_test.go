package middleware_test

import (
	"bytes"
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/internal/natsserver"
	"github.com/floodgate-go/floodgate/internal/natstest"
	"github.com/floodgate-go/floodgate/jsq"
	"github.com/floodgate-go/floodgate/middleware"
	"github.com/floodgate-go/floodgate/retryqueue"
)

// Regression (issue 12): a message filling the server's max_payload (user
// headers and payload) fits the source stream but no copy of it fits the
// retry or dead-letter stream, so it was nacked and redelivered forever
// and the failing partner was called on every delivery. Now it is
// dead-lettered too-large at its first failed call (or at once while the
// breaker is open), its payload kept in the payload bucket.
func TestTooLargeMessageEndsAsDeadLetter(t *testing.T) {
	for _, tc := range []struct {
		name     string
		open     bool
		maxCalls int64
	}{
		{"partner fails", false, 1},
		{"breaker open", true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const maxPayload = 16 << 10
			srv, err := natsserver.Start(natsserver.Options{MaxPayload: maxPayload})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(srv.Shutdown)
			url := srv.ClientURL()
			nc := natstest.Conn(t, url)
			js := natstest.JetStream(t, nc)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			t.Cleanup(cancel)

			src := natstest.Name(t, "src")
			if _, err := jsq.EnsureStream(ctx, js, src); err != nil {
				t.Fatal(err)
			}
			pub, err := jsq.NewPublisher(jsq.PublisherConfig{Conn: nc, PublishTimeout: 2 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			qcfg := retryqueue.Config{Publisher: pub, Source: src, RetryTopic: natstest.Name(t, "retry"), DeadLetterTopic: natstest.Name(t, "dead"), PublishTimeout: 2 * time.Second}
			if err := retryqueue.Provision(ctx, js, qcfg, src); err != nil {
				t.Fatal(err)
			}
			q, err := retryqueue.New(qcfg)
			if err != nil {
				t.Fatal(err)
			}
			b, err := breaker.New(breaker.Config{WindowSize: 4, MinimumCalls: 4, FailureRateThreshold: 0.5,
				SlowCallDuration: time.Second, BaseOpenWindow: time.Hour, MaxOpenWindow: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(b.Stop)
			if tc.open {
				b.ForceOpen()
			}
			var events atomic.Value
			mw, err := middleware.New(middleware.Config{Breaker: b, Queue: q, OnEvent: func(ev middleware.Event) { events.Store(ev) }})
			if err != nil {
				t.Fatal(err)
			}
			var calls, deliveries atomic.Int64
			partner := mw(func(*message.Message) ([]*message.Message, error) {
				calls.Add(1)
				return nil, errPartner503
			})

			// The source message: user headers of about 2 KB and a payload
			// filling the rest of max_payload, to the byte.
			m := message.NewMessage("uuid-too-large-mw", nil)
			for i := 0; natstest.WireSize(jsq.Marshal(src, m)) < 2000; i++ {
				m.Metadata.Set("x-user-"+string(rune('a'+i)), strings.Repeat("v", 300))
			}
			m.Payload = bytes.Repeat([]byte("ISA*00*~"), maxPayload)[:maxPayload-natstest.WireSize(jsq.Marshal(src, m))]
			if got := natstest.WireSize(jsq.Marshal(src, m)); got != maxPayload {
				t.Fatalf("source message is %d bytes, want %d", got, maxPayload)
			}
			if err := pub.Publish(src, m); err != nil {
				t.Fatalf("publish at exactly max_payload: %v", err)
			}

			sub, err := jsq.NewSubscriber(jsq.SubscriberConfig{URL: url, AckWait: 30 * time.Second, FetchWait: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = sub.Close() })
			msgs, err := sub.Subscribe(ctx, src)
			if err != nil {
				t.Fatal(err)
			}
			go func() { // what the router does: ack on nil, nack on an error
				for msg := range msgs {
					deliveries.Add(1)
					if _, err := partner(msg); err != nil {
						msg.Nack()
					} else {
						msg.Ack()
					}
				}
			}()

			dead := func() uint64 {
				st, err := js.Stream(ctx, qcfg.DeadLetterTopic)
				if err != nil {
					t.Fatal(err)
				}
				info, err := st.Info(ctx)
				if err != nil {
					t.Fatal(err)
				}
				return info.State.Msgs
			}
			natstest.Eventually(t, 30*time.Second, func() bool { return dead() > 0 || deliveries.Load() > 2 },
				"no dead letter and no redelivery: deliveries %d", natstest.Now(func() any { return deliveries.Load() }))
			cons, err := js.Consumer(ctx, src, jsq.DefaultConsumerName(src))
			if err != nil {
				t.Fatal(err)
			}
			natstest.Eventually(t, 30*time.Second, func() bool {
				info, err := cons.Info(ctx)
				return err == nil && info.NumPending == 0 && info.NumAckPending == 0 || deliveries.Load() > 2
			}, "source message not acked")

			if n := deliveries.Load(); n > 2 {
				t.Errorf("delivered %d times, want <= 2", n)
			}
			if n := calls.Load(); n > tc.maxCalls {
				t.Errorf("partner called %d times, want <= %d", n, tc.maxCalls)
			}
			dls := natstest.StreamMsgs(t, js, qcfg.DeadLetterTopic)
			if len(dls) != 1 {
				t.Fatalf("%d dead letters, want 1", len(dls))
			}
			dl := dls[0]
			if r := dl.Metadata.Get(retryqueue.MetaDeadReason); r != retryqueue.DeadReasonTooLarge {
				t.Errorf("dead reason %q, want %q", r, retryqueue.DeadReasonTooLarge)
			}
			if ev, _ := events.Load().(middleware.Event); ev.Action != middleware.DeadLettered || ev.Reason != retryqueue.DeadReasonTooLarge {
				t.Errorf("event %+v, want dead-lettered too-large", ev)
			}
			got, err := q.Restore(ctx, dl)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got.Payload, m.Payload) {
				t.Errorf("restored payload (%d bytes) differs from the source's (%d bytes)", len(got.Payload), len(m.Payload))
			}
			for k, v := range m.Metadata {
				if got.Metadata.Get(k) != v {
					t.Errorf("restored metadata %s differs", k)
				}
			}
		})
	}
}
