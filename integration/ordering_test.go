package integration

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/deliver/as2"
	"github.com/floodgate-go/floodgate/internal/natstest"
)

// With per-key ordering, each key's messages reach the partner in the order
// they were published, through failures, an outage, the drain and live
// traffic that overtakes nothing: a live message whose key has backlog is
// diverted behind it.
func TestPerKeyOrderingThroughOutage(t *testing.T) {
	skipShort(t)
	url := natstest.URL(t)
	tp := newTopics(t)
	js := natstest.JetStream(t, natstest.Conn(t, url))
	natstest.DeleteStreams(t, js, tp.Source, tp.Retry, tp.Dead)
	p := newPartner(t)
	p.setCapacity(80)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c, err := startConsumer(ctx, consumerConfig{NATSURL: url, PartnerURL: p.srv.URL, Topics: tp, Ordered: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.stop()
	prod := newProducer(t, url, tp.Source)
	prod.keys = 5
	pctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); prod.run(pctx, 50) }()
	// Phases end on counts, not after fixed times, so a loaded machine
	// runs the same scenario, only slower: healthy (50 delivered), down
	// (50 diverted: a backlog to drain), up (150 more published).
	natstest.Eventually(t, time.Minute, func() bool { return c.events.delivered.Load() >= 50 }, "healthy phase: %d delivered",
		natstest.Now(func() any { return c.events.delivered.Load() }))
	p.down.Store(true)
	natstest.Eventually(t, time.Minute, func() bool { return c.events.diverted.Load() >= 50 }, "outage: %d diverted",
		natstest.Now(func() any { return c.events.diverted.Load() }))
	p.down.Store(false)
	upAt := len(prod.published())
	natstest.Eventually(t, time.Minute, func() bool { return len(prod.published()) >= upAt+150 }, "live traffic after the outage")
	stop()
	<-done
	ids := prod.published()
	natstest.Eventually(t, 2*time.Minute, func() bool { _, _, lost := p.tally(ids); return lost == 0 }, "all delivered")

	// Each id is "<topic>-<n>" with key k(n mod 5); first deliveries per
	// key must have increasing n.
	last := map[int]int{}
	seen := map[string]bool{}
	inversions := 0
	for _, mid := range p.deliveryOrder() {
		if seen[mid] {
			continue // a duplicate (at-least-once): only first deliveries count
		}
		seen[mid] = true
		id := strings.TrimSuffix(strings.TrimPrefix(mid, "<"), "@"+idDomain+">")
		n, err := strconv.Atoi(id[strings.LastIndexByte(id, '-')+1:])
		if err != nil {
			t.Fatalf("message id %q", mid)
		}
		if n < last[n%5] {
			inversions++
			t.Errorf("key k%d: %d delivered after %d", n%5, n, last[n%5])
		}
		last[n%5] = n
	}
	unique, dups, _ := p.tally(ids)
	t.Logf("%d messages over 5 keys, %d unique, %d duplicates, %d order inversions; diverted %d, drainer %+v",
		len(ids), unique, dups, inversions, c.events.diverted.Load(), c.drainer.Stats())
	if c.drainer.Stats().Drained == 0 {
		t.Fatal("nothing drained: the outage did not build a backlog")
	}
	_ = as2.MessageID
}
