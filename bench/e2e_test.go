package bench

import (
	"context"
	"fmt"
	"os"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wmjs "github.com/ThreeDotsLabs/watermill-nats/v2/pkg/jetstream"
	"github.com/ThreeDotsLabs/watermill/message"
	wmmw "github.com/ThreeDotsLabs/watermill/message/router/middleware"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/sony/gobreaker"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/internal/natsserver"
	"github.com/floodgate-go/floodgate/jsq"
	"github.com/floodgate-go/floodgate/middleware"
	"github.com/floodgate-go/floodgate/retryqueue"
)

// e2eBody is the payload size of an end-to-end message, in bytes.
const e2eBody = 800

// e2e is the embedded server the end-to-end benchmark shares across its
// runs, started on first use and shut down by TestMain.
var e2e struct {
	once sync.Once
	srv  *natsserver.Server
	nc   *nats.Conn
	js   jetstream.JetStream
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if e2e.nc != nil {
		e2e.nc.Close()
	}
	if e2e.srv != nil {
		e2e.srv.Shutdown()
	}
	os.Exit(code)
}

func e2eServer(b *testing.B) (string, jetstream.JetStream) {
	e2e.once.Do(func() {
		if e2e.srv, e2e.err = natsserver.Start(natsserver.Options{}); e2e.err != nil {
			return
		}
		if e2e.nc, e2e.err = nats.Connect(e2e.srv.ClientURL()); e2e.err != nil {
			return
		}
		e2e.js, e2e.err = jetstream.New(e2e.nc)
	})
	if e2e.err != nil {
		b.Fatal(e2e.err)
	}
	return e2e.srv.ClientURL(), e2e.js
}

// e2eVariant consumes a topic's stream from the start through a Watermill
// router until done is closed: handlers is jsq's Concurrency or the number
// of watermill-nats subscriptions (router handlers) on one subscriber.
type e2eVariant struct {
	name string
	run  func(b *testing.B, url, topic, consumer string, handlers int, h message.NoPublishHandlerFunc) (stop func())
}

var e2eVariants = []e2eVariant{
	{"wmnats", func(b *testing.B, url, topic, consumer string, n int, h message.NoPublishHandlerFunc) func() {
		return runWatermillNATS(b, url, topic, consumer, n, h, nil)
	}},
	{"wmnats+wmcb", func(b *testing.B, url, topic, consumer string, n int, h message.NoPublishHandlerFunc) func() {
		cb := wmmw.NewCircuitBreaker(gobreaker.Settings{Name: "bench"})
		return runWatermillNATS(b, url, topic, consumer, n, h, cb.Middleware)
	}},
	{"jsq+floodgate", func(b *testing.B, url, topic, consumer string, n int, h message.NoPublishHandlerFunc) func() {
		sub, err := jsq.NewSubscriber(jsq.SubscriberConfig{
			URL: url, Concurrency: n, ConsumerName: func(string) string { return consumer },
		})
		if err != nil {
			b.Fatal(err)
		}
		stop := runRouter(b, floodgateMiddleware(b, url), func(r *message.Router) {
			r.AddConsumerHandler("h", topic, sub, h)
		})
		return func() { stop(); _ = sub.Close() }
	}},
	{"wmnats+floodgate", func(b *testing.B, url, topic, consumer string, n int, h message.NoPublishHandlerFunc) func() {
		return runWatermillNATS(b, url, topic, consumer, n, h, floodgateMiddleware(b, url))
	}},
}

