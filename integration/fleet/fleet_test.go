package fleet

import (
	"fmt"
	"iter"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/internal/natstest"
	"github.com/floodgate-go/floodgate/retryqueue"
)

// fleetSettings are each replica's breaker settings in a fleet of three:
// the window is sized for a third of the load. singleSettings are the same
// for one replica carrying the whole load.
var (
	fleetSettings = breakerSettings{
		WindowSize: 6, MinimumCalls: 3, BaseOpenWindow: 300 * time.Millisecond, MaxOpenWindow: 1200 * time.Millisecond,
		ProbeConcurrency: 2, SuccessesToClose: 3, MaxProbeWait: 2 * time.Second,
	}
	singleSettings = func() breakerSettings { s := fleetSettings; s.WindowSize, s.MinimumCalls = 18, 9; return s }()
)

const leaseTTL = 2 * time.Second

type outageResult struct {
	maxProbes     int64 // most probes in flight at the partner at once
	probes        int64 // probes that reached the partner
	errsAfter     int64 // partner errors after it recovered
	closeSpread   time.Duration
	delivered     int
	recoveryTime  time.Duration // from recovery until every replica closed for good
	stateSurvived bool
	phases        phases
}

// runOutage runs n replicas (12 live messages in flight and a drain rate
// of 60/s in total, split evenly; shared: through one breaker in KV)
// through a partner outage: healthy, down, fragile (503 beyond 4 requests
// in flight) for 1.5 s, healthy. With killNode, NATS node 2 is killed
// during the outage and restarted during the drain. It checks that nothing
// is lost while the backlog drains and at the end.
func runOutage(t *testing.T, n int, shared, killNode bool) outageResult {
	e := newEnv(t)
	p := newPartner(t)
	const total = 450
	var reps []*replica
	for i := range n {
		rc := replicaConfig{Partner: p.srv.URL, Replica: fmt.Sprintf("r%d", i), Workers: 12 / n, DrainRate: 60 / float64(n),
			Shared: shared, Breaker: fleetSettings, LeaseTTL: leaseTTL}
		if n == 1 {
			rc.Breaker = singleSettings
		}
		reps = append(reps, e.startReplica(rc))
	}
	published := e.publish(total, 120)
	eventually(t, 10*time.Second, func() bool { return p.unique() >= 60 }, "healthy phase: %d delivered", natstest.Now(func() any { return p.unique() }))

	var res outageResult
	p.fail()
	if shared {
		eventually(t, 5*time.Second, func() bool {
			st, err := e.shared()
			return err == nil && st.State == breaker.StateOpen
		}, "shared state never open")
	}
	if killNode {
		before, err := e.shared()
		if err != nil {
			t.Fatal(err)
		}
		theCluster.kill(2)
		t.Logf("killed NATS node n2 with the shared state at %v", before)
		eventually(t, 10*time.Second, func() bool {
			st, err := e.shared()
			return err == nil && st.Epoch >= before.Epoch && st.Trips >= 1
		}, "shared state lost after the node was killed")
		res.stateSurvived = true
	}
	// Stay down through a few open windows and half-open probes.
	eventually(t, 15*time.Second, func() bool { return p.probesDownSeen.Load() >= 6 }, "too few probes during the outage")
	p.recover(4)
	recoveredAt := time.Now()
	if killNode {
		time.Sleep(500 * time.Millisecond)
		if err := theCluster.restart(2); err != nil {
			t.Fatal(err)
		}
		t.Log("restarted NATS node n2 during the drain")
	}
	time.Sleep(1500 * time.Millisecond)
	p.recover(0)
	// Nothing lost while the backlog drains (checked here, after the
	// fragile phase, so the check's time changes no count).
	delivered, dead, queued := e.account(p)
	t.Logf("while draining: %d delivered, %d dead-lettered, %d queued, 0 lost", delivered, dead, queued)
	if queued == 0 {
		t.Error("nothing queued when the partner recovered: the retry queue took nothing")
	}
	<-published
	eventually(t, 60*time.Second, func() bool { return p.unique() == total }, "delivered %d of %d", natstest.Now(func() any { return p.unique() }), total)
	defer e.trickle()()
	eventually(t, 10*time.Second, func() bool {
		for _, r := range reps {
			if st, _ := r.status(); st != breaker.StateClosed {
				return false
			}
		}
		return true
	}, "not every replica closed")
	var first, last time.Time
	for _, r := range reps {
		c := r.lastClosed()
		if first.IsZero() || c.Before(first) {
			first = c
		}
		if c.After(last) {
			last = c
		}
	}
	res.maxProbes, res.probes, res.errsAfter = p.maxProbes.Load(), p.probesTotal.Load(), p.errsAfter.Load()
	res.closeSpread, res.delivered, res.recoveryTime = last.Sub(first), p.unique(), last.Sub(recoveredAt)
	res.phases = analyse(p, reps)
	checkAccounted(t, e, p, slices.Values(reps))
	t.Logf("%d replicas: %v", n, res.phases)
	return res
}

