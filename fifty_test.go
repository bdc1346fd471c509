package floodgate_test

import (
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/internal/natstest"
)

const (
	fiftyPartners = 50
	failedProbes  = 3 // probes each outage partner fails before it recovers
	window        = 4 // rounds in flight ahead of the healthy partners' deliveries
)

var fiftyOutages = []int{3, 14, 25, 36, 47} // partners given an outage, in order

// runFifty publishes rounds of one message per partner, at most window
// rounds ahead of the healthy partners' deliveries, and starts outage i
// at round 2+4i: staggered by observed counts, not sleeps. It publishes
// at least minRounds rounds, and until every outage partner has tripped
// (when outages is true). A message is timed (its latency recorded when
// h is timing) when outages is false, or while an outage is under way. It
// returns the published UUIDs.
func runFifty(t testing.TB, e *env, rt route, h *hub, minRounds int, outages bool, pace func()) []string {
	t.Helper()
	healthyPer := int64(0) // deliveries per round to partners never given an outage
	for _, p := range h.peers {
		if !p.outage {
			healthyPer++
		}
	}
	var published []string
	for r := 0; ; r++ {
		if r > 5000 {
			t.Fatalf("an outage partner never tripped after %d rounds", r)
		}
		if r >= minRounds && (!outages || allTripped(h)) {
			return published
		}
		if outages {
			for i, o := range fiftyOutages {
				if r == 2+4*i {
					h.peers[h.order[o]].startOutage(failedProbes)
				}
			}
		}
		want := int64(r-window) * healthyPer
		natstest.Eventually(t, 30*time.Second, func() bool { return h.healthy.Load() >= want },
			"healthy partners keep up: round %d waits for %d deliveries (have %d)", r, want, natstest.Now(func() any { return h.healthy.Load() }))
		for _, k := range h.order {
			if pace != nil {
				pace()
			}
			published = append(published, e.publish(t, rt.topic, k, r, !outages || h.inOutage()))
		}
	}
}

func allTripped(h *hub) bool {
	for _, o := range fiftyOutages {
		if h.peers[h.order[o]].trips.Load() == 0 {
			return false
		}
	}
	return true
}

// 50 partners behind one floodgate.New; 5 of them have staggered outages
// with fragile recoveries (every call fails until the breaker trips, then
// the first probes fail, then it recovers). Every message reaches its own
// partner (0 lost, 0 misdelivered), no partner ever has more than the probe
// cap of probes in flight, every outage partner trips and closes again,
// and no healthy partner trips.
func TestFiftyPartners(t *testing.T) {
	e := newEnv(t)
	rt := newRoute(t, e)
	h := newHub(fiftyPartners, fiftyOutages...)
	h.work, h.probeWork = time.Millisecond, 5*time.Millisecond
	rep := startReplica(t, e, rt, h, nil)

	published := runFifty(t, e, rt, h, 24, true, nil)

	natstest.Eventually(t, 45*time.Second, func() bool { return len(h.lost(published)) == 0 },
		"every message delivered (%d of %d missing)", natstest.Now(func() any { return len(h.lost(published)) }), len(published))
	natstest.Eventually(t, 30*time.Second, func() bool {
		for _, o := range fiftyOutages {
			if !rep.settled(h.order[o]) {
				return false
			}
		}
		return true
	}, "every outage partner closed with no backlog")

	if n := h.wrong.Load(); n != 0 {
		t.Errorf("%d deliveries to a partner other than the message's own", n)
	}
	t.Logf("%d messages to %d partners, %d duplicate deliveries (at-least-once)", len(published), fiftyPartners, h.dups.Load())
	maxSeen := int64(0)
	for _, k := range h.order {
		p := h.peers[k]
		maxSeen = max(maxSeen, p.maxProbes.Load())
		if m := p.maxProbes.Load(); m > probeCap {
			t.Errorf("partner %s: %d probes in flight at once, cap %d", k, m, probeCap)
		}
		if !p.outage {
			if n := p.trips.Load(); n != 0 {
				t.Errorf("healthy partner %s tripped %d times", k, n)
			}
			continue
		}
		// Tripped by the outage, reopened by a failed probe at least once,
		// probed past the failed probes, and closed.
		if n := p.trips.Load(); n < 2 {
			t.Errorf("outage partner %s tripped %d times, want >= 2 (the outage and a failed probe)", k, n)
		}
		if n := p.probesTotal.Load(); n <= failedProbes {
			t.Errorf("outage partner %s saw %d probes, want > %d", k, n, failedProbes)
		}
		if p.closes.Load() == 0 {
			t.Errorf("outage partner %s never closed", k)
		}
		t.Logf("outage partner %s: %d trips, %d probes (max %d in flight), %d closes", k, p.trips.Load(), p.probesTotal.Load(), p.maxProbes.Load(), p.closes.Load())
	}
	t.Logf("most probes in flight for one partner: %d (cap %d)", maxSeen, probeCap)
	if n := len(natstest.StreamMsgs(t, e.js, rt.dead)); n != 0 {
		t.Errorf("%d dead letters, want 0", n)
	}
}
