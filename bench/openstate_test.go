package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wmjs "github.com/ThreeDotsLabs/watermill-nats/v2/pkg/jetstream"
	"github.com/ThreeDotsLabs/watermill/message"
	wmmw "github.com/ThreeDotsLabs/watermill/message/router/middleware"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/sony/gobreaker"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/jsq"
	"github.com/floodgate-go/floodgate/middleware"
	"github.com/floodgate-go/floodgate/retryqueue"
)

// openVariant consumes a topic's stream with its breaker open, diverting
// every message to the stream named divert, until stop is called.
type openVariant struct {
	name string
	run  func(b *testing.B, ctx context.Context, url string, js jetstream.JetStream, topic, consumer, divert string, handlers int) (stop func())
}

var openVariants = []openVariant{
	{"wmnats+wmcb+poison", runWatermillOpen},
	{"jsq+floodgate", func(b *testing.B, ctx context.Context, url string, js jetstream.JetStream, topic, consumer, divert string, n int) func() {
		return runFloodgateOpen(b, ctx, url, js, topic, consumer, divert, n, true)
	}},
	{"wmnats+floodgate", func(b *testing.B, ctx context.Context, url string, js jetstream.JetStream, topic, consumer, divert string, n int) func() {
		return runFloodgateOpen(b, ctx, url, js, topic, consumer, divert, n, false)
	}},
}

// runWatermillOpen is what a Watermill user has today: the baseline
// subscriber (durable, synchronous acks), Watermill's CircuitBreaker
// (sony/gobreaker) tripped open, wrapped by PoisonQueue publishing through
// watermill-nats' JetStream publisher (PublishMsg: the PubAck is awaited).
func runWatermillOpen(b *testing.B, ctx context.Context, url string, js jetstream.JetStream, topic, consumer, divert string, n int) func() {
	c := jsq.StreamConfig(divert)
	c.Retention = jetstream.WorkQueuePolicy
	if _, err := js.CreateStream(ctx, c); err != nil {
		b.Fatal(err)
	}
	pub, err := wmjs.NewPublisher(wmjs.PublisherConfig{URL: url, Logger: watermill.NopLogger{}})
	if err != nil {
		b.Fatal(err)
	}
	pq, err := wmmw.PoisonQueue(pub, divert)
	if err != nil {
		b.Fatal(err)
	}
	cb := wmmw.NewCircuitBreaker(gobreaker.Settings{
		Name:        "bench",
		Timeout:     time.Hour, // stays open for the run
		ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= 1 },
	})
	errTrip := errors.New("trip")
	if _, err := cb.Middleware(func(*message.Message) ([]*message.Message, error) { return nil, errTrip })(message.NewMessage("trip", nil)); !errors.Is(err, errTrip) {
		b.Fatalf("tripping gobreaker: %v", err)
	}
	mw := func(h message.HandlerFunc) message.HandlerFunc { return pq(cb.Middleware(h)) }
	stop := runWatermillNATS(b, url, topic, consumer, n, func(*message.Message) error {
		b.Error("handler called with the breaker open")
		return nil
	}, mw)
	return func() { stop(); _ = pub.Close() }
}

