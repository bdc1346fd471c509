package floodgate_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/floodgate-go/floodgate"
	"github.com/floodgate-go/floodgate/internal/natstest"
)

// BenchmarkPartnerIsolation measures how far 5 partners' outages (the
// staggered, fragile outages of TestFiftyPartners) disturb the 45 healthy
// partners behind the same floodgate.New. It first measures the capacity
// (messages/s through one replica, all 50 partners healthy, each delivery
// taking 2 ms), then offers half of it, paced, twice: without outages
// (baseline) and with them, and reports the healthy partners' p99
// delivery latency (publish to first delivery) of each run and their
// ratio; in the outage run only messages published while an outage was
// under way count. Each iteration runs both; use -benchtime=1x.
func BenchmarkPartnerIsolation(b *testing.B) {
	e := newEnv(b)
	capacity := measureCapacity(b, e)
	offered := capacity / 2
	var base, out []time.Duration
	var healthyRate float64
	for range b.N {
		for _, outages := range []bool{false, true} {
			rt := newRoute(b, e)
			h := newHub(fiftyPartners, fiftyOutages...)
			h.work, h.timing = 2*time.Millisecond, true
			rep := startReplica(b, e, rt, h, nil)
			interval := time.Duration(float64(time.Second) / offered)
			start := time.Now()
			next := start
			pace := func() {
				next = next.Add(interval)
				if d := time.Until(next); d > 0 {
					time.Sleep(d)
				}
			}
			rounds := int(offered * 3 / fiftyPartners) // about 3 s of load
			published := runFifty(b, e, rt, h, rounds, outages, pace)
			natstest.Eventually(b, 60*time.Second, func() bool { return len(h.lost(published)) == 0 }, "every message delivered")
			if outages {
				healthy := len(published) / fiftyPartners * (fiftyPartners - len(fiftyOutages))
				healthyRate = float64(healthy) / time.Since(start).Seconds()
			}
			rep.stop()
			h.mu.Lock()
			if outages {
				out = append(out, h.latencies...)
			} else {
				base = append(base, h.latencies...)
			}
			h.mu.Unlock()
		}
	}
	pb, po := p99Of(base), p99Of(out)
	b.ReportMetric(capacity, "capacity_msg/s")
	b.ReportMetric(offered, "offered_msg/s")
	b.ReportMetric(healthyRate, "healthy_delivered_msg/s")
	b.ReportMetric(float64(pb.Microseconds())/1000, "p99_baseline_ms")
	b.ReportMetric(float64(po.Microseconds())/1000, "p99_outage_ms")
	b.ReportMetric(float64(po)/float64(pb), "p99_ratio")
	b.ReportMetric(float64(len(out)), "timed_msgs_outage")
}

func p99Of(l []time.Duration) time.Duration {
	h := &hub{latencies: l}
	p, _ := h.p99()
	return p
}

// measureCapacity publishes 60 rounds of one message per partner as fast
// as it can to one replica, all partners healthy, and returns the
// messages per second delivered (first publish to last delivery).
func measureCapacity(b *testing.B, e *env) float64 {
	rt := newRoute(b, e)
	h := newHub(fiftyPartners)
	h.work = 2 * time.Millisecond
	rep := startReplica(b, e, rt, h, nil)
	defer rep.stop()
	const rounds = 60
	start := time.Now()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for r := range rounds {
			for _, k := range h.order {
				e.publish(b, rt.topic, k, r, false)
			}
		}
	}()
	natstest.Eventually(b, 120*time.Second, func() bool { return h.uniqueDelivered() == rounds*fiftyPartners }, "capacity run delivered")
	<-done
	return float64(rounds*fiftyPartners) / time.Since(start).Seconds()
}

// BenchmarkIdlePartners sends one message each for n distinct partners
// through a running floodgate (Floodgate.Handler, every delivery
// succeeding), then lets them idle, and reports the heap they hold
// (bytes_per_partner: heap delta after GC / n) and the goroutines started
// (goroutines_delta), which must not grow with n. Use -benchtime=1x.
func BenchmarkIdlePartners(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("partners=%d", n), func(b *testing.B) {
			var bytes, gor float64
			for range b.N {
				bb, g := idlePartners(b, n)
				bytes += bb
				gor += g
			}
			b.ReportMetric(bytes/float64(b.N), "bytes_per_partner")
			b.ReportMetric(gor/float64(b.N), "goroutines_delta")
		})
	}
}

func idlePartners(b *testing.B, n int) (bytesPer, goroutines float64) {
	e := newEnv(b)
	rt := newRoute(b, e)
	rep := startReplica(b, e, rt, newHub(0), func(c *floodgate.Config) {
		c.Deliver = func(*message.Message) error { return nil }
		c.MaxPartners = n + 10
	})
	defer rep.stop()
	handle := rep.fg.Handler()
	send := func(key string) {
		m := message.NewMessage(key, nil)
		m.Metadata.Set("partner", key)
		m.SetContext(context.Background())
		if _, err := handle(m); err != nil {
			b.Fatal(err)
		}
	}
	for i := range 10 { // warm up what is created once
		send(fmt.Sprintf("warm-%d", i))
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&before)
	g0 := runtime.NumGoroutine()
	for i := range n {
		send(fmt.Sprintf("partner-%06d", i))
	}
	time.Sleep(500 * time.Millisecond) // let anything started by first use start, and transient work end
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&after)
	g1 := runtime.NumGoroutine()
	if got := rep.fg.Partners().Len(); got < n {
		b.Fatalf("%d partners held, want >= %d", got, n)
	}
	return float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(n), float64(g1 - g0)
}
