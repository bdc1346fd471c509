package bench

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/jsq"
	"github.com/floodgate-go/floodgate/middleware"
	"github.com/floodgate-go/floodgate/retryqueue"
)

// BenchmarkBacklogMemory diverts b.N messages of 800 B through floodgate's
// middleware on a forced-open breaker (16 goroutines) into a retry stream
// on the embedded server (file storage), so b.N messages sit in the retry
// backlog, and reports the process's live heap after a GC (embedded server
// included) before, at half and at the end: heap-MB (at the end),
// B/msg-first-half and B/msg-second-half (heap growth per message diverted
// in each half: a bounded heap shows ~0 in the second half), held-keys
// ([retryqueue.Queue.HeldKeys]) and false-pos-%: the share of 65,536 live
// messages with keys not in the backlog that [retryqueue.Queue.Holds]
// holds anyway (collisions in the ordering index, default
// OrderingBuckets). keys=none is per-key ordering off;
// keys=unique is Config.OrderingKey on with a distinct key per message
// (its worst case), keys=100 with 100 keys. Run it with
// -benchtime=100000x (see BENCHMARKS.md).
func BenchmarkBacklogMemory(b *testing.B) {
	for _, keys := range []string{"none", "100", "unique"} {
		b.Run("keys="+keys, func(b *testing.B) {
			url, js := e2eServer(b)
			ctx := context.Background()
			round := e2eRound.Add(1)
			retry := fmt.Sprintf("backlog_%d_%d", os.Getpid(), round)
			cb, err := breaker.New(breaker.Config{Name: "bench"})
			if err != nil {
				b.Fatal(err)
			}
			defer cb.Stop()
			cb.ForceOpen()
			pub, err := jsq.NewPublisher(jsq.PublisherConfig{URL: url})
			if err != nil {
				b.Fatal(err)
			}
			defer func() { _ = pub.Close() }()
			cfg := retryqueue.Config{Publisher: pub, Service: "bench", RetryTopic: retry, DeadLetterTopic: retry + "_dead", PayloadBucket: retry + "_payload"}
			if keys != "none" {
				cfg.OrderingKey = func(m *message.Message) string { return m.Metadata.Get("key") }
			}
			if err := retryqueue.Provision(ctx, js, cfg); err != nil {
				b.Fatal(err)
			}
			defer func() {
				_ = js.DeleteStream(ctx, retry)
				_ = js.DeleteStream(ctx, retry+"_dead")
				_ = js.DeleteObjectStore(ctx, retry+"_payload")
			}()
			q, err := retryqueue.New(cfg)
			if err != nil {
				b.Fatal(err)
			}
			mw, err := middleware.New(middleware.Config{Breaker: cb, Queue: q})
			if err != nil {
				b.Fatal(err)
			}
			h := mw(func(*message.Message) ([]*message.Message, error) {
				b.Error("handler called with the breaker open")
				return nil, nil
			})
			body := make([]byte, e2eBody)
			for i := range body {
				body[i] = 'a' + byte(i%26)
			}
			var seq atomic.Int64
			divert := func(n int) {
				var wg sync.WaitGroup
				for range 16 {
					wg.Go(func() {
						for {
							i := seq.Add(1)
							if i > int64(n) {
								return
							}
							m := message.NewMessage(fmt.Sprintf("%d-%d", round, i), body)
							switch keys {
							case "unique":
								m.Metadata.Set("key", "order-"+strconv.FormatInt(i, 10))
							case "100":
								m.Metadata.Set("key", "order-"+strconv.FormatInt(i%100, 10))
							}
							m.SetContext(ctx)
							if _, err := h(m); err != nil {
								b.Error(err)
								return
							}
						}
					})
				}
				wg.Wait()
				seq.Store(int64(n))
			}
			b.ResetTimer()
			h0 := liveHeap()
			divert(b.N / 2)
			h1 := liveHeap()
			divert(b.N)
			h2 := liveHeap()
			b.StopTimer()
			s, err := js.Stream(ctx, retry)
			if err != nil {
				b.Fatal(err)
			}
			if got := s.CachedInfo().State.Msgs; got != uint64(b.N) {
				b.Fatalf("backlog holds %d messages, want %d", got, b.N)
			}
			half := float64(max(b.N/2, 1))
			b.ReportMetric(float64(h2)/(1<<20), "heap-MB")
			b.ReportMetric((float64(h1)-float64(h0))/half, "B/msg-first-half")
			b.ReportMetric((float64(h2)-float64(h1))/half, "B/msg-second-half")
			b.ReportMetric(float64(q.HeldKeys()), "held-keys")
			if keys != "none" {
				const probes = 1 << 16
				held := 0
				for i := range probes {
					m := message.NewMessage("live", nil)
					m.Metadata.Set("key", "live-"+strconv.Itoa(i))
					if q.Holds(m) {
						held++
					}
				}
				b.ReportMetric(100*float64(held)/probes, "false-pos-%")
			}
		})
	}
}

// liveHeap returns the bytes of live heap objects after a full GC.
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}
