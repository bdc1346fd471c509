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

// Outage and drain, on a compressed time scale with the ratios:
// live traffic at 100 msg/s, a 10 s outage (the 30 s, scaled by
// 1/3), then a partner with a capacity of 200 msg/s while live traffic goes
// on. Nothing is lost, duplicates are counted and reported, the drain
// causes no re-trip, and the backlog is drained within 1.25 × backlog /
// (capacity − live rate), measured from recovery (the breaker's first close
// after the outage) to an empty backlog.
func TestOutageAndDrain(t *testing.T) {
	skipShort(t)
	const (
		live     = 100.0
		capacity = 200.0
		outage   = 10 * time.Second
	)
	url := natstest.URL(t)
	tp := newTopics(t)
	js := natstest.JetStream(t, natstest.Conn(t, url))
	natstest.DeleteStreams(t, js, tp.Source, tp.Retry, tp.Dead)
	p := newPartner(t)
	p.setCapacity(capacity)
	ctx, cancel := context.WithTimeout(context.Background(), 80*time.Second)
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

	time.Sleep(2 * time.Second) // healthy traffic first
	p.down.Store(true)
	outageStart := time.Now()
	time.Sleep(outage)
	p.down.Store(false)
	upAt := time.Now()
	t.Logf("outage %s over; backlog %d", time.Since(outageStart).Round(time.Millisecond), backlog(c))

	var recovered time.Time
	natstest.Eventually(t, 10*time.Second, func() bool {
		var ok bool
		recovered, ok = c.closedSince(upAt)
		return ok
	}, "breaker closed after the outage")
	peak := backlog(c)
	var drainedAt time.Time
	var peakRate float64
	natstest.Eventually(t, 40*time.Second, func() bool {
		n := backlog(c)
		peak = max(peak, n)
		peakRate = max(peakRate, c.drainer.Rate())
		if n == 0 {
			drainedAt = time.Now()
			return true
		}
		return false
	}, "backlog drained (now %d)", natstest.Now(func() any { return backlog(c) }))
	// Live traffic goes on a little after the drain, then stops; every
	// message must then arrive.
	time.Sleep(time.Second)
	stopProducing()
	<-produced
	ids := prod.published()
	natstest.Eventually(t, 20*time.Second, func() bool { _, _, lost := p.tally(ids); return lost == 0 && backlog(c) == 0 }, "everything delivered")

	unique, dups, lost := p.tally(ids)
	drainS := drainedAt.Sub(recovered).Seconds()
	bound := 1.25 * float64(peak) / (capacity - live)
	retrips := c.tripsSince(recovered)
	t.Logf("produced %d, delivered %d unique, duplicates %d, lost %d; backlog at recovery %d; "+
		"recovery %.2fs after the partner came back; drain_s %.2f (bound %.2f); re-trips after recovery %d; "+
		"peak drain rate %.0f/s; drainer %+v; partner errors %d",
		len(ids), unique, dups, lost, peak, round2(recovered.Sub(upAt).Seconds()), round2(drainS), round2(bound),
		retrips, peakRate, c.drainer.Stats(), p.errors.Load())
	if lost != 0 || unique != len(ids) {
		t.Errorf("lost %d of %d", lost, len(ids))
	}
	if peak < int(live*outage.Seconds()*0.8) {
		t.Errorf("backlog peak %d: the outage did not build the expected backlog (~%v)", peak, live*outage.Seconds())
	}
	if retrips != 0 {
		t.Errorf("%d re-trips after recovery: the drain overloaded the partner", retrips)
	}
	if drainS > bound {
		t.Errorf("drain took %.2fs, want <= 1.25 × %d / (%v − %v) = %.2fs", drainS, peak, capacity, live, bound)
	}
}
