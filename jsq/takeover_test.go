package jsq_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/floodgate-go/floodgate/internal/natstest"
	"github.com/floodgate-go/floodgate/jsq"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// publishN publishes messages m1..mn to e.topic (stream sequences 1..n).
func (e env) publishN(t *testing.T, n int) {
	t.Helper()
	for i := 1; i <= n; i++ {
		if err := e.pub.Publish(e.topic, message.NewMessage(fmt.Sprint("m", i), nil)); err != nil {
			t.Fatal(err)
		}
	}
}

// receiveAll subscribes with consumer, acks everything, and returns how
// often each UUID arrived once the consumer has nothing pending or unacked.
func (e env) receiveAll(t *testing.T, consumer string) map[string]int {
	t.Helper()
	sub := e.subscriber(t, jsq.SubscriberConfig{ConsumerName: func(string) string { return consumer }})
	ch, err := sub.Subscribe(t.Context(), e.topic) // lives as long as the test
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	natstest.Eventually(t, 30*time.Second, func() bool {
		for {
			select {
			case m := <-ch:
				got[m.UUID]++
				m.Ack()
				continue
			default:
			}
			break
		}
		i := e.consumerInfo(t, consumer)
		return i.NumPending == 0 && i.NumAckPending == 0
	}, "consumer %s drained", consumer)
	return got
}

// A watermill-nats pkg/nats JetStream subscriber uses a durable push
// consumer (js.QueueSubscribe with nats.Durable, as here), which cannot
// become a pull consumer. TakeOver starts jsq's consumer at its ack floor
// + 1: nothing at or below the floor comes again, every message above it
// does, none is lost, and exactly the ones acked out of order above the
// floor are duplicates, as many as Takeover.Duplicates says.
func TestTakeOverPushConsumer(t *testing.T) {
	e := setup(t)
	const n = 20
	e.publishN(t, n)

	// The old subscriber acks m1..m5, then m7 and m9 out of order, and
	// leaves the rest of what it was sent unacked.
	legacy, err := nats.Connect(e.url)
	if err != nil {
		t.Fatal(err)
	}
	ljs, err := legacy.JetStream()
	if err != nil {
		t.Fatal(err)
	}
	sub, err := ljs.QueueSubscribeSync(e.topic, "legacy", nats.Durable("legacy"), nats.ManualAck(), nats.MaxAckPending(10))
	if err != nil {
		t.Fatal(err)
	}
	acked := []string{"m1", "m2", "m3", "m4", "m5", "m7", "m9"}
	for range 9 {
		m, err := sub.NextMsg(10 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if id := m.Header.Get(jsq.UUIDHeader); slices.Contains(acked, id) {
			if err := m.AckSync(); err != nil {
				t.Fatal(err)
			}
		}
	}

	// Still subscribed: refused, and nothing is created.
	if _, err := jsq.TakeOver(ctx(t), e.js, e.topic, "legacy", jsq.SubscriberConfig{}); !errors.Is(err, jsq.ErrConsumerActive) {
		t.Fatalf("TakeOver with the old subscriber bound: %v, want ErrConsumerActive", err)
	}
	if _, err := e.js.Consumer(ctx(t), e.topic, jsq.DefaultConsumerName(e.topic)); !errors.Is(err, jetstream.ErrConsumerNotFound) {
		t.Fatalf("jsq's consumer after a refused TakeOver: %v, want not found", err)
	}

	legacy.Close() // as the old service stops; the durable stays
	natstest.Eventually(t, 10*time.Second, func() bool {
		c, err := e.js.PushConsumer(ctx(t), e.topic, "legacy")
		if err != nil {
			t.Fatal(err)
		}
		info, err := c.Info(ctx(t))
		return err == nil && !info.PushBound
	}, "old subscriber unbound")

	tk, err := jsq.TakeOver(ctx(t), e.js, e.topic, "legacy", jsq.SubscriberConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if tk.Bound || tk.Existed || tk.StartSeq != 6 || tk.Consumer != jsq.DefaultConsumerName(e.topic) || tk.Duplicates != 2 || tk.Redelivered < 4 {
		t.Fatalf("TakeOver = %+v, want jsq's consumer at seq 6 with 2 duplicates of >= 4 redelivered", tk)
	}
	again, err := jsq.TakeOver(ctx(t), e.js, e.topic, "legacy", jsq.SubscriberConfig{})
	if err != nil || !again.Existed || again.Consumer != tk.Consumer {
		t.Fatalf("second TakeOver = %+v, %v; want Existed", again, err)
	}

	got := e.receiveAll(t, tk.Consumer)
	var dups []string
	for i := 1; i <= n; i++ {
		id := fmt.Sprint("m", i)
		switch {
		case i <= 5 && got[id] != 0:
			t.Errorf("%s, acked below the ack floor, delivered again", id)
		case i > 5 && got[id] != 1:
			t.Errorf("%s delivered %d times, want 1", id, got[id])
		}
		if i > 5 && slices.Contains(acked, id) && got[id] > 0 {
			dups = append(dups, id)
		}
	}
	if uint64(len(dups)) != tk.Duplicates {
		t.Errorf("duplicates %v, Takeover.Duplicates %d", dups, tk.Duplicates)
	}
}

// A pull consumer equal to jsq's (a watermill-nats pkg/jetstream
// subscriber configured like jsq) is bound as it is: jsq continues where it
// stopped, and creates no consumer of its own.
func TestTakeOverBindsPullConsumer(t *testing.T) {
	e := setup(t)
	e.publishN(t, 6)
	cc := jsq.SubscriberConfig{ConsumerName: func(string) string { return "wmjs" }}.ConsumerConfig(e.topic)
	old, err := e.js.CreateConsumer(ctx(t), e.topic, cc)
	if err != nil {
		t.Fatal(err)
	}
	batch, err := old.Fetch(3, jetstream.FetchMaxWait(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for m := range batch.Messages() {
		if err := m.DoubleAck(ctx(t)); err != nil {
			t.Fatal(err)
		}
	}

	tk, err := jsq.TakeOver(ctx(t), e.js, e.topic, "wmjs", jsq.SubscriberConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if !tk.Bound || tk.Consumer != "wmjs" {
		t.Fatalf("TakeOver = %+v, want bound to wmjs", tk)
	}
	if _, err := e.js.Consumer(ctx(t), e.topic, jsq.DefaultConsumerName(e.topic)); !errors.Is(err, jetstream.ErrConsumerNotFound) {
		t.Fatalf("jsq's own consumer: %v, want not found", err)
	}
	got := e.receiveAll(t, tk.Consumer)
	want := map[string]int{"m4": 1, "m5": 1, "m6": 1}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("received %v, want %v", got, want)
	}
}
