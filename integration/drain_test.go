package integration

import (
	"context"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/internal/natstest"
)

func skipShort(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
}

// drainResult is what one outage and drain measured.
type drainResult struct {
	drainS  float64 // from recovery (the first close) to an empty backlog, seconds
	boundS  float64 // 1.25 × backlog / (capacity − live rate), seconds
	peak    int     // backlog at recovery
	retrips int
}

// runOutageAndDrain runs an outage and drain on a compressed time scale with
// the ratios: live traffic at 100 msg/s, an outage until the backlog
// holds 1,000 messages (the 30 s, scaled by 1/3, at the live rate),
// then a partner with a capacity of 200 msg/s while live traffic goes on.
// It checks the invariants: nothing is lost (duplicates are counted and
// reported), the breaker closes and the backlog empties, and the drain
// causes no re-trip. Every phase ends on an observed count, with a
// generous hang guard.
func runOutageAndDrain(t testing.TB) drainResult {
	const (
		live     = 100.0
		capacity = 200.0
		target   = 1000 // backlog built by the outage
	)
	url := natstest.URL(t)
	tp := newTopics(t)
	js := natstest.JetStream(t, natstest.Conn(t, url))
	natstest.DeleteStreams(t, js, tp.Source, tp.Retry, tp.Dead)
	p := newPartner(t)
	p.setCapacity(capacity)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	c, err := startConsumer(ctx, consumerConfig{NATSURL: url, PartnerURL: p.srv.URL, Topics: tp})
	if err != nil {
		t.Fatal(err)
	}
	defer c.stop()

	prod := newProducer(t, url, tp.Source)
	pctx, stopProducing := context.WithCancel(ctx)
	defer stopProducing()
	produced := make(chan struct{})
	go func() { defer close(produced); prod.run(pctx, live) }()

	natstest.Eventually(t, time.Minute, func() bool { return c.events.delivered.Load() >= 200 }, // healthy traffic first
		"healthy phase: %d delivered", natstest.Now(func() any { return c.events.delivered.Load() }))
	p.down.Store(true)
	outageStart := time.Now()
	natstest.Eventually(t, 3*time.Minute, func() bool { return backlog(c) >= target }, "outage: backlog %d of %d", natstest.Now(func() any { return backlog(c) }), target)
	p.down.Store(false)
	upAt := time.Now()
	t.Logf("outage %s over; backlog %d", time.Since(outageStart).Round(time.Millisecond), backlog(c))

	var recovered time.Time
	natstest.Eventually(t, time.Minute, func() bool {
		var ok bool
		recovered, ok = c.closedSince(upAt)
		return ok
	}, "breaker closed after the outage")
	peak := backlog(c)
	var drainedAt time.Time
	var peakRate float64
	natstest.Eventually(t, 3*time.Minute, func() bool {
		n := backlog(c)
		peak = max(peak, n)
		peakRate = max(peakRate, c.drainer.Rate())
		if n == 0 {
			drainedAt = time.Now()
			return true
		}
		return false
	}, "backlog drained (now %d)", natstest.Now(func() any { return backlog(c) }))
	// Live traffic goes on a little after the drain (100 more messages),
	// then stops; every message must then arrive.
	after := len(prod.published()) + 100
	natstest.Eventually(t, time.Minute, func() bool { return len(prod.published()) >= after }, "live traffic after the drain")
	stopProducing()
	<-produced
	ids := prod.published()
	natstest.Eventually(t, time.Minute, func() bool { _, _, lost := p.tally(ids); return lost == 0 && backlog(c) == 0 }, "everything delivered")

	unique, dups, lost := p.tally(ids)
	r := drainResult{drainS: drainedAt.Sub(recovered).Seconds(), boundS: 1.25 * float64(peak) / (capacity - live), peak: peak, retrips: c.tripsSince(recovered)}
	t.Logf("produced %d, delivered %d unique, duplicates %d, lost %d; backlog at recovery %d; "+
		"recovery %.2fs after the partner came back; drain_s %.2f (bound %.2f); re-trips after recovery %d; "+
		"peak drain rate %.0f/s; drainer %+v; partner errors %d",
		len(ids), unique, dups, lost, peak, round2(recovered.Sub(upAt).Seconds()), round2(r.drainS), round2(r.boundS),
		r.retrips, peakRate, c.drainer.Stats(), p.errors.Load())
	if lost != 0 || unique != len(ids) {
		t.Errorf("lost %d of %d", lost, len(ids))
	}
	if r.retrips != 0 {
		t.Errorf("%d re-trips after recovery: the drain overloaded the partner", r.retrips)
	}
	return r
}

// TestOutageAndDrain: nothing is lost through an outage and the drain
// after it, and the drain causes no re-trip. How fast the backlog drains
// against the bound (1.25 × backlog / (capacity − live rate)) is a
// measurement: BenchmarkOutageAndDrain reports it.
func TestOutageAndDrain(t *testing.T) {
	skipShort(t)
	runOutageAndDrain(t)
}

// BenchmarkOutageAndDrain reports the drain time of TestOutageAndDrain's
// scenario and its ratio to the bound (<= 1 meets it):
//
//	go test -run '^$' -bench OutageAndDrain -count 5 ./integration | benchstat -
func BenchmarkOutageAndDrain(b *testing.B) {
	var drain, ratio float64
	for range b.N {
		r := runOutageAndDrain(b)
		drain += r.drainS
		ratio += r.drainS / r.boundS
	}
	b.ReportMetric(drain/float64(b.N), "drain-s/op")
	b.ReportMetric(ratio/float64(b.N), "drain/bound")
}