// TestPartnerOutage: three replicas share one breaker through KV (R3 on a
// 3-node cluster) through a partner outage, against one replica carrying
// the same load alone; two pairs of runs.
func TestPartnerOutage(t *testing.T) {
	const pairs = 2
	var fleetErrs, singleErrs int64
	for i := range pairs {
		var fleet, single outageResult
		t.Run(fmt.Sprintf("fleet-%d", i+1), func(t *testing.T) { fleet = runOutage(t, 3, true, false) })
		t.Run(fmt.Sprintf("single-%d", i+1), func(t *testing.T) { single = runOutage(t, 1, false, false) })
		if t.Failed() {
			return
		}
		t.Logf("fleet of 3:  max probes in flight %d, probes %d, errors after recovery %d, close spread %v, all closed %v after recovery",
			fleet.maxProbes, fleet.probes, fleet.errsAfter, fleet.closeSpread, fleet.recoveryTime)
		t.Logf("one replica: max probes in flight %d, probes %d, errors after recovery %d, all closed %v after recovery",
			single.maxProbes, single.probes, single.errsAfter, single.recoveryTime)
		checkFleet(t, fleet)
		fleetErrs += fleet.errsAfter
		singleErrs += single.errsAfter
	}
	// Per trip the fleet costs what one breaker costs: the calls started
	// within one partner latency before the trip fail wherever they were
	// admitted, and a trip or close reaches the other replicas through the
	// KV watch within milliseconds (see the per-phase lines above, and
	// docs/fleet.md, "Errors after recovery"). One run's count varies with
	// the number of re-trips that fit in the fragile phase (a trip late in
	// it costs 5 errors, a full one 12-19) and with which replica the
	// partner's capacity serves first: over 36 paired runs the fleet made
	// 20-38 errors, one replica 25-47 (sd about 4-5 each), the fleet more
	// than one replica in 4 of them. A strict per-run "<=" is therefore
	// likely, not a property. The test sums two pairs, which halves the
	// spread of the difference's mean, and allows a quarter plus 5 above
	// one replica's sum.
	t.Logf("over %d pairs: fleet %d errors after recovery, one replica %d", pairs, fleetErrs, singleErrs)
	if limit := singleErrs*5/4 + 5; fleetErrs > limit {
		t.Errorf("fleet errors after recovery %d > 1.25 × one replica's %d + 5, over %d pairs", fleetErrs, singleErrs, pairs)
	}
}

func checkFleet(t *testing.T, fleet outageResult) {
	t.Helper()
	if fleet.maxProbes > int64(fleetSettings.ProbeConcurrency) {
		t.Errorf("fleet: %d probes in flight at once, want <= ProbeConcurrency %d", fleet.maxProbes, fleetSettings.ProbeConcurrency)
	}
	if fleet.maxProbes < 1 {
		t.Errorf("fleet: no probe seen")
	}
	// A close reaches the others through the watch (milliseconds), at the
	// latest at the resync (ResyncInterval 250ms).
	if fleet.closeSpread > 250*time.Millisecond {
		t.Errorf("fleet: replicas closed %v apart, want <= 250ms", fleet.closeSpread)
	}
}