// runWatermillNATS runs the baseline: watermill-nats' pkg/jetstream
// subscriber on a durable consumer with synchronous acks (DoubleAck), n
// router handlers each with its own subscription, mw (if any) on all.
func runWatermillNATS(b *testing.B, url, topic, consumer string, n int, h message.NoPublishHandlerFunc, mw message.HandlerMiddleware) func() {
	sub, err := wmjs.NewSubscriber(wmjs.SubscriberConfig{
		URL:    url,
		Logger: watermill.NopLogger{},
		ResourceInitializer: func(ctx context.Context, js jetstream.JetStream, topic string) (jetstream.Consumer, func(context.Context, watermill.LoggerAdapter), error) {
			c, err := js.CreateOrUpdateConsumer(ctx, topic, jsq.SubscriberConfig{ConsumerName: func(string) string { return consumer }}.ConsumerConfig(topic))
			return c, nil, err
		},
	})
	if err != nil {
		b.Fatal(err)
	}
	stop := runRouter(b, mw, func(r *message.Router) {
		for i := range n {
			r.AddConsumerHandler(fmt.Sprint("h", i), topic, sub, h)
		}
	})
	return func() { stop(); _ = sub.Close() }
}

// floodgateMiddleware is floodgate's middleware on a closed breaker with
// the defaults, diverting to a queue on url (the healthy path never does).
func floodgateMiddleware(b *testing.B, url string) message.HandlerMiddleware {
	cb, err := breaker.New(breaker.Config{Name: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	pub, err := jsq.NewPublisher(jsq.PublisherConfig{URL: url})
	if err != nil {
		b.Fatal(err)
	}
	q, err := retryqueue.New(retryqueue.Config{Publisher: pub, Service: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	mw, err := middleware.New(middleware.Config{Breaker: cb, Queue: q})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cb.Stop(); _ = pub.Close() })
	return mw
}

func runRouter(b *testing.B, mw message.HandlerMiddleware, add func(*message.Router)) func() {
	r, err := message.NewRouter(message.RouterConfig{CloseTimeout: 10 * time.Second}, watermill.NopLogger{})
	if err != nil {
		b.Fatal(err)
	}
	if mw != nil {
		r.AddMiddleware(mw)
	}
	add(r)
	done := make(chan error, 1)
	go func() { done <- r.Run(context.Background()) }()
	select {
	case <-r.Running():
	case err := <-done:
		b.Fatalf("router stopped: %v", err)
	}
	return func() { _ = r.Close(); <-done }
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// e2eWork counts the process's heap allocations and goroutines started.
type e2eWork struct{ allocs, goroutines float64 }

func readWork() e2eWork {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:objects"}, {Name: "/sched/goroutines-created:goroutines"}}
	metrics.Read(s)
	return e2eWork{float64(s[0].Value.Uint64()), float64(s[1].Value.Uint64())}
}

func (w e2eWork) minus(o e2eWork) e2eWork {
	return e2eWork{w.allocs - o.allocs, w.goroutines - o.goroutines}
}

func (w e2eWork) per(n int) e2eWork {
	return e2eWork{w.allocs / float64(n), w.goroutines / float64(n)}
}

var e2eRound atomic.Int64

// BenchmarkEndToEnd consumes b.N stored messages of 800 B through each
// variant in turn (one paired round per call, the order rotated from round
// to round) on one embedded JetStream server, file storage, with a no-op
// handler. Each variant has its own durable consumer on the same stream.
// It reports, per variant, messages per second (<variant>-msg/s), the
// process's CPU time per message (<variant>-cpu-ns/msg: getrusage, the
// embedded server included), the heap allocations and goroutines started
// per message (<variant>-allocs/msg, -goroutines/msg: runtime/metrics,
// server included; they hardly depend on the machine's load), and the
// ratios of jsq+floodgate to the
// watermill-nats baseline. One op is one message through all four
// variants. Run it with -benchtime=20000x (see BENCHMARKS.md).
func BenchmarkEndToEnd(b *testing.B) {
	for _, handlers := range []int{1, 4, 16} {
		b.Run(fmt.Sprintf("handlers=%d", handlers), func(b *testing.B) {
			url, _, ctx, topic, stream, round := e2eSource(b, "e2e")

			rate := map[string]float64{}
			cpu := map[string]float64{}
			work := map[string]e2eWork{}
			b.ResetTimer()
			for i := range e2eVariants {
				v := e2eVariants[(i+int(round))%len(e2eVariants)]
				consumer := fmt.Sprintf("e2e_%d_%d", round, i)
				w0 := readWork()
				elapsed, used := e2eConsume(b, ctx, url, stream, topic, consumer, handlers, b.N, v)
				work[v.name] = readWork().minus(w0).per(b.N)
				rate[v.name] = float64(b.N) / elapsed.Seconds()
				cpu[v.name] = float64(used.Nanoseconds()) / float64(b.N)
			}
			b.StopTimer()
			for _, v := range e2eVariants {
				b.ReportMetric(rate[v.name], v.name+"-msg/s")
				b.ReportMetric(cpu[v.name], v.name+"-cpu-ns/msg")
				b.ReportMetric(work[v.name].allocs, v.name+"-allocs/msg")
				b.ReportMetric(work[v.name].goroutines, v.name+"-goroutines/msg")
			}
			b.ReportMetric(rate["jsq+floodgate"]/rate["wmnats"], "jsq+floodgate/wmnats-rate")
			b.ReportMetric(cpu["jsq+floodgate"]/cpu["wmnats"], "jsq+floodgate/wmnats-cpu")
		})
	}
}

// e2ePublish stores n messages of e2eBody bytes with Watermill UUIDs.
func e2ePublish(b *testing.B, ctx context.Context, js jetstream.JetStream, topic string, n int) {
	body := make([]byte, e2eBody)
	for i := range body {
		body[i] = 'a' + byte(i%26)
	}
	for i := range n {
		m := nats.NewMsg(topic)
		m.Header.Set(jsq.UUIDHeader, watermill.NewUUID())
		m.Data = body
		if _, err := js.PublishMsgAsync(m); err != nil {
			b.Fatal(err)
		}
		if i%1000 == 999 {
			<-js.PublishAsyncComplete()
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-ctx.Done():
		b.Fatal("publish not complete")
	}
}

// e2eConsume runs v on a new durable consumer until n messages were handled
// and acked, and returns the wall and CPU time that took.
func e2eConsume(b *testing.B, ctx context.Context, url string, stream jetstream.Stream, topic, consumer string, handlers, n int, v e2eVariant) (elapsed, cpu time.Duration) {
	var handled atomic.Int64
	all := make(chan struct{})
	h := func(*message.Message) error {
		if handled.Add(1) == int64(n) {
			close(all)
		}
		return nil
	}
	t0, c0 := time.Now(), cpuTime()
	stop := v.run(b, url, topic, consumer, handlers, h)
	select {
	case <-all:
	case <-ctx.Done():
		b.Fatalf("%s: %d of %d messages handled", v.name, handled.Load(), n)
	}
	for {
		info, err := stream.Consumer(ctx, consumer)
		if err != nil {
			b.Fatal(err)
		}
		if ci := info.CachedInfo(); ci.NumAckPending == 0 && ci.NumPending == 0 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	elapsed, cpu = time.Since(t0), cpuTime()-c0
	stop()
	if err := stream.DeleteConsumer(ctx, consumer); err != nil {
		b.Fatal(err)
	}
	return elapsed, cpu
}

// e2eSource returns the shared server, a context for the run, and a new
// source topic and stream holding b.N messages, deleted with b, and the
// round number, from which a run rotates its variants.
func e2eSource(b *testing.B, prefix string) (url string, js jetstream.JetStream, ctx context.Context, topic string, stream jetstream.Stream, round int64) {
	b.Helper()
	url, js = e2eServer(b)
	round = e2eRound.Add(1)
	topic = fmt.Sprintf("%s_%d_%d", prefix, os.Getpid(), round)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	b.Cleanup(cancel)
	stream, err := jsq.EnsureStream(ctx, js, topic)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = js.DeleteStream(context.Background(), topic) })
	e2ePublish(b, ctx, js, topic, b.N)
	return url, js, ctx, topic, stream, round
}
