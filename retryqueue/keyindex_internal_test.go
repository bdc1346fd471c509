package retryqueue

import (
	"math"
	"strconv"
	"testing"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/nats-io/nats.go/jetstream"
	"pgregory.net/rapid"
)

// The ordering index never reports a key with messages in the backlog as
// free (no false negatives), under random diversions, releases, rebuilds
// from the stream's contents and clears of an empty backlog; and once every
// message is released, it holds nothing. Few buckets force collisions.
func TestKeyIndexNoFalseNegatives(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		x := newKeyIndex(rapid.IntRange(1, 16).Draw(t, "buckets"))
		keys := rapid.SliceOfNDistinct(rapid.StringN(0, 4, 8), 1, 40, rapid.ID).Draw(t, "keys")
		backlog := map[string]int{} // the model: messages per key in the stream
		check := func() {
			for _, k := range keys {
				if backlog[k] > 0 && !x.held(k) {
					t.Fatalf("key %q has %d messages in the backlog but is free", k, backlog[k])
				}
			}
			distinct := 0
			for _, n := range backlog {
				if n > 0 {
					distinct++
				}
			}
			if used := x.inUse(); used > distinct || used > len(x.counts) || (distinct > 0) != (used > 0) {
				t.Fatalf("%d buckets in use for %d keys with backlog", used, distinct)
			}
		}
		t.Repeat(map[string]func(*rapid.T){
			"divert": func(t *rapid.T) {
				k := rapid.SampledFrom(keys).Draw(t, "key")
				x.add(k)
				backlog[k]++
			},
			"release": func(t *rapid.T) {
				var held []string
				for _, k := range keys {
					if backlog[k] > 0 {
						held = append(held, k)
					}
				}
				if len(held) == 0 {
					t.Skip("nothing in the backlog")
				}
				k := rapid.SampledFrom(held).Draw(t, "key")
				x.remove(k)
				backlog[k]--
			},
			"rebuild": func(t *rapid.T) {
				gen := x.generation()
				c := x.fresh()
				for k, n := range backlog {
					for range n {
						x.tally(c, k)
					}
				}
				if !x.reset(gen, c) {
					t.Fatal("reset refused without a diversion since gen")
				}
			},
			"clear if empty": func(t *rapid.T) {
				gen := x.generation()
				for _, n := range backlog {
					if n > 0 {
						t.Skip("backlog not empty")
					}
				}
				x.reset(gen, nil)
			},
			"stale reset": func(t *rapid.T) {
				gen := x.generation()
				k := rapid.SampledFrom(keys).Draw(t, "key")
				x.add(k) // a diversion slips in during a rebuild
				backlog[k]++
				if x.reset(gen, x.fresh()) {
					t.Fatal("reset accepted after a diversion since gen")
				}
			},
			"": func(*rapid.T) { check() },
		})
		for k, n := range backlog {
			for range n {
				x.remove(k)
			}
			backlog[k] = 0
		}
		for _, k := range keys {
			if x.held(k) {
				t.Fatalf("key %q held with an empty backlog", k)
			}
		}
		if x.inUse() != 0 {
			t.Fatalf("%d buckets in use with an empty backlog", x.inUse())
		}
	})
}

// A counter at its maximum sticks there instead of wrapping: more messages
// than it counts can only keep the key held, never free it early.
func TestKeyIndexSaturates(t *testing.T) {
	x := newKeyIndex(1)
	x.counts[0] = math.MaxUint32 - 1
	x.used = 1
	x.add("a")
	x.add("a")
	if x.counts[0] != math.MaxUint32 {
		t.Fatalf("counter %d, want stuck at the maximum", x.counts[0])
	}
	for range 3 {
		x.remove("a")
	}
	if !x.held("a") || x.inUse() != 1 {
		t.Fatal("a saturated counter was decremented")
	}
	x.reset(x.generation(), nil)
	if x.held("a") || x.inUse() != 0 {
		t.Fatal("clear left the saturated counter")
	}
}

