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
// have a backlog (benchPayload messages: 10 each, or 100 each), after
// their breakers recover: the PartnerDrainer has found every backlog and
// every partner's drain is paused on its gate (its breaker open); then
// every breaker closes at once and the clock runs until the handler (a no-op: unbounded partner
// capacity) has every message. It reports:
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
//   - fairness per second: in each whole second of the drain, each partner
//     that still had a backlog at its start against its max-min fair share
//     of what was drained in that second (water-filling over the partners'
//     remaining backlogs: a partner with less left than the others' share
//     is owed only what it has left). sec_within20_% are the partners
//     within ±20 % of their share in every whole second, sec_p50_dev_% the
//     median deviation over partner-seconds (absent when the drain took
//     less than a whole second);
//
//   - finish_within20_%: the partners whose whole-drain rate (backlog / the
//     time it took them to finish) is within 20 % of the aggregate rate /
//     partners, the fluid ideal in which all finish together (no batching
//     schedule meets it at a small backlog per partner; kept to compare
//     with earlier runs, which called it within20_%).
//
//     go test -run '^$' -bench PartnerDrain1000 -benchtime 1x -count 5 -timeout 60m ./retryqueue/
func BenchmarkPartnerDrain1000(b *testing.B) {
	for _, each := range []int{10, 100} {
		b.Run(fmt.Sprintf("backlog=%d", each), func(b *testing.B) { benchPartnerDrain(b, 1000, each) })
	}
}

func benchPartnerDrain(b *testing.B, partners, each int) {
	url := natstest.URL(b)
	for range b.N {
		b.StopTimer()
		plain := plainReadRate(b, url, partners*each)
		e := newEnv(b, url, nil)
		keys := make([]string, partners)
		index := map[string]int{}
		for i := range keys {
			keys[i] = fmt.Sprintf("retailer-%04d", i)
			index[keys[i]] = i
		}
		var wg sync.WaitGroup
		for w := range 16 {
			wg.Go(func() {
				for i := w; i < partners; i += 16 {
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

		// Every partner's breaker closes at once: floodgate's gates are
		// ClosedGates, so the drain may go through the service consumer.
		gate := &breakerGate{}
		gate.open.Store(true)
		var delivered atomic.Int64
		var start time.Time
		var mu sync.Mutex
		times := make([][]time.Duration, partners) // delivery times by partner
		h := func(m *message.Message) ([]*message.Message, error) {
			k, _ := retryqueue.DrainedPartner(m.Context(), m)
			mu.Lock()
			if i, ok := index[k]; ok {
				times[i] = append(times[i], time.Since(start))
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
			return len(ps) == partners && !slices.ContainsFunc(ps, func(s retryqueue.PartnerStatus) bool { return !s.Paused || s.Backlog != uint64(each) })
		}, "every partner's drain paused on its gate, its backlog counted")

		mu.Lock()
		start = time.Now()
		mu.Unlock()
		b.StartTimer()
		gate.open.Store(false)
		for _, k := range keys {
			pd.Wake(k)
		}
		natstest.Eventually(b, 10*time.Minute, func() bool { return delivered.Load() >= int64(partners*each) }, "all drained")
		b.StopTimer()
		elapsed := time.Since(start)
		cancel()
		if err := <-done; err != nil {
			b.Fatal(err)
		}

		mu.Lock()
		for i, ts := range times {
			if len(ts) != each {
				b.Fatalf("partner %d: %d deliveries, want %d", i, len(ts), each)
			}
		}
		within := 0
		for _, ts := range times {
			// rate_i / fair = (each/f) / (each*partners/elapsed/partners)
			if elapsed.Seconds()/slices.Max(ts).Seconds()-1 <= 0.2 {
				within++
			}
		}
		secWithin, secP50, secs := perSecondFairness(times, elapsed)
		mu.Unlock()
		minS := float64(partners*each) / plain
		b.ReportMetric(elapsed.Seconds(), "drain_s")
		b.ReportMetric(plain, "plain_msgs/s")
		b.ReportMetric(minS, "min_s")
		b.ReportMetric(elapsed.Seconds()/minS, "x_min")
		b.ReportMetric(float64(within)/float64(partners)*100, "finish_within20_%")
		if secs > 0 {
			b.ReportMetric(secWithin, "sec_within20_%")
			b.ReportMetric(secP50, "sec_p50_dev_%")
		}
	}
}

// perSecondFairness compares each partner's deliveries in each whole
// second of a drain that took elapsed (times: each partner's delivery
// times from the start) with its max-min fair share of that second's
// deliveries, given the backlogs left at the second's start. It returns
// the percentage of partners within ±20 % of their share in every second
// they had a backlog in, the median absolute deviation in percent over
// partner-seconds, and the number of whole seconds.
func perSecondFairness(times [][]time.Duration, elapsed time.Duration) (within, p50 float64, secs int) {
	secs = int(elapsed / time.Second)
	if secs == 0 {
		return 0, 0, 0
	}
	n := len(times)
	fair := make([]bool, n)
	for i := range fair {
		fair[i] = true
	}
	var devs []float64
	for w := range secs {
		lo, hi := time.Duration(w)*time.Second, time.Duration(w+1)*time.Second
		left := make([]float64, n) // backlog at the second's start
		got := make([]float64, n)
		total := 0.0
		for i, ts := range times {
			for _, t := range ts {
				switch {
				case t >= hi:
					left[i]++
				case t >= lo:
					left[i]++
					got[i]++
					total++
				}
			}
		}
		// Water-filling: the level lambda at which sum(min(left, lambda))
		// is what was drained in the second.
		sorted := slices.Clone(left)
		slices.Sort(sorted)
		rest, lambda := total, 0.0
		for k, l := range sorted {
			if l == 0 {
				continue
			}
			if l*float64(n-k) >= rest {
				lambda = rest / float64(n-k)
				break
			}
			rest -= l
			lambda = l
		}
		for i := range times {
			if left[i] == 0 {
				continue
			}
			share := min(left[i], lambda)
			dev := (got[i] - share) / share * 100
			devs = append(devs, max(dev, -dev))
			if dev > 20 || dev < -20 {
				fair[i] = false
			}
		}
	}
	count := 0
	for _, f := range fair {
		if f {
			count++
		}
	}
	slices.Sort(devs)
	if len(devs) > 0 {
		p50 = devs[len(devs)/2]
	}
	return float64(count) / float64(n) * 100, p50, secs
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
