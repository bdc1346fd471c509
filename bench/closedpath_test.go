package bench

import (
	"testing"
	"time"

	"github.com/failsafe-go/failsafe-go/circuitbreaker"
	"github.com/floodgate-go/floodgate/breaker"
	gobreaker "github.com/sony/gobreaker/v2"
)

// latency is the call latency the floodgate cases report; the breaker
// judges it against SlowCallDuration (the peers judge no latency).
const latency = 2 * time.Millisecond

func newFloodgate(b *testing.B) *breaker.Breaker { return newFloodgateT(b) }

func newFloodgateT(b testing.TB) *breaker.Breaker {
	cb, err := breaker.New(breaker.Config{
		Name:                  "bench",
		SlowCallDuration:      time.Second,
		SlowCallRateThreshold: 0.5, // latency is judged in the closed state
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(cb.Stop)
	return cb
}

// closedFloodgate admits and records a success with its latency, at times
// the caller read (as the middleware does: it reads the clock for the
// handler's deadline and after the handler returns). It reports a
// rejection with b.Error (safe in RunParallel workers) and returns false.
func closedFloodgate(b *testing.B, cb *breaker.Breaker, t0, t1 time.Time) bool {
	p, err := cb.AllowAt(t0)
	if err != nil {
		b.Error(err)
		return false
	}
	p.DoneAt(t1, nil)
	return true
}

func BenchmarkClosedPath(b *testing.B) {
	t0 := time.Now()
	t1 := t0.Add(latency)
	b.Run("floodgate", func(b *testing.B) {
		cb := newFloodgate(b)
		b.ReportAllocs()
		for b.Loop() {
			if !closedFloodgate(b, cb, t0, t1) {
				return
			}
		}
	})
	b.Run("floodgate-wallclock", func(b *testing.B) {
		cb := newFloodgate(b)
		b.ReportAllocs()
		for b.Loop() {
			p, err := cb.Allow()
			if err != nil {
				b.Fatal(err)
			}
			p.Done(nil)
		}
	})
	b.Run("gobreaker", func(b *testing.B) {
		cb := gobreaker.NewTwoStepCircuitBreaker[any](gobreaker.Settings{Name: "bench"})
		b.ReportAllocs()
		for b.Loop() {
			done, err := cb.Allow()
			if err != nil {
				b.Fatal(err)
			}
			done(nil)
		}
	})
	b.Run("failsafe-go", func(b *testing.B) {
		cb := circuitbreaker.NewWithDefaults[any]()
		b.ReportAllocs()
		for b.Loop() {
			if !cb.TryAcquirePermit() {
				b.Fatal("rejected")
			}
			cb.RecordSuccess()
		}
	})
}

func BenchmarkClosedPathParallel(b *testing.B) {
	t0 := time.Now()
	t1 := t0.Add(latency)
	b.Run("floodgate", func(b *testing.B) {
		cb := newFloodgate(b)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if !closedFloodgate(b, cb, t0, t1) {
					return
				}
			}
		})
	})
	b.Run("floodgate-wallclock", func(b *testing.B) {
		cb := newFloodgate(b)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				p, err := cb.Allow()
				if err != nil {
					b.Error(err)
					return
				}
				p.Done(nil)
			}
		})
	})
	b.Run("gobreaker", func(b *testing.B) {
		cb := gobreaker.NewTwoStepCircuitBreaker[any](gobreaker.Settings{Name: "bench"})
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				done, err := cb.Allow()
				if err != nil {
					b.Error(err)
					return
				}
				done(nil)
			}
		})
	})
	b.Run("failsafe-go", func(b *testing.B) {
		cb := circuitbreaker.NewWithDefaults[any]()
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if !cb.TryAcquirePermit() {
					b.Error("rejected")
					return
				}
				cb.RecordSuccess()
			}
		})
	})
}
