package floodgate_test

import (
	"context"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate"
	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/breaker/natskv"
	"github.com/floodgate-go/floodgate/internal/natstest"
	"github.com/nats-io/nats.go/jetstream"
)

// Two replicas of one service (two floodgate.New, two routers, same Name
// and Topic) share each partner's breaker through one natskv bucket. One
// partner fails, then fails its first probes, then recovers: fleet-wide
// (summed over both replicas) it never has more than the probe cap of
// probes in flight, it closes on both replicas, and nothing is lost or
// misdelivered.
func TestFleetOfTwoReplicasKeepsTheProbeCap(t *testing.T) {
	e := newEnv(t)
	rt := newRoute(t, e)
	bucket := natstest.Name(t, "breakers")
	t.Cleanup(func() { _ = e.js.DeleteKeyValue(context.Background(), bucket) })
	store, err := natskv.New(context.Background(), e.js, natskv.Config{Bucket: bucket, Storage: jetstream.MemoryStorage})
	if err != nil {
		t.Fatal(err)
	}
	h := newHub(4, 1) // p001 has the outage
	h.work, h.probeWork = 2*time.Millisecond, 20*time.Millisecond
	bad := h.peers["p001"]
	bad.startOutage(failedProbes)
	reps := make([]*replica, 2)
	for i, name := range []string{"r1", "r2"} {
		reps[i] = startReplica(t, e, rt, h, func(c *floodgate.Config) {
			c.Fleet = &breaker.FleetConfig{Store: store, Replica: name}
		})
	}

	var published []string
	for n := 0; n < 40 || bad.trips.Load() == 0; n++ {
		if n > 2000 {
			t.Fatal("the failing partner never tripped")
		}
		for _, k := range h.order {
			published = append(published, e.publish(t, rt.topic, k, n, false))
		}
	}
	natstest.Eventually(t, 45*time.Second, func() bool { return len(h.lost(published)) == 0 },
		"every message delivered (%d of %d missing)", natstest.Now(func() any { return len(h.lost(published)) }), len(published))
	natstest.Eventually(t, 30*time.Second, func() bool { return reps[0].settled("p001") && reps[1].settled("p001") },
		"p001 closed with no backlog on both replicas")

	if n := h.wrong.Load(); n != 0 {
		t.Errorf("%d deliveries to a partner other than the message's own", n)
	}
	for _, k := range h.order {
		if m := h.peers[k].maxProbes.Load(); m > probeCap {
			t.Errorf("partner %s: %d probes in flight fleet-wide, cap %d", k, m, probeCap)
		}
	}
	if n := bad.probesTotal.Load(); n <= failedProbes {
		t.Errorf("p001 saw %d probes, want > %d (the failed ones and the recovery)", n, failedProbes)
	}
	if bad.closes.Load() == 0 {
		t.Error("p001 never closed")
	}
	for _, k := range []string{"p000", "p002", "p003"} {
		if n := h.peers[k].trips.Load(); n != 0 {
			t.Errorf("healthy partner %s tripped %d times", k, n)
		}
	}
	t.Logf("%d messages, %d duplicates; p001: %d trips, %d probes, at most %d in flight fleet-wide (cap %d)",
		len(published), h.dups.Load(), bad.trips.Load(), bad.probesTotal.Load(), bad.maxProbes.Load(), probeCap)
	if n := len(natstest.StreamMsgs(t, e.js, rt.dead)); n != 0 {
		t.Errorf("%d dead letters, want 0", n)
	}
}
