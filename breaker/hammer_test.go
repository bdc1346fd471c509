package breaker_test

import (
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/breaker"
)

// TestHammer: many goroutines admit and report on one breaker while a
// driver moves the fake clock and flips the dependency between failing and
// healthy, so the breaker trips and recovers many times. Run with -race. The
// transitions must form one ordered chain, and the breaker must end closed.
func TestHammer(t *testing.T) {
	for _, policy := range []breaker.HalfOpenPolicy{breaker.HalfOpenCappedProbes, breaker.HalfOpenRamp, breaker.HalfOpenAdaptive} {
		t.Run(policy.String(), func(t *testing.T) {
			b, clk := newTest(t, func(c *breaker.Config) {
				c.HalfOpenPolicy = policy
				c.DisableJitter = false
				c.MaxOpenWindow = 4 * time.Second
				c.RampStepDuration = 200 * time.Millisecond
				c.AdaptiveInterval = 100 * time.Millisecond
			})
			var mu sync.Mutex
			var chain []breaker.Transition
			b.AddListener(func(tr breaker.Transition) {
				mu.Lock()
				chain = append(chain, tr)
				mu.Unlock()
			})
			t0 := clk.Now()
			var offset atomic.Int64 // the driver publishes the clock, so workers do not contend on it
			now := func() time.Time { return t0.Add(time.Duration(offset.Load())) }
			advance := func(d time.Duration) {
				clk.Advance(d)
				offset.Store(int64(clk.Now().Sub(t0)))
			}
			var failing atomic.Bool
			var stop atomic.Bool
			var ops, attempts, probesOver atomic.Int64
			var wg sync.WaitGroup
			for g := range 6 {
				wg.Go(func() {
					for i := 0; !stop.Load(); i++ {
						attempts.Add(1)
						if i%8 == 0 {
							runtime.Gosched()
						}
						p, err := b.AllowAt(now())
						if err != nil {
							if !errors.Is(err, breaker.ErrOpen) && !errors.Is(err, breaker.ErrProbeLimit) {
								t.Errorf("rejection %v", err)
								return
							}
							continue
						}
						ops.Add(1)
						switch {
						case (g+i)%17 == 0:
							p.Cancel()
						case failing.Load() && (g+i)%3 != 0:
							p.DoneAt(now(), errBoom)
						default:
							p.DoneAt(now(), nil)
							if (g+i)%29 == 0 {
								p.DoneAt(now(), errBoom) // repeated report: ignored
							}
						}
					}
				})
			}
			wg.Go(func() { // observer
				for !stop.Load() {
					s := b.SnapshotAt(now())
					if s.State == breaker.StateHalfOpen && s.AdmittedShare == 0 && s.ProbesInFlight > 2 {
						probesOver.Add(1)
					}
				}
			})
			for step := range 600 {
				failing.Store((step/100)%2 == 1) // 2s failing, 2s healthy
				if step == 300 {
					b.ForceOpen()
				}
				if step == 302 {
					b.ForceClose()
				}
				advance(20 * time.Millisecond)
				if !waitFor(&attempts, 60) { // let the workers run between clock moves
					stop.Store(true)
					wg.Wait()
					t.Fatal("the workers stopped")
				}
			}
			failing.Store(false)
			for range 2000 { // healthy: it must settle closed
				advance(20 * time.Millisecond)
				if !waitFor(&attempts, 60) {
					stop.Store(true)
					wg.Wait()
					t.Fatal("the workers stopped")
				}
				if b.StateAt(clk.Now()) == breaker.StateClosed && b.SnapshotAt(clk.Now()).ConsecutiveTrips == 0 {
					break
				}
			}
			stop.Store(true)
			wg.Wait()
			mustState(t, b, clk, breaker.StateClosed)
			if probesOver.Load() != 0 {
				t.Errorf("probe cap exceeded %d times", probesOver.Load())
			}
			mu.Lock()
			defer mu.Unlock()
			trips := 0
			for i, tr := range chain {
				if i > 0 && (tr.From != chain[i-1].To || tr.Generation <= chain[i-1].Generation) {
					t.Fatalf("transition %d out of order: %+v after %+v", i, tr, chain[i-1])
				}
				if tr.To == breaker.StateOpen {
					trips++
				}
			}
			if trips < 3 || ops.Load() < 1000 {
				t.Fatalf("hammer too weak: %d trips, %d ops", trips, ops.Load())
			}
			t.Logf("%d transitions, %d trips, %d admitted, %d stale", len(chain), trips, ops.Load(), b.Stale())
		})
	}
}

// waitFor yields until n grows by at least d. It returns false if n stops
// growing for 10s (the workers returned after an error).
func waitFor(n *atomic.Int64, d int64) bool {
	deadline := time.Now().Add(10 * time.Second)
	for start := n.Load(); n.Load()-start < d; {
		if time.Now().After(deadline) {
			return false
		}
		runtime.Gosched()
	}
	return true
}