// The ordering index's memory is fixed: a million distinct keys diverted
// (the worst case, one key per message) leave its table at its configured
// size, and counting and looking up a key allocate nothing.
func TestOrderingIndexMemoryFixed(t *testing.T) {
	q, err := New(Config{Publisher: nopPub{}, JetStream: nopJS{}, Service: "svc", OrderingKey: func(m *message.Message) string { return m.Metadata.Get("key") }})
	if err != nil {
		t.Fatal(err)
	}
	if got := len(q.keys.counts); got != DefaultOrderingBuckets {
		t.Fatalf("table of %d buckets, want DefaultOrderingBuckets", got)
	}
	const n = 1_000_000
	keys := make([]string, n)
	for i := range keys {
		keys[i] = "order-" + strconv.Itoa(i)
	}
	live := message.NewMessage("live", nil)
	live.Metadata.Set("key", "")
	for _, k := range keys {
		q.hold(k)
		live.Metadata["key"] = k
		if !q.Holds(live) {
			t.Fatalf("%s diverted but not held", k)
		}
	}
	// A map of the keys would allocate per key; counting and looking up
	// allocate nothing. AllocsPerRun averages over the runs in whole
	// allocations, so a stray allocation elsewhere in the process does
	// not count.
	i := 0
	if a := testing.AllocsPerRun(1000, func() {
		k := keys[i%n]
		i++
		q.hold(k)
		live.Metadata["key"] = k
		_ = q.Holds(live)
		q.Release(k)
	}); a != 0 {
		t.Errorf("%v allocations per key counted, want 0", a)
	}
	if got := len(q.keys.counts); got != DefaultOrderingBuckets {
		t.Fatalf("table of %d buckets after %d keys, want %d", got, n, DefaultOrderingBuckets)
	}
	if used := q.HeldKeys(); used > DefaultOrderingBuckets || used < DefaultOrderingBuckets/2 {
		t.Fatalf("HeldKeys = %d after %d keys in %d buckets", used, n, DefaultOrderingBuckets)
	}
	for _, k := range keys {
		q.Release(k)
	}
	if used := q.HeldKeys(); used != 0 {
		t.Fatalf("HeldKeys = %d after every key was released, want 0", used)
	}
}

// nopPub and nopJS satisfy Config for a queue that never publishes.
type nopPub struct{ message.Publisher }
type nopJS struct{ jetstream.JetStream }

// BenchmarkOrderingIndex measures Holds on a live message whose key has no
// backlog, with keys distinct keys in the backlog and the default
// OrderingBuckets, and reports how often it is held anyway (false-pos-%,
// the collision rate; about 1-e^(-keys/buckets)).
func BenchmarkOrderingIndex(b *testing.B) {
	for _, keys := range []int{100, 1_000, 10_000, 100_000, 1_000_000} {
		b.Run("keys="+strconv.Itoa(keys), func(b *testing.B) {
			q, err := New(Config{Publisher: nopPub{}, JetStream: nopJS{}, Service: "svc", OrderingKey: func(m *message.Message) string { return m.Metadata.Get("key") }})
			if err != nil {
				b.Fatal(err)
			}
			for i := range keys {
				q.hold("backlog-" + strconv.Itoa(i))
			}
			const probes = 1 << 16
			live := make([]*message.Message, probes)
			for i := range live {
				live[i] = message.NewMessage("", nil)
				live[i].Metadata.Set("key", "live-"+strconv.Itoa(i))
			}
			held := 0
			for _, m := range live {
				if q.Holds(m) {
					held++
				}
			}
			i := 0
			for b.Loop() {
				q.Holds(live[i%probes])
				i++
			}
			b.ReportMetric(100*float64(held)/probes, "false-pos-%")
			b.ReportMetric(float64(q.HeldKeys()), "held-keys")
		})
	}
}
