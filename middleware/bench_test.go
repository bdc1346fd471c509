package middleware_test

import (
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/internal/natstest"
	"github.com/floodgate-go/floodgate/jsq"
	"github.com/floodgate-go/floodgate/middleware"
	"github.com/floodgate-go/floodgate/partner"
	"github.com/floodgate-go/floodgate/retryqueue"
)

// benchQueue is a queue on a real connection; the delivered path never
// publishes, so no stream is needed.
func benchQueue(b *testing.B) *retryqueue.Queue {
	b.Helper()
	nc := natstest.Conn(b, natstest.URL(b))
	pub, err := jsq.NewPublisher(jsq.PublisherConfig{Conn: nc})
	if err != nil {
		b.Fatal(err)
	}
	q, err := retryqueue.New(retryqueue.Config{Publisher: pub, Service: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	return q
}

// benchDelivered runs one message through mw wrapping a handler that
// succeeds at once, with an OnEvent that keeps the event's partner token
// (so the event escapes as it would to metrics).
func benchDelivered(b *testing.B, mw message.HandlerMiddleware, msgs []*message.Message) {
	h := mw(func(*message.Message) ([]*message.Message, error) { return nil, nil })
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := h(msgs[i%len(msgs)]); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkDelivered is the middleware's closed path: a message admitted,
// delivered and reported, with the default wall clock and Timeout (so it
// includes the handler's deadline context).
func BenchmarkDelivered(b *testing.B) {
	q := benchQueue(b)
	var sink string
	onEvent := func(ev middleware.Event) { sink = ev.Partner }
	msgs := []*message.Message{message.NewMessage("m1", []byte("x"))}
	b.Run("single", func(b *testing.B) {
		cb, err := breaker.New(breaker.Config{Name: "bench"})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(cb.Stop)
		mw, err := middleware.New(middleware.Config{Breaker: cb, Queue: q, Timeout: time.Minute, OnEvent: onEvent})
		if err != nil {
			b.Fatal(err)
		}
		benchDelivered(b, mw, msgs)
	})
	// partners: the same through a partner registry, the key from
	// metadata, over 3 partners that exist (created before the timer).
	b.Run("partners", func(b *testing.B) {
		reg, err := partner.New(partner.Config{})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(reg.Close)
		mw, err := middleware.New(middleware.Config{
			Partners: reg, PartnerKey: func(m *message.Message) string { return m.Metadata.Get("to") },
			Queue: q, Timeout: time.Minute, OnEvent: onEvent,
		})
		if err != nil {
			b.Fatal(err)
		}
		var pmsgs []*message.Message
		for _, k := range []string{"ACME", "globex.example", "initech"} {
			m := message.NewMessage("m-"+k, []byte("x"))
			m.Metadata.Set("to", k)
			pmsgs = append(pmsgs, m)
		}
		benchDelivered(b, mw, pmsgs)
	})
	_ = sink
}