// runFloodgateOpen is floodgate's middleware on a forced-open breaker,
// diverting to the retry stream divert (provisioned by
// retryqueue.Provision), on jsq's subscriber, or on the baseline subscriber
// when useJSQ is false (which tells the subscriber's share from floodgate's).
func runFloodgateOpen(b *testing.B, ctx context.Context, url string, js jetstream.JetStream, topic, consumer, divert string, n int, useJSQ bool) func() {
	cb, err := breaker.New(breaker.Config{Name: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	cb.ForceOpen()
	pub, err := jsq.NewPublisher(jsq.PublisherConfig{URL: url})
	if err != nil {
		b.Fatal(err)
	}
	cfg := retryqueue.Config{Publisher: pub, Service: "bench", RetryTopic: divert, DeadLetterTopic: divert + "_dead", PayloadBucket: divert + "_payload"}
	if err := retryqueue.Provision(ctx, js, cfg); err != nil {
		b.Fatal(err)
	}
	q, err := retryqueue.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	mw, err := middleware.New(middleware.Config{Breaker: cb, Queue: q})
	if err != nil {
		b.Fatal(err)
	}
	cleanup := func() {
		cb.Stop()
		_ = pub.Close()
		_ = js.DeleteStream(context.Background(), divert+"_dead")
		_ = js.DeleteObjectStore(context.Background(), divert+"_payload")
	}
	never := func(*message.Message) error {
		b.Error("handler called with the breaker open")
		return nil
	}
	if !useJSQ {
		stop := runWatermillNATS(b, url, topic, consumer, n, never, mw)
		return func() { stop(); cleanup() }
	}
	sub, err := jsq.NewSubscriber(jsq.SubscriberConfig{
		URL: url, Concurrency: n, ConsumerName: func(string) string { return consumer },
	})
	if err != nil {
		b.Fatal(err)
	}
	stop := runRouter(b, mw, func(r *message.Router) {
		r.AddConsumerHandler("h", topic, sub, never)
	})
	return func() { stop(); _ = sub.Close(); cleanup() }
}

// BenchmarkOpenState diverts b.N stored messages of 800 B, arriving while
// the breaker is open, through each variant in turn (one paired round per
// call, the order rotated) on one embedded JetStream server, file storage:
// each message is consumed on its usual subscriber, turned away by the open
// breaker, published to a work-queue stream with the PubAck awaited, and
// only then acked. It reports per variant messages per second
// (<variant>-msg/s), the process's CPU time per message
// (<variant>-cpu-ns/msg: getrusage, embedded server included), the bytes
// the divert stream stores per message (<variant>-B/diverted: stream Bytes
// over Msgs), and floodgate's ratios to Watermill. Run it with
// -benchtime=10000x (see BENCHMARKS.md).
func BenchmarkOpenState(b *testing.B) {
	for _, handlers := range []int{1, 4} {
		b.Run(fmt.Sprintf("handlers=%d", handlers), func(b *testing.B) {
			url, js, ctx, topic, stream, round := e2eSource(b, "open")

			rate, cpu, size := map[string]float64{}, map[string]float64{}, map[string]float64{}
			b.ResetTimer()
			for i := range openVariants {
				v := openVariants[(i+int(round))%len(openVariants)]
				consumer := fmt.Sprintf("open_%d_%d", round, i)
				divert := fmt.Sprintf("divert_%d_%d_%d", os.Getpid(), round, i)
				t0, c0 := time.Now(), cpuTime()
				stop := v.run(b, ctx, url, js, topic, consumer, divert, handlers)
				openAwait(b, ctx, stream, consumer, b.N, v.name)
				elapsed, used := time.Since(t0), cpuTime()-c0
				stop()
				if err := stream.DeleteConsumer(ctx, consumer); err != nil {
					b.Fatal(err)
				}
				ds, err := js.Stream(ctx, divert)
				if err != nil {
					b.Fatal(err)
				}
				st := ds.CachedInfo().State
				if st.Msgs < uint64(b.N) {
					b.Fatalf("%s: %d of %d messages diverted", v.name, st.Msgs, b.N)
				}
				_ = js.DeleteStream(ctx, divert)
				rate[v.name] = float64(b.N) / elapsed.Seconds()
				cpu[v.name] = float64(used.Nanoseconds()) / float64(b.N)
				size[v.name] = float64(st.Bytes) / float64(st.Msgs)
			}
			b.StopTimer()
			for _, v := range openVariants {
				b.ReportMetric(rate[v.name], v.name+"-msg/s")
				b.ReportMetric(cpu[v.name], v.name+"-cpu-ns/msg")
				b.ReportMetric(size[v.name], v.name+"-B/diverted")
			}
			const fg, wm = "jsq+floodgate", "wmnats+wmcb+poison"
			b.ReportMetric(rate[fg]/rate[wm], "floodgate/watermill-rate")
			b.ReportMetric(cpu[fg]/cpu[wm], "floodgate/watermill-cpu")
		})
	}
}

// openAwait waits until consumer has acked all n messages of the stream:
// nothing pending, nothing unacked.
func openAwait(b *testing.B, ctx context.Context, stream jetstream.Stream, consumer string, n int, name string) {
	for {
		c, err := stream.Consumer(ctx, consumer)
		if err == nil {
			ci := c.CachedInfo()
			if ci.Delivered.Stream >= uint64(n) && ci.NumPending == 0 && ci.NumAckPending == 0 {
				return
			}
		} else if !errors.Is(err, jetstream.ErrConsumerNotFound) {
			b.Fatal(err)
		}
		select {
		case <-ctx.Done():
			b.Fatalf("%s: not all %d messages acked", name, n)
		case <-time.After(2 * time.Millisecond):
		}
	}
}
