package retryqueue_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/ThreeDotsLabs/watermill/message"
	wmmiddleware "github.com/ThreeDotsLabs/watermill/message/router/middleware"

	"github.com/floodgate-go/floodgate/internal/natstest"
	"github.com/floodgate-go/floodgate/jsq"
	"github.com/floodgate-go/floodgate/retryqueue"
)

// benchPayload is an X12 850 of a realistic size (~800 bytes).
var benchPayload = []byte(strings.Repeat("PO1*1*10*EA*9.95**VP*SKU-0001~", 26))

// BenchmarkDiversion measures diversion throughput into JetStream (file
// storage, confirmed publishes) side by side: floodgate's Queue.Divert and
// Watermill's PoisonQueue middleware publishing the same messages through
// the same publisher. "serial" is one handler goroutine (one publish round
// trip per message); "parallel" is GOMAXPROCS×8 handler goroutines, as a
// router with concurrent pull loops runs them. It reports msgs/s.
//
//	go test -run '^$' -bench Diversion -count 6 ./retryqueue/ | tee new.txt
//	benchstat -col /impl new.txt
func BenchmarkDiversion(b *testing.B) {
	url := natstest.URL(b)
	nc := natstest.Conn(b, url)
	js := natstest.JetStream(b, nc)
	pub, err := jsq.NewPublisher(jsq.PublisherConfig{Conn: nc})
	if err != nil {
		b.Fatal(err)
	}
	errOpen := errors.New("breaker: open")
	var seq atomic.Uint64
	newMsg := func() *message.Message {
		m := message.NewMessage(fmt.Sprintf("bench-%d", seq.Add(1)), benchPayload)
		m.Metadata.Set("x12_control_number", "000000001")
		m.SetContext(context.Background())
		return m
	}

	setup := func(b *testing.B) (*retryqueue.Queue, message.HandlerFunc) {
		cfg := retryqueue.Config{Publisher: pub, Service: "svc", RetryTopic: natstest.Name(b, "retry"), DeadLetterTopic: natstest.Name(b, "dead")}
		poison := natstest.Name(b, "poison")
		natstest.DeleteStreams(b, js, cfg.RetryTopic, cfg.DeadLetterTopic, poison)
		ctx := context.Background()
		if err := retryqueue.Provision(ctx, js, cfg); err != nil {
			b.Fatal(err)
		}
		// The poison topic gets the retry stream's configuration, so both
		// publish into the same kind of stream.
		if _, err := js.CreateStream(ctx, retryqueue.RetryStreamConfig(poison)); err != nil {
			b.Fatal(err)
		}
		q, err := retryqueue.New(cfg)
		if err != nil {
			b.Fatal(err)
		}
		pq, err := wmmiddleware.PoisonQueue(pub, poison)
		if err != nil {
			b.Fatal(err)
		}
		failing := pq(func(*message.Message) ([]*message.Message, error) { return nil, errOpen })
		return q, failing
	}
	divert := func(q *retryqueue.Queue, _ message.HandlerFunc) error {
		m := newMsg()
		return q.Divert(m.Context(), m, retryqueue.ReasonOpen, errOpen)
	}
	poison := func(_ *retryqueue.Queue, h message.HandlerFunc) error {
		_, err := h(newMsg())
		return err
	}
	for _, mode := range []string{"serial", "parallel"} {
		for _, impl := range []struct {
			name string
			do   func(*retryqueue.Queue, message.HandlerFunc) error
		}{{"watermill-PoisonQueue", poison}, {"floodgate-Divert", divert}} {
			b.Run("mode="+mode+"/impl="+impl.name, func(b *testing.B) {
				q, h := setup(b)
				b.SetBytes(int64(len(benchPayload)))
				b.ResetTimer()
				if mode == "serial" {
					for b.Loop() {
						if err := impl.do(q, h); err != nil {
							b.Fatal(err)
						}
					}
				} else {
					b.SetParallelism(8)
					b.RunParallel(func(pb *testing.PB) {
						for pb.Next() {
							if err := impl.do(q, h); err != nil {
								b.Error(err)
								return
							}
						}
					})
				}
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
			})
		}
	}
}
