package partner_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/breaker/natskv"
	"github.com/floodgate-go/floodgate/internal/natstest"
	"github.com/floodgate-go/floodgate/partner"
)

// TestLookupDoesNotAllocate: looking up a partner that exists, and (but
// under the race detector, whose sync.Pool drops items) a call through
// it, allocate nothing.
func TestLookupDoesNotAllocate(t *testing.T) {
	r, _ := newTest(t, nil)
	for i := range 1000 {
		mustGet(t, r, fmt.Sprint("partner-", i))
	}
	key := strings.Clone("partner-42")
	if n := testing.AllocsPerRun(1000, func() {
		if _, err := r.Get(key); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Fatalf("Get of an existing partner: %v allocs", n)
	}
	n := testing.AllocsPerRun(1000, func() {
		_, l, err := r.Acquire(key)
		if err != nil {
			t.Fatal(err)
		}
		l.Done(nil)
	})
	if n != 0 && !raceEnabled {
		t.Fatalf("Acquire and Done: %v allocs", n)
	}
}

func benchRegistry(b *testing.B, n int) (*partner.Registry, []string) {
	r, _ := newTest(b, func(c *partner.Config) {
		c.MaxPartners = n
		c.Template.MaxInFlight = 1 << 20
	})
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("partner-%d", i)
		mustGet(b, r, keys[i])
	}
	return r, keys
}

// BenchmarkGet looks up an existing partner among 10,000: one key (hot),
// or keys spread over all partners, serially and in parallel.
func BenchmarkGet(b *testing.B) {
	r, keys := benchRegistry(b, 10000)
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if _, err := r.Get(keys[i%len(keys)]); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
	b.Run("parallel-hot", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := r.Get(keys[42]); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
	var seed atomic.Int64
	b.Run("parallel-spread", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			i := int(seed.Add(7919))
			for pb.Next() {
				if _, err := r.Get(keys[i%len(keys)]); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	})
}

// BenchmarkAcquire is one call through an existing partner: lookup,
// bulkhead, breaker (closed) and Done.
func BenchmarkAcquire(b *testing.B) {
	r, keys := benchRegistry(b, 10000)
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, l, err := r.Acquire(keys[42])
			if err != nil {
				b.Fatal(err)
			}
			l.Done(nil)
		}
	})
	b.Run("parallel-hot", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				_, l, err := r.Acquire(keys[42])
				if err != nil {
					b.Fatal(err)
				}
				l.Done(nil)
			}
		})
	})
}

func BenchmarkToken(b *testing.B) {
	for _, k := range []struct{ name, key string }{
		{"plain", "ACME-RETAIL"},
		{"escaped", "ZZ:123456789.as2"},
		{"hashed-4KB", strings.Repeat("k.", 2048)},
	} {
		b.Run(k.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = partner.Token(k.key)
			}
		})
	}
}

// BenchmarkIdlePartners reports the heap held per idle partner, with
// 10,000 partners seen once (keys of about 20 bytes), and the goroutines
// started per partner; "breaker" is the share of a bare breaker.
func BenchmarkIdlePartners(b *testing.B) {
	const n = 10000
	measure := func(b *testing.B, build func(keys []string) any) {
		keys := make([]string, n)
		for i := range keys {
			keys[i] = fmt.Sprintf("partner-%08d.example", i)
		}
		var bytes, goroutines float64
		for b.Loop() {
			var m0, m1 runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&m0)
			g0 := runtime.NumGoroutine()
			held := build(keys)
			runtime.GC()
			runtime.ReadMemStats(&m1)
			goroutines += float64(runtime.NumGoroutine() - g0)
			bytes += float64(int64(m1.HeapAlloc)-int64(m0.HeapAlloc)) / n
			runtime.KeepAlive(held)
			if r, ok := held.(*partner.Registry); ok {
				r.Close() // leaves the fleets
			}
		}
		b.ReportMetric(bytes/float64(b.N), "B/partner")
		b.ReportMetric(goroutines/float64(b.N)/n, "goroutines/partner")
	}
	b.Run("registry", func(b *testing.B) {
		measure(b, func(keys []string) any {
			r, err := partner.New(partner.Config{MaxPartners: n})
			if err != nil {
				b.Fatal(err)
			}
			for _, k := range keys {
				if _, err := r.Get(k); err != nil {
					b.Fatal(err)
				}
			}
			return r
		})
	})
	fleet := func(b *testing.B, newStore func() breaker.Store) {
		measure(b, func(keys []string) any {
			store := newStore() // inside: a store's maps never shrink
			r, err := partner.New(partner.Config{MaxPartners: n, Fleet: &partner.FleetConfig{
				Service: "orders/as2", Template: breaker.FleetConfig{Store: store, Replica: "r1"},
			}})
			if err != nil {
				b.Fatal(err)
			}
			for _, k := range keys {
				if _, err := r.Get(k); err != nil {
					b.Fatal(err)
				}
			}
			return r
		})
	}
	// Every partner's breaker joined to a fleet: in memory, and on a
	// natskv bucket of an embedded NATS server (in this process, so the
	// server's share of the heap counts too).
	b.Run("registry+fleet-memory", func(b *testing.B) { fleet(b, func() breaker.Store { return breaker.NewMemoryStore(nil) }) })
	b.Run("registry+fleet-natskv", func(b *testing.B) {
		url := natstest.URL(b)
		fleet(b, func() breaker.Store {
			js := natstest.JetStream(b, natstest.Conn(b, url))
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			store, err := natskv.New(ctx, js, natskv.Config{Bucket: natstest.Name(b, "kv")})
			if err != nil {
				b.Fatal(err)
			}
			return store
		})
	})
	b.Run("breaker", func(b *testing.B) {
		measure(b, func(keys []string) any {
			bs := make([]*breaker.Breaker, len(keys))
			for i := range bs {
				var err error
				if bs[i], err = breaker.New(breaker.Config{}); err != nil {
					b.Fatal(err)
				}
			}
			return bs
		})
	})
}
