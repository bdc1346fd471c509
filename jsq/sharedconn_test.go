package jsq_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/floodgate-go/floodgate/internal/natstest"
	"github.com/floodgate-go/floodgate/jsq"
)

// A publisher and subscribers given the application's connection (as Conn,
// or as a JetStream context on it) deliver and ack on it, and closing them
// leaves it open and usable.
func TestSharedConnection(t *testing.T) {
	e := setup(t)
	nc := natstest.Conn(t, e.url)
	js := natstest.JetStream(t, nc)
	pub, err := jsq.NewPublisher(jsq.PublisherConfig{Conn: nc})
	if err != nil {
		t.Fatal(err)
	}
	jsPub, err := jsq.NewPublisher(jsq.PublisherConfig{JetStream: js})
	if err != nil {
		t.Fatal(err)
	}
	for i, cfg := range []jsq.SubscriberConfig{
		{Conn: nc},
		{JetStream: js},
		{Conn: nc, JetStream: js, URL: "nats://127.0.0.1:1"}, // URL ignored
	} {
		sub, err := jsq.NewSubscriber(cfg)
		if err != nil {
			t.Fatalf("config %d: %v", i, err)
		}
		ch, err := sub.Subscribe(t.Context(), e.topic) // lives as long as the test
		if err != nil {
			t.Fatal(err)
		}
		id := fmt.Sprint("shared", i)
		if err := []*jsq.Publisher{pub, jsPub}[i%2].Publish(e.topic, message.NewMessage(id, []byte("x"))); err != nil {
			t.Fatal(err)
		}
		select {
		case m := <-ch:
			if m.UUID != id {
				t.Fatalf("config %d: received %s, want %s", i, m.UUID, id)
			}
			m.Ack()
		case <-time.After(10 * time.Second):
			t.Fatalf("config %d: nothing received", i)
		}
		// The ack went out on the shared connection and was applied.
		natstest.Eventually(t, 10*time.Second, func() bool {
			info := e.consumerInfo(t, jsq.DefaultConsumerName(e.topic))
			return info.NumAckPending == 0 && info.AckFloor.Stream == uint64(i+1)
		}, "config %d: ack of stream seq %d applied", i, i+1)
		if err := sub.Close(); err != nil {
			t.Fatal(err)
		}
		if _, ok := <-ch; ok {
			t.Fatalf("config %d: channel open after Close", i)
		}
		if nc.IsClosed() {
			t.Fatalf("config %d: Subscriber.Close closed the connection it was given", i)
		}
	}
	for _, p := range []*jsq.Publisher{pub, jsPub} {
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
		if nc.IsClosed() {
			t.Fatal("Publisher.Close closed the connection it was given")
		}
	}
	if err := nc.FlushTimeout(5 * time.Second); err != nil {
		t.Fatalf("shared connection unusable after Close: %v", err)
	}
}

// Conn and a JetStream context on another connection are refused: which
// one was meant cannot be told.
func TestSharedConnectionMismatch(t *testing.T) {
	url := natstest.URL(t)
	nc1, nc2 := natstest.Conn(t, url), natstest.Conn(t, url)
	js2 := natstest.JetStream(t, nc2)
	_, err := jsq.NewSubscriber(jsq.SubscriberConfig{Conn: nc1, JetStream: js2})
	if !errors.Is(err, jsq.ErrInvalidConfig) || !strings.Contains(err.Error(), "Conn and JetStream.Conn() are different connections") {
		t.Fatalf("NewSubscriber: %v, want ErrInvalidConfig naming Conn and JetStream", err)
	}
	_, err = jsq.NewPublisher(jsq.PublisherConfig{Conn: nc1, JetStream: js2})
	if !errors.Is(err, jsq.ErrInvalidConfig) || !strings.Contains(err.Error(), "Conn and JetStream.Conn() are different connections") {
		t.Fatalf("NewPublisher: %v, want ErrInvalidConfig naming Conn and JetStream", err)
	}
}
