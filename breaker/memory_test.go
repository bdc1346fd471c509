package breaker_test

import (
	"runtime"
	"testing"

	"github.com/floodgate-go/floodgate/breaker"
)

// idleBreakerBytes creates n breakers with the default configuration, uses
// each once (one call admitted and reported, so its closed path is set up),
// and returns the heap bytes per breaker and the goroutines they added.
// With tmpl, the breakers are made from it (and share its configuration),
// else each with [breaker.New].
func idleBreakerBytes(t testing.TB, n int, tmpl *breaker.Template) (perBreaker float64, goroutines int) {
	t.Helper()
	bs := make([]*breaker.Breaker, n)
	runtime.GC()
	g0 := runtime.NumGoroutine()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := range bs {
		var b *breaker.Breaker
		if tmpl != nil {
			b = tmpl.New("partner")
		} else {
			var err error
			if b, err = breaker.New(breaker.Config{Name: "partner"}); err != nil {
				t.Fatal(err)
			}
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
// and no goroutine, whatever GOMAXPROCS is (issues 12 and 14); made from a
// shared [breaker.Template], it holds no copy of the configuration (336
// bytes), so at most 700 bytes.
func TestIdleBreakerMemory(t *testing.T) {
	tmpl, err := breaker.NewTemplate(breaker.Config{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		tmpl  *breaker.Template
		limit float64
	}{{"New", nil, 1024}, {"Template.New", tmpl, 700}} {
		for _, procs := range []int{2, 64} {
			prev := runtime.GOMAXPROCS(procs)
			per, gs := idleBreakerBytes(t, 10_000, c.tmpl)
			runtime.GOMAXPROCS(prev)
			t.Logf("%s, GOMAXPROCS %d: %.0f B per idle breaker, %d goroutines for 10,000", c.name, procs, per, gs)
			if per > c.limit {
				t.Errorf("%s, GOMAXPROCS %d: %.0f B per idle breaker, want <= %.0f", c.name, procs, per, c.limit)
			}
			if gs > 0 {
				t.Errorf("%s, GOMAXPROCS %d: %d goroutines for 10,000 idle breakers, want 0", c.name, procs, gs)
			}
		}
	}
}
