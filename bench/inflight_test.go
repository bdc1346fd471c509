package bench

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/failsafe-go/failsafe-go/circuitbreaker"
	"github.com/floodgate-go/floodgate/breaker"
	gobreaker "github.com/sony/gobreaker/v2"
)

// BenchmarkInFlight is BenchmarkClosedPath/floodgate's operation (admit,
// then record a success with its latency) while other permits are in
// flight: n in flight counting the measured one, so n-1 are held, admitted
// before the timer starts and reported after it stops.
func BenchmarkInFlight(b *testing.B) {
	t0 := time.Now()
	t1 := t0.Add(latency)
	for _, n := range []int{1, 64, 1_000, 10_000} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			cb := newFloodgate(b)
			held := make([]breaker.Permit, n-1)
			for i := range held {
				p, err := cb.AllowAt(t0)
				if err != nil {
					b.Fatal(err)
				}
				held[i] = p
			}
			b.ReportAllocs()
			for b.Loop() {
				if !closedFloodgate(b, cb, t0, t1) {
					return
				}
			}
			b.StopTimer()
			for _, p := range held {
				p.DoneAt(t1, nil)
			}
		})
	}
}

// BenchmarkIdleMemory measures the heap one idle closed breaker takes: each
// op creates 10,000 breakers with default settings and makes one call on
// each (admitted, success recorded). It reports bytes per breaker and the
// goroutines the breakers started, at the GOMAXPROCS of the -cpu flag.
// floodgate-template makes them from one breaker.Template, as a partner
// registry does, so they share its configuration.
func BenchmarkIdleMemory(b *testing.B) {
	const n = 10_000
	tmpl, err := breaker.NewTemplate(breaker.Config{})
	if err != nil {
		b.Fatal(err)
	}
	cases := map[string]func() any{
		"floodgate-template": func() any {
			cb := tmpl.New("partner")
			p, err := cb.Allow()
			if err != nil {
				b.Fatal(err)
			}
			p.Done(nil)
			return cb
		},
		"floodgate": func() any {
			cb, err := breaker.New(breaker.Config{Name: "partner"})
			if err != nil {
				b.Fatal(err)
			}
			p, err := cb.Allow()
			if err != nil {
				b.Fatal(err)
			}
			p.Done(nil)
			return cb
		},
		"failsafe-go": func() any {
			cb := circuitbreaker.NewWithDefaults[any]()
			if !cb.TryAcquirePermit() {
				b.Fatal("rejected")
			}
			cb.RecordSuccess()
			return cb
		},
		"gobreaker": func() any {
			cb := gobreaker.NewTwoStepCircuitBreaker[any](gobreaker.Settings{Name: "partner"})
			done, err := cb.Allow()
			if err != nil {
				b.Fatal(err)
			}
			done(nil)
			return cb
		},
	}
	for _, name := range []string{"floodgate", "floodgate-template", "failsafe-go", "gobreaker"} {
		b.Run(name, func(b *testing.B) {
			mk := cases[name]
			keep := make([]any, n)
			var bytes, gs float64
			for b.Loop() {
				clear(keep)
				runtime.GC()
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				g0 := runtime.NumGoroutine()
				for i := range keep {
					keep[i] = mk()
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				bytes += float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / n
				gs += float64(runtime.NumGoroutine()-g0) / n
			}
			b.ReportMetric(bytes/float64(b.N), "B/breaker")
			b.ReportMetric(gs/float64(b.N), "goroutines/breaker")
			for _, v := range keep {
				if cb, ok := v.(*breaker.Breaker); ok {
					cb.Stop()
				}
			}
		})
	}
}
