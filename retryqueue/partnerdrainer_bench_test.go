package retryqueue_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/floodgate-go/floodgate/internal/natstest"
	"github.com/floodgate-go/floodgate/jsq"
	"github.com/floodgate-go/floodgate/retryqueue"
	"github.com/nats-io/nats.go/jetstream"
)

// BenchmarkPartnerDrain1000 measures the drain of 1,000 partners that each
// have a backlog of 10 messages (benchPayload), after their breakers
// recover: the PartnerDrainer has found every backlog and every partner's
// drain is paused on its closed gate; then all gates open at once and the
// clock runs until the handler (a no-op: unbounded partner capacity) has
// every message. It reports:
//
//   - drain_s: time to drain all;
//
//   - plain_msgs/s: a plain JetStream pull consumer's read rate (Fetch of
//     500, ack each) over the same number of the same messages in a stream
//     of the same kind, measured in the same run;
//
//   - min_s: the theoretical minimum, backlog / plain_msgs/s (the partners'
//     aggregate capacity is unbounded here), and x_min = drain_s / min_s;
//
//   - fairness: each partner's drain rate (its backlog / the time it took
//     to finish) against its max-min fair share (every partner has the same
//     backlog and demand, so the same share: the aggregate rate / partners),
//     as worst_dev_% (the largest deviation), p50_dev_% and within20_% (the
//     partners within ±20 %).
//
//     go test -run '^$' -bench PartnerDrain1000 -benchtime 1x -count 3 -timeout 30m ./retryqueue/
func BenchmarkPartnerDrain1000(b *testing.B) {
	const partners, each = 1000, 10
	url := natstest.URL(b)
	for range b.N {
		b.StopTimer()
		plain := plainReadRate(b, url, partners*each)
		e := newEnv(b, url, nil)
		keys := make([]string, partners)
		var wg sync.WaitGroup
		for w := range 16 {
			wg.Go(func() {
				for i := w; i < partners; i += 16 {
					keys[i] = fmt.Sprintf("retailer-%04d", i)
					for j := range each {
						m := message.NewMessage(fmt.Sprintf("%d-%d", i, j), benchPayload)
						if _, err := e.q.RouteTo(context.Background(), m, keys[i], retryqueue.ReasonOpen, errOpen); err != nil {
							b.Error(err)
							return
						}
					}
				}
			})
		}
		wg.Wait()
		if b.Failed() {
			b.FailNow()
		}

		var open atomic.Bool
		gate := retryqueue.GateFunc(func() int {
			if open.Load() {
				return 1 << 30
			}
			return 0
		})
		var delivered atomic.Int64
		var start time.Time
		var mu sync.Mutex
		finish := map[string]time.Duration{}
		count := map[string]int{}
		h := func(m *message.Message) ([]*message.Message, error) {
			k, _ := retryqueue.DrainedPartner(m.Context(), m)
			mu.Lock()
			if count[k]++; count[k] == each {
				finish[k] = time.Since(start)
			}
			mu.Unlock()
			delivered.Add(1)
			return nil, nil
		}
		pd, err := retryqueue.NewPartnerDrainer(retryqueue.PartnerDrainerConfig{
			JetStream: e.js, Queue: e.q, Handler: h,
			Gate: func(string) retryqueue.Gate { return gate },
		})
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- pd.Run(ctx) }()
		natstest.Eventually(b, 5*time.Minute, func() bool {
			ps := pd.Partners()
			return len(ps) == partners && !slices.ContainsFunc(ps, func(s retryqueue.PartnerStatus) bool { return !s.Paused })
		}, "every partner's drain paused on its gate")

		mu.Lock()
		start = time.Now()
		mu.Unlock()
		b.StartTimer()
		open.Store(true)
		for _, k := range keys {
			pd.Wake(k)
		}
		natstest.Eventually(b, 10*time.Minute, func() bool { return delivered.Load() >= partners*each }, "all drained")
		b.StopTimer()
		elapsed := time.Since(start)
		cancel()
		if err := <-done; err != nil {
			b.Fatal(err)
		}

		mu.Lock()
		if len(finish) != partners {
			b.Fatalf("%d partners finished, want %d", len(finish), partners)
		}
		devs := make([]float64, 0, partners)
		for _, f := range finish {
			// rate_i / fair = (each/f) / (each*partners/elapsed/partners)
			devs = append(devs, (elapsed.Seconds()/f.Seconds()-1)*100)
		}
		mu.Unlock()
		slices.Sort(devs)
		within := 0
		for _, d := range devs {
			if d <= 20 {
				within++
			}
		}
		minS := float64(partners*each) / plain
		b.ReportMetric(elapsed.Seconds(), "drain_s")
		b.ReportMetric(plain, "plain_msgs/s")
		b.ReportMetric(minS, "min_s")
		b.ReportMetric(elapsed.Seconds()/minS, "x_min")
		b.ReportMetric(devs[len(devs)-1], "worst_dev_%")
		b.ReportMetric(devs[len(devs)/2], "p50_dev_%")
		b.ReportMetric(float64(within)/float64(partners)*100, "within20_%")
	}
}

// plainReadRate stores n messages of benchPayload in a file-storage stream
// and returns the messages per second a plain pull consumer reads and acks
// them at.
func plainReadRate(b *testing.B, url string, n int) float64 {
	nc := natstest.Conn(b, url)
	js := natstest.JetStream(b, nc)
	name := natstest.Name(b, "plain")
	natstest.DeleteStreams(b, js, name)
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, retryqueue.RetryStreamConfig(name)); err != nil {
		b.Fatal(err)
	}
	for i := range n {
		if _, err := js.PublishAsync(fmt.Sprintf("%s.svc.p%d", name, i%1000), benchPayload); err != nil {
			b.Fatal(err)
		}
		if i%1000 == 999 || i == n-1 {
			select {
			case <-js.PublishAsyncComplete():
			case <-time.After(2 * time.Minute):
				b.Fatal("plain stream: publishes not confirmed")
			}
		}
	}
	c, err := js.CreateConsumer(ctx, name, jetstream.ConsumerConfig{Durable: "plain", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	read := 0
	for read < n {
		batch, err := c.Fetch(500, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			b.Fatal(err)
		}
		for m := range batch.Messages() {
			_ = jsq.Unmarshal(m)
			if err := m.Ack(); err != nil {
				b.Fatal(err)
			}
			read++
		}
		if err := batch.Error(); err != nil {
			b.Fatal(err)
		}
	}
	return float64(n) / time.Since(start).Seconds()
}
