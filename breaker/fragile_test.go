package breaker_test

import (
	"sort"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/breaker/breakertest"
)

// fragileResult summarises one run of the fragile-recovery scenario.
type fragileResult struct {
	errorsAfter  int           // failed calls that reached the dependency after it recovered
	retrips      int           // transitions to open after it recovered
	fullAfter    time.Duration // from full capacity until the breaker closed for good
	admittedFrag int           // calls admitted during the fragile period
}

// runFragile drives a breaker with the scenario of the probing-strategies
// design note: 100 calls/s offered; healthy, then an outage (every call
// fails), then a fragile recovery where the dependency serves at most
// `capacity` calls per second (a sliding second) and fails the excess, then
// healthy. It runs on a fake clock in 1ms steps.
func runFragile(t *testing.T, policy breaker.HalfOpenPolicy, capacity int) fragileResult {
	t.Helper()
	const (
		outageAt   = 5 * time.Second
		recoverAt  = 20 * time.Second
		healthyAt  = 30 * time.Second
		end        = 60 * time.Second
		interval   = 10 * time.Millisecond
		okLatency  = 20 * time.Millisecond
		errLatency = 5 * time.Millisecond
	)
	clk := breakertest.NewClock(time.Time{})
	b, err := breaker.New(breaker.Config{Clock: clk, Seed: 1, HalfOpenPolicy: policy})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Stop()
	t0 := clk.Now()
	var res fragileResult
	closedAt := time.Duration(-1)
	b.AddListener(func(tr breaker.Transition) {
		at := tr.At.Sub(t0)
		if at >= recoverAt && tr.To == breaker.StateOpen {
			res.retrips++
		}
		if tr.To == breaker.StateClosed {
			closedAt = at
		} else {
			closedAt = -1
		}
	})
	type done struct {
		at  time.Duration
		p   breaker.Permit
		err error
	}
	var pending []done
	var served []time.Duration // start times of calls served in the fragile period
	for now := time.Duration(0); now < end; now += time.Millisecond {
		clk.Set(t0.Add(now))
		sort.SliceStable(pending, func(i, j int) bool { return pending[i].at < pending[j].at })
		for len(pending) > 0 && pending[0].at <= now {
			pending[0].p.DoneAt(clk.Now(), pending[0].err)
			pending = pending[1:]
		}
		if now%interval != 0 {
			continue
		}
		p, err := b.AllowAt(clk.Now())
		if err != nil {
			continue // diverted
		}
		var callErr error
		switch {
		case now >= outageAt && now < recoverAt:
			callErr = errBoom
		case now >= recoverAt && now < healthyAt:
			res.admittedFrag++
			for len(served) > 0 && served[0] <= now-time.Second {
				served = served[1:]
			}
			if len(served) >= capacity {
				callErr = errBoom
			} else {
				served = append(served, now)
			}
		}
		lat := okLatency
		if callErr != nil {
			lat = errLatency
			if now >= recoverAt {
				res.errorsAfter++
			}
		}
		pending = append(pending, done{at: now + lat, p: p, err: callErr})
	}
	if closedAt < 0 {
		t.Fatalf("%v: not closed at the end", policy)
	}
	res.fullAfter = closedAt - healthyAt
	return res
}

func TestFragileRecovery(t *testing.T) {
	results := map[breaker.HalfOpenPolicy]fragileResult{}
	for _, p := range []breaker.HalfOpenPolicy{breaker.HalfOpenSingleProbe, breaker.HalfOpenCappedProbes,
		breaker.HalfOpenRamp, breaker.HalfOpenAdaptive} {
		r := runFragile(t, p, 30)
		results[p] = r
		t.Logf("%-14v errors after recovery %3d, re-trips %d, closed %v after full capacity, admitted in fragile period %d",
			p, r.errorsAfter, r.retrips, r.fullAfter, r.admittedFrag)
	}
	ramp, adaptive := results[breaker.HalfOpenRamp], results[breaker.HalfOpenAdaptive]
	if adaptive.retrips != 0 {
		t.Errorf("adaptive re-tripped %d times", adaptive.retrips)
	}
	if 4*adaptive.errorsAfter > ramp.errorsAfter {
		t.Errorf("adaptive errors %d > 25%% of ramp's %d", adaptive.errorsAfter, ramp.errorsAfter)
	}
	if adaptive.fullAfter > 5*time.Second {
		t.Errorf("adaptive reached full traffic %v after capacity returned", adaptive.fullAfter)
	}
}
