package retryqueue

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/internal/natstest"
	"github.com/nats-io/nats.go/jetstream"
)

// Fetches of several consumers at once through one puller each get only
// their own consumer's messages (the messages arrive under their stream
// subjects, not the reply token), their acks are confirmed and remove the
// messages, and a fetch from a missing consumer fails as consumerGone
// recognizes.
func TestPullerDemuxesConcurrentFetches(t *testing.T) {
	nc := natstest.Conn(t, natstest.URL(t))
	js := natstest.JetStream(t, nc)
	ctx := t.Context()
	name := natstest.Name(t, "pull")
	natstest.DeleteStreams(t, js, name)
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{name + ".>"}, Retention: jetstream.WorkQueuePolicy}); err != nil {
		t.Fatal(err)
	}
	const parts, each = 8, 30
	for i := range parts {
		subj := fmt.Sprintf("%s.p%d", name, i)
		for range each {
			if _, err := js.Publish(ctx, subj, []byte(subj)); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := js.CreateConsumer(ctx, name, jetstream.ConsumerConfig{Durable: fmt.Sprintf("c%d", i), FilterSubject: subj, AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
			t.Fatal(err)
		}
	}
	p, err := newPuller(js)
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	var wg sync.WaitGroup
	for i := range parts {
		wg.Go(func() {
			subj, got := fmt.Sprintf("%s.p%d", name, i), 0
			for got < each {
				msgs, err := p.fetchNoWait(name, fmt.Sprintf("c%d", i), 7)
				if err != nil {
					t.Errorf("consumer c%d: %v", i, err)
					return
				}
				for _, m := range msgs {
					if m.Subject() != subj || string(m.Data()) != subj {
						t.Errorf("consumer c%d got a message of %q", i, m.Subject())
					}
					if md, err := m.Metadata(); err != nil || md.Consumer != fmt.Sprintf("c%d", i) {
						t.Errorf("consumer c%d: metadata %+v, %v", i, md, err)
					}
					if err := m.DoubleAck(ctx); err != nil {
						t.Errorf("consumer c%d: ack: %v", i, err)
					}
					if err := m.Ack(); err == nil {
						t.Errorf("consumer c%d: a second ack was sent", i)
					}
					got++
				}
			}
		})
	}
	natstest.Finishes(t, time.Minute, wg.Wait, "fetches")
	st, err := js.Stream(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if info, err := st.Info(ctx); err != nil || info.State.Msgs != 0 {
		t.Fatalf("stream after the acks: %+v, %v", info.State, err)
	}
	if msgs, err := p.fetchNoWait(name, "c0", 5); len(msgs) != 0 || err != nil {
		t.Fatalf("fetch from an empty consumer: %d messages, %v", len(msgs), err)
	}
	if _, err := p.fetchNoWait(name, "missing", 5); !consumerGone(err) {
		t.Fatalf("fetch from a missing consumer: %v, want an error consumerGone recognizes", err)
	}
}
