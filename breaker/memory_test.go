package breaker_test

import (
	"runtime"
	"testing"

	"github.com/floodgate-go/floodgate/breaker"
)

// idleBreakerBytes creates n breakers with the default configuration, uses
// each once (one call admitted and reported, so its closed path is set up),
// and returns the heap bytes per breaker and the goroutines they added.
func idleBreakerBytes(t testing.TB, n int) (perBreaker float64, goroutines int) {
	t.Helper()
	bs := make([]*breaker.Breaker, n)
	runtime.GC()
	g0 := runtime.NumGoroutine()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := range bs {
		b, err := breaker.New(breaker.Config{Name: "partner"})
		if err != nil {
			t.Fatal(err)
		}
		p, err := b.Allow()
		if err != nil {
			t.Fatal(err)
		}
		p.Done(nil)
		bs[i] = b
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	goroutines = runtime.NumGoroutine() - g0
	perBreaker = float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(n)
	runtime.KeepAlive(bs)
	for _, b := range bs {
		b.Stop()
	}
	return perBreaker, goroutines
}

// TestIdleBreakerMemory: an idle closed breaker takes at most 1 KB of heap
// and no goroutine, whatever GOMAXPROCS is (issues 12 and 14).
func TestIdleBreakerMemory(t *testing.T) {
	for _, procs := range []int{2, 64} {
		prev := runtime.GOMAXPROCS(procs)
		per, gs := idleBreakerBytes(t, 10_000)
		runtime.GOMAXPROCS(prev)
		t.Logf("GOMAXPROCS %d: %.0f B per idle breaker, %d goroutines for 10,000", procs, per, gs)
		if per > 1024 {
			t.Errorf("GOMAXPROCS %d: %.0f B per idle breaker, want <= 1024", procs, per)
		}
		if gs > 0 {
			t.Errorf("GOMAXPROCS %d: %d goroutines for 10,000 idle breakers, want 0", procs, gs)
		}
	}
}
