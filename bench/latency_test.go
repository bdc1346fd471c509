package bench

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/floodgate-go/floodgate/jsq"
)

const (
	// latencyRate is the fixed load of BenchmarkLatency, in messages per
	// second: well below every variant's capacity (BenchmarkEndToEnd).
	latencyRate = 1000
	// latencyWarmup messages go through each variant before the measured
	// ones, so connection, consumer and first-pull set-up are not measured.
	latencyWarmup = 50
	// latencySeqKey is the metadata (header) carrying a message's index.
	latencySeqKey = "bench_seq"
)

// BenchmarkLatency publishes b.N messages of 800 B at a fixed 1,000 msg/s
// to a live stream through each variant of BenchmarkEndToEnd in turn (the
// order rotated from round to round, one embedded JetStream server, file
// storage, a new stream and durable consumer per variant), and measures
// each message's latency from the start of its publish (synchronous,
// awaiting the PubAck) to the no-op handler's return. It reports per
// variant the median and 99th percentile (<variant>-p50-ns,
// <variant>-p99-ns), and jsq+floodgate's minus the baseline's of the same
// round (jsq+floodgate-added-p50-ns, -p99-ns): the added latency. A
// redelivered message counts once, at its first handling. Run it with
// -benchtime=5000x (see BENCHMARKS.md); b.N = 1 takes about 0.1 s per
// variant.
func BenchmarkLatency(b *testing.B) {
	for _, handlers := range []int{1, 4, 16} {
		b.Run(fmt.Sprintf("handlers=%d", handlers), func(b *testing.B) {
			url, js := e2eServer(b)
			round := e2eRound.Add(1)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			p50, p99 := map[string]float64{}, map[string]float64{}
			b.ResetTimer()
			for i := range e2eVariants {
				v := e2eVariants[(i+int(round))%len(e2eVariants)]
				topic := fmt.Sprintf("lat_%d_%d_%d", os.Getpid(), round, i)
				lat := latencyRun(b, ctx, url, js, topic, handlers, b.N, v)
				slices.Sort(lat)
				p50[v.name] = float64(lat[len(lat)/2])
				p99[v.name] = float64(lat[(len(lat)*99)/100])
			}
			b.StopTimer()
			for _, v := range e2eVariants {
				b.ReportMetric(p50[v.name], v.name+"-p50-ns")
				b.ReportMetric(p99[v.name], v.name+"-p99-ns")
			}
			b.ReportMetric(p50["jsq+floodgate"]-p50["wmnats"], "jsq+floodgate-added-p50-ns")
			b.ReportMetric(p99["jsq+floodgate"]-p99["wmnats"], "jsq+floodgate-added-p99-ns")
		})
	}
}

// latencyRun runs v on a new stream for topic, publishes latencyWarmup + n
// messages at latencyRate, and returns the latencies of the last n.
func latencyRun(b *testing.B, ctx context.Context, url string, js jetstream.JetStream, topic string, handlers, n int, v e2eVariant) []time.Duration {
	b.Helper()
	if _, err := jsq.EnsureStream(ctx, js, topic); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = js.DeleteStream(context.Background(), topic) }()

	total := latencyWarmup + n
	base := time.Now()
	sent := make([]atomic.Int64, total) // ns since base at the publish
	took := make([]atomic.Int64, total) // ns from publish to handled; 0 until handled
	var handled atomic.Int64
	all := make(chan struct{})
	h := func(m *message.Message) error {
		i, err := strconv.Atoi(m.Metadata.Get(latencySeqKey))
		if err != nil || i < 0 || i >= total {
			return fmt.Errorf("bad %s %q", latencySeqKey, m.Metadata.Get(latencySeqKey))
		}
		d := max(int64(time.Since(base))-sent[i].Load(), 1)
		if took[i].CompareAndSwap(0, d) && handled.Add(1) == int64(total) {
			close(all)
		}
		return nil
	}
	stop := v.run(b, url, topic, "lat", handlers, h)
	defer stop()

	body := make([]byte, e2eBody)
	for i := range body {
		body[i] = 'a' + byte(i%26)
	}
	interval := time.Second / latencyRate
	start := time.Now()
	for i := range total {
		if wait := time.Until(start.Add(time.Duration(i) * interval)); wait > 0 {
			time.Sleep(wait)
		}
		m := nats.NewMsg(topic)
		m.Header.Set(jsq.UUIDHeader, watermill.NewUUID())
		m.Header.Set(latencySeqKey, strconv.Itoa(i))
		m.Data = body
		sent[i].Store(int64(time.Since(base)))
		if _, err := js.PublishMsg(ctx, m); err != nil {
			b.Fatal(err)
		}
	}
	select {
	case <-all:
	case <-ctx.Done():
		b.Fatalf("%s: %d of %d messages handled", v.name, handled.Load(), total)
	}
	lat := make([]time.Duration, 0, n)
	for i := latencyWarmup; i < total; i++ {
		lat = append(lat, time.Duration(took[i].Load()))
	}
	return lat
}
