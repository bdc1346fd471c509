package retryqueue

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// testGate is a ClosedGate whose breaker a test opens and closes.
type testGate struct{ open atomic.Bool }

func (g *testGate) Budget() int {
	if g.open.Load() {
		return 0
	}
	return 1 << 30
}

func (g *testGate) Closed() bool { return !g.open.Load() }

// The service consumer waits until every partner draining has been closed
// at every look for svcClosedFor, and has seen no failure for svcQuiet,
// and for the backoff after its last leave; it needs ServiceConsumerFrom
// partners, and gates that tell they are closed.
func TestServiceReadyWaitsForClosedAndQuiet(t *testing.T) {
	ga, gb := &testGate{}, &testGate{}
	a, b := &drainPart{d: &Drainer{cfg: DrainerConfig{Gate: ga}}}, &drainPart{d: &Drainer{cfg: DrainerConfig{Gate: gb}}}
	p := &PartnerDrainer{cfg: PartnerDrainerConfig{ServiceConsumerFrom: 2}, parts: map[string]*drainPart{"a": a, "b": b}}
	t0 := time.Now()
	ctx := context.Background()
	c, q := svcClosedFor, svcQuiet
	ms := time.Millisecond
	for _, step := range []struct {
		at   time.Duration
		do   func()
		want bool
		why  string
	}{
		{0, nil, false, "closed only now"},
		{c - ms, nil, false, "closed for less than svcClosedFor"},
		{c, nil, true, "closed for svcClosedFor"},
		{c + 100*ms, func() { gb.open.Store(true) }, false, "b open"},
		{c + 200*ms, func() { gb.open.Store(false) }, false, "b closed again only now"},
		{2*c + 200*ms, nil, true, "b closed again for svcClosedFor"},
		{3 * time.Second, func() { a.d.failures.Add(1) }, false, "a failure seen"},
		{3*time.Second + q - ms, nil, false, "a failure less than svcQuiet ago"},
		{3*time.Second + q, nil, true, "quiet for svcQuiet"},
		{6 * time.Second, func() { p.svc.notBefore = t0.Add(7 * time.Second) }, false, "backoff after a leave"},
		{7*time.Second - c, func() { gb.open.Store(true) }, false, "b trips during the backoff"},
		{7*time.Second - c/2, func() { gb.open.Store(false) }, false, "b closes again during the backoff"},
		{7 * time.Second, nil, false, "backoff over, b closed for less than svcClosedFor"},
		{7*time.Second + c/2, nil, true, "b closed for svcClosedFor"},
		{7*time.Second + c, func() { a.d.holding.Store(true) }, false, "a holds a consumer awaiting acks"},
		{7*time.Second + 2*c, func() { a.d.holding.Store(false); p.svc.notBefore = t0.Add(8 * time.Second); p.svcJoin.Store(true) }, false, "a join waits out the backoff too"},
		{8 * time.Second, func() { p.svcJoin.Store(false); delete(p.parts, "b") }, false, "fewer partners than ServiceConsumerFrom"},
		{9 * time.Second, func() {
			p.parts["c"] = &drainPart{d: &Drainer{cfg: DrainerConfig{Gate: GateFunc(func() int { return 1 << 30 })}}}
		}, false, "a gate that cannot tell it is closed"},
	} {
		if step.do != nil {
			step.do()
		}
		if got := p.serviceReady(ctx, t0.Add(step.at)); got != step.want {
			t.Errorf("at %s (%s): ready %v, want %v", step.at, step.why, got, step.want)
		}
	}
}
