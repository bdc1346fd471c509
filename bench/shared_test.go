package bench

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/breaker/natskv"
	"github.com/floodgate-go/floodgate/internal/natsserver"
)

// joinNATS joins cb to a fleet through a natskv store on an embedded NATS
// server (JetStream, file storage in a temporary directory).
func joinNATS(b testing.TB, cb *breaker.Breaker) {
	srv, err := natsserver.Start(natsserver.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(srv.Shutdown)
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := natskv.New(ctx, js, natskv.Config{})
	if err != nil {
		b.Fatal(err)
	}
	f, err := breaker.JoinFleet(cb, breaker.FleetConfig{Store: s, Replica: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(f.Leave)
}

func joinMemory(b testing.TB, cb *breaker.Breaker) {
	f, err := breaker.JoinFleet(cb, breaker.FleetConfig{Store: breaker.NewMemoryStore(nil), Replica: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(f.Leave)
}

// sharedCases are the closed path of a breaker alone and of the same
// breaker in a fleet (breaker.JoinFleet), through an in-memory store and
// through NATS JetStream KV.
var sharedCases = []struct {
	name string
	join func(testing.TB, *breaker.Breaker)
}{
	{"local", nil},
	{"shared-memory", joinMemory},
	{"shared-natskv", joinNATS},
}

// BenchmarkClosedPathShared is BenchmarkClosedPath/floodgate with the
// breaker in a fleet: the closed path must not touch the store.
func BenchmarkClosedPathShared(b *testing.B) {
	t0 := time.Now()
	t1 := t0.Add(latency)
	for _, c := range sharedCases {
		b.Run(c.name, func(b *testing.B) {
			cb := newFloodgate(b)
			if c.join != nil {
				c.join(b, cb)
			}
			b.ReportAllocs()
			for b.Loop() {
				if !closedFloodgate(b, cb, t0, t1) {
					return
				}
			}
		})
	}
}

// BenchmarkClosedPathSharedParallel is the same under b.RunParallel.
func BenchmarkClosedPathSharedParallel(b *testing.B) {
	t0 := time.Now()
	t1 := t0.Add(latency)
	for _, c := range sharedCases {
		b.Run(c.name, func(b *testing.B) {
			cb := newFloodgate(b)
			if c.join != nil {
				c.join(b, cb)
			}
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if !closedFloodgate(b, cb, t0, t1) {
						return
					}
				}
			})
		})
	}
}

// TestClosedPathSharedAllocs checks the closed path of a breaker in a fleet
// allocates nothing.
func TestClosedPathSharedAllocs(t *testing.T) {
	cb := newFloodgateT(t)
	joinNATS(t, cb)
	t0 := time.Now()
	t1 := t0.Add(latency)
	if n := testing.AllocsPerRun(1000, func() {
		p, err := cb.AllowAt(t0)
		if err != nil {
			t.Fatal(err)
		}
		p.DoneAt(t1, nil)
	}); n != 0 {
		t.Fatalf("closed path in a fleet: %v allocs/op, want 0", n)
	}
}