// TestNATSNodeKilled: one NATS node of three is killed during the outage and
// restarted during the drain: nothing is lost (runOutage waits for every
// message), the shared state survives, the probe bound holds.
func TestNATSNodeKilled(t *testing.T) {
	res := runOutage(t, 3, true, true)
	t.Logf("fleet of 3 with a node killed: max probes in flight %d, probes %d, errors after recovery %d, close spread %v, all closed %v after recovery, delivered %d",
		res.maxProbes, res.probes, res.errsAfter, res.closeSpread, res.recoveryTime, res.delivered)
	checkFleet(t, res)
	if !res.stateSurvived {
		t.Error("shared state not checked across the node kill")
	}
}

// TestReplicaKilledHoldingProbe: the replica whose probe the partner holds
// is killed with SIGKILL; its lease expires within its TTL and the fleet
// recovers without it.
func TestReplicaKilledHoldingProbe(t *testing.T) {
	e := newEnv(t)
	p := newPartner(t)
	const total = 200
	reps := map[string]*replica{}
	for i := range 3 {
		name := fmt.Sprintf("r%d", i)
		reps[name] = e.startReplica(replicaConfig{Partner: p.srv.URL, Replica: name, Workers: 4, Shared: true, Breaker: fleetSettings, LeaseTTL: leaseTTL})
	}
	published := e.publish(total, 150)
	eventually(t, 10*time.Second, func() bool { return p.unique() >= 20 }, "healthy phase")
	p.hangProbe.Store(true)
	p.fail()
	var victim string
	select {
	case victim = <-p.hung:
	case <-time.After(15 * time.Second):
		t.Fatal("no probe reached the partner")
	}
	held := func() bool {
		ls, err := e.kv.Leases(t.Context(), breakerName)
		if err != nil {
			return true
		}
		for _, l := range ls {
			if l.Holder == victim {
				return true
			}
		}
		return false
	}
	if !held() {
		t.Fatalf("replica %s holds a probe but no lease", victim)
	}
	reps[victim].sigkill()
	killed := time.Now()
	eventually(t, leaseTTL+3*time.Second, func() bool { return !held() }, "lease of killed replica %s not freed", victim)
	freed := time.Since(killed)
	t.Logf("replica %s killed holding a probe slot; slot free %v later (TTL %v)", victim, freed, leaseTTL)
	if freed > leaseTTL+1500*time.Millisecond {
		t.Errorf("slot freed after %v, want within TTL %v (+1.5s expiry tick)", freed, leaseTTL)
	}
	p.recover(0)
	<-published
	eventually(t, 40*time.Second, func() bool { return p.unique() == total }, "delivered %d of %d", natstest.Now(func() any { return p.unique() }), total)
	defer e.trickle()()
	for name, r := range reps {
		if name == victim {
			continue
		}
		eventually(t, 10*time.Second, func() bool { st, _ := r.status(); return st == breaker.StateClosed }, "replica %s not closed", name)
	}
	if st, err := e.shared(); err != nil || st.State != breaker.StateClosed {
		t.Fatalf("shared state %v, %v; want closed", st, err)
	}
	if m := p.maxProbes.Load(); m > int64(fleetSettings.ProbeConcurrency) {
		t.Errorf("%d probes in flight at once, want <= %d", m, fleetSettings.ProbeConcurrency)
	}
	checkAccounted(t, e, p, maps.Values(reps))
}

