package sim

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// TestDependencyPhases drives the dependency model with 100 calls/s and
// checks each phase: down fails everything, fragile serves its capacity
// and fails (or slows) the rest, healthy serves everything with the given
// latency distribution.
func TestDependencyPhases(t *testing.T) {
	for _, over := range []Overflow{OverflowFail, OverflowSlow} {
		sc := Scenario{Rate: 100, Duration: 40 * time.Second, RecoverAt: 20 * time.Second, Outage: 10 * time.Second,
			Fragile: 10 * time.Second, FragileCapacity: 30, Overflow: over,
			Slow: Latency{Median: 2 * time.Second, P99: 3 * time.Second}}
		sc.setDefaults()
		d := newDependency(&sc, rand.New(rand.NewPCG(1, 2)))
		type count struct{ ok, fail, slow int }
		by := map[string]*count{}
		var healthy []time.Duration
		for i := range 4000 { // every 10 ms
			now := int64(i) * int64(10*time.Millisecond)
			name := d.phases[d.phase(now)].Name
			if name == "healthy" && now >= int64(sc.RecoverAt+sc.Fragile) {
				name = "healthy-after"
			}
			ok, lat := d.serve(now)
			c := by[name]
			if c == nil {
				c = &count{}
				by[name] = c
			}
			switch {
			case !ok:
				c.fail++
			case lat > time.Second:
				c.slow++
			default:
				c.ok++
				if name == "healthy" {
					healthy = append(healthy, lat)
				}
			}
		}
		if c := by["down"]; c.ok+c.slow != 0 || c.fail != 1000 {
			t.Errorf("%v: down %+v, want 1000 failures", over, *c)
		}
		// 10 s at 30 calls/s, plus the initial burst of 3.
		c := by["fragile"]
		if c.ok < 295 || c.ok > 305 {
			t.Errorf("%v: fragile served %d normally, want about 300", over, c.ok)
		}
		if over == OverflowFail && (c.fail != 1000-c.ok || c.slow != 0) {
			t.Errorf("fail: fragile %+v", *c)
		}
		if over == OverflowSlow && (c.slow != 1000-c.ok || c.fail != 0) {
			t.Errorf("slow: fragile %+v", *c)
		}
		if c := by["healthy-after"]; c.fail+c.slow != 0 {
			t.Errorf("%v: healthy after recovery %+v", over, *c)
		}
		slices.Sort(healthy)
		med, p99 := healthy[len(healthy)/2], healthy[len(healthy)*99/100]
		if med < 18*time.Millisecond || med > 22*time.Millisecond || p99 < 80*time.Millisecond || p99 > 125*time.Millisecond {
			t.Errorf("%v: healthy latency median %v P99 %v, want about 20ms and 100ms", over, med, p99)
		}
	}
}

func TestEngineOrder(t *testing.T) {
	e := &engine{}
	var got []int
	e.at(30, func() { got = append(got, 3) })
	e.at(10, func() { got = append(got, 1) })
	tm := e.AfterFunc(20, func() { got = append(got, 99) })
	e.at(10, func() {
		got = append(got, 2)
		e.at(10, func() { got = append(got, 4) }) // same time, later: runs after
	})
	if !tm.Stop() || tm.Stop() {
		t.Error("Stop should report true once")
	}
	e.at(40, func() { got = append(got, 5) })
	e.run(40)
	if !slices.Equal(got, []int{1, 2, 4, 3}) || e.now != 40 {
		t.Errorf("order %v, now %d", got, e.now)
	}
	done := e.AfterFunc(0, func() {})
	e.run(50)
	if done.Stop() {
		t.Error("Stop after firing reported true")
	}
}