// checkAccounted checks that nothing was lost and that every probe was
// marked for the partner's count, and logs the tally.
func checkAccounted(t *testing.T, e *env, p *partner, reps iter.Seq[*replica]) {
	t.Helper()
	delivered, dead, queued := e.account(p)
	t.Logf("messages: %d delivered, %d dead-lettered, %d still queued, 0 lost; max probes in flight %d", delivered, dead, queued, p.maxProbes.Load())
	for r := range reps {
		if u := r.unmarkedProbes(); u > 0 {
			t.Errorf("replica %s: %d probes not marked X-Probe: the partner's probe count is not trustworthy", r.name, u)
		}
	}
}

// TestKVCutOff: one replica's KV connection is closed; it keeps delivering
// under its local breaker through an outage and rejoins the fleet.
func TestKVCutOff(t *testing.T) {
	e := newEnv(t)
	p := newPartner(t)
	const total = 300
	var reps []*replica
	for i := range 3 {
		reps = append(reps, e.startReplica(replicaConfig{Partner: p.srv.URL, Replica: fmt.Sprintf("r%d", i), Workers: 4, Shared: true, Breaker: fleetSettings, LeaseTTL: leaseTTL}))
	}
	c := reps[2]
	published := e.publish(total, 120)
	eventually(t, 10*time.Second, func() bool { return p.unique() >= 30 }, "healthy phase")
	c.send("cutkv")
	eventually(t, 5*time.Second, func() bool { _, conn := c.status(); return !conn }, "cut replica still connected")
	opensBefore := c.opened()
	p.fail()
	eventually(t, 10*time.Second, func() bool { return c.opened() > opensBefore }, "cut replica never tripped on local evidence")
	time.Sleep(time.Second)
	p.recover(0)
	base := p.acceptedFrom(c.name)
	eventually(t, 15*time.Second, func() bool { return p.acceptedFrom(c.name) > base+5 }, "cut replica not delivering under its local breaker")
	if _, conn := c.status(); conn {
		t.Fatal("cut replica reconnected by itself")
	}
	c.send("rejoin")
	eventually(t, 5*time.Second, func() bool { _, conn := c.status(); return conn }, "replica did not rejoin")
	<-published
	eventually(t, 40*time.Second, func() bool { return p.unique() == total }, "delivered %d of %d", natstest.Now(func() any { return p.unique() }), total)
	defer e.trickle()()
	for i, r := range reps {
		eventually(t, 10*time.Second, func() bool { st, _ := r.status(); return st == breaker.StateClosed }, "replica %d not closed", i)
	}
	if st, err := e.shared(); err != nil || st.State != breaker.StateClosed {
		t.Fatalf("shared state %v, %v; want closed", st, err)
	}
	checkAccounted(t, e, p, slices.Values(reps))
}

// TestRetryStreamsReplicas3 checks the production settings of docs/fleet.md
// on the cluster: the retry and dead-letter streams created with 3
// replicas, which retryqueue.Provision then leaves as they are.
func TestRetryStreamsReplicas3(t *testing.T) {
	e := newEnv(t)
	cfg := retryqueue.Config{RetryTopic: e.topic + "_retry", DeadLetterTopic: e.topic + "_dead"}
	ctx := t.Context()
	for _, sc := range []jetstream.StreamConfig{
		retryqueue.RetryStreamConfig(cfg.RetryTopic),
		retryqueue.DeadLetterStreamConfig(cfg.DeadLetterTopic),
	} {
		sc.Replicas = 3
		if _, err := e.js.CreateOrUpdateStream(ctx, sc); err != nil {
			t.Fatal(err)
		}
	}
	if err := retryqueue.Provision(ctx, e.js, cfg); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{cfg.RetryTopic, cfg.DeadLetterTopic} {
		s, err := e.js.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		info, err := s.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.Config.Replicas != 3 || info.Cluster == nil || len(info.Cluster.Replicas) != 2 {
			t.Fatalf("stream %s: replicas %d, cluster %+v; want 3 (a leader and 2 peers)", name, info.Config.Replicas, info.Cluster)
		}
	}
}
