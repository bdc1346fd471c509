package main

import (
	"math"
	"slices"
	"testing"
	"time"
)

func mustLoad(t *testing.T) ([]*fence, []track) {
	t.Helper()
	fences, tracks, err := loadData()
	if err != nil {
		t.Fatal(err)
	}
	return fences, tracks
}

// TestTestdata checks the embedded trace is what the README says: about
// 1 Hz, plausible speeds and headings, every kind of fence present.
func TestTestdata(t *testing.T) {
	fences, tracks := mustLoad(t)
	kinds := map[string]int{}
	for _, f := range fences {
		kinds[f.Kind]++
	}
	if kinds[kindDepot] != 2 || kinds[kindCustomer] < 20 || kinds[kindRestricted] != 1 {
		t.Errorf("fence kinds = %v, want 2 depots, >= 20 customers, 1 restricted zone", kinds)
	}
	if len(tracks) != 16 {
		t.Errorf("%d vehicles, want 16", len(tracks))
	}
	for _, tr := range tracks {
		gaps := 0
		for i, f := range tr.Fixes {
			if f.Speed < 0 || f.Speed > 60/3.6 || f.Heading < 0 || f.Heading >= 360 {
				t.Fatalf("%s fix %d: speed %.1f m/s, heading %.1f°, want 0..60 km/h and [0, 360)", tr.Vehicle, i, f.Speed, f.Heading)
			}
			if i == 0 {
				continue
			}
			dt := f.Time.Sub(tr.Fixes[i-1].Time)
			if dt > time.Second {
				gaps++
			}
			// Distance between fixes against the reported speeds: no jumps.
			d := distance(tr.Fixes[i-1], f)
			if limit := (60/3.6)*dt.Seconds() + 8; d > limit {
				t.Fatalf("%s fix %d: moved %.0f m in %v", tr.Vehicle, i, d, dt)
			}
		}
		if gaps > len(tr.Fixes)/50 {
			t.Errorf("%s: %d gaps in %d fixes, want about 1 Hz", tr.Vehicle, gaps, len(tr.Fixes))
		}
	}
}

// TestEvaluatorMatchesGroundTruth evaluates the noisy GPS fixes and checks
// the triggers against the generator's ground truth (when the error-free
// position was inside each fence): one enter and one exit per visit, within
// 3 s, one dwell per stay of more than -dwell, and nothing else.
func TestEvaluatorMatchesGroundTruth(t *testing.T) {
	fences, tracks := mustLoad(t)
	const tol = 3 * time.Second
	e := &evaluator{fences: fences, dwell: time.Minute, debounce: debounce}
	got := e.evaluateAll(tracks, nil)
	counts := map[string]int{}
	for _, tr := range got {
		counts[tr.Event]++
	}
	if counts[eventEnter] < 50 || counts[eventExit] < 50 || counts[eventDwell] < 20 {
		t.Errorf("trigger counts %v: too few for the example", counts)
	}
	byKey := map[string][]trigger{} // vehicle|fence|event -> triggers
	for _, tr := range got {
		k := tr.Vehicle + "|" + tr.Fence + "|" + tr.Event
		byKey[k] = append(byKey[k], tr)
	}
	take := func(vehicle, fenceID, event string, at time.Time) (trigger, bool) {
		k := vehicle + "|" + fenceID + "|" + event
		for i, tr := range byKey[k] {
			if d := tr.Time.Sub(at); d >= -tol && d <= tol {
				byKey[k] = slices.Delete(byKey[k], i, i+1)
				return tr, true
			}
		}
		return trigger{}, false
	}
	restricted := 0
	for _, tr := range tracks {
		last := tr.Fixes[len(tr.Fixes)-1].Time
		for _, v := range tr.Visits {
			if v.Enter.IsZero() { // inside at the first fix: no enter, no dwell
				if !v.Exit.IsZero() {
					if _, ok := take(tr.Vehicle, v.Fence, eventExit, v.Exit); !ok {
						t.Errorf("%s: no exit at %s near %s", tr.Vehicle, v.Fence, v.Exit.Format(time.TimeOnly))
					}
				}
				continue
			}
			if v.Fence == "restricted-centre" {
				restricted++
			}
			if _, ok := take(tr.Vehicle, v.Fence, eventEnter, v.Enter); !ok {
				t.Errorf("%s: no enter at %s near %s", tr.Vehicle, v.Fence, v.Enter.Format(time.TimeOnly))
			}
			end := v.Exit
			if end.IsZero() {
				end = last
			} else if _, ok := take(tr.Vehicle, v.Fence, eventExit, v.Exit); !ok {
				t.Errorf("%s: no exit at %s near %s", tr.Vehicle, v.Fence, v.Exit.Format(time.TimeOnly))
			}
			switch stay := end.Sub(v.Enter); {
			case stay >= e.dwell+tol:
				if _, ok := take(tr.Vehicle, v.Fence, eventDwell, v.Enter.Add(e.dwell)); !ok {
					t.Errorf("%s: no dwell at %s after %s (stay %v)", tr.Vehicle, v.Fence, v.Enter.Format(time.TimeOnly), stay)
				}
			case stay <= e.dwell-tol:
			default:
				take(tr.Vehicle, v.Fence, eventDwell, v.Enter.Add(e.dwell)) // too close to call
			}
		}
	}
	if restricted == 0 {
		t.Error("no vehicle crosses the restricted zone")
	}
	for k, rest := range byKey {
		for _, tr := range rest {
			t.Errorf("unexpected trigger %s at %s", k, tr.Time.Format(time.TimeOnly))
		}
	}
}

// TestEvaluatorIdempotent: a redelivered or out-of-order fix changes
// nothing, and evaluating the same fixes again gives the same ids.
func TestEvaluatorIdempotent(t *testing.T) {
	fences, tracks := mustLoad(t)
	e := &evaluator{fences: fences, dwell: time.Minute, debounce: debounce}
	tr := tracks[0]
	var st *vehicleState
	var ids []string
	for i, f := range tr.Fixes {
		var out []trigger
		var ok bool
		st, out, ok = e.step(st, f)
		if !ok {
			t.Fatalf("fix %d rejected", i)
		}
		for _, o := range out {
			ids = append(ids, o.ID)
		}
		if i > 0 {
			again, dup, ok := e.step(st, tr.Fixes[i-1])
			if ok || len(dup) > 0 || again != st {
				t.Fatalf("fix %d redelivered after %d: ok=%v, %d triggers", i-1, i, ok, len(dup))
			}
		}
	}
	if len(ids) == 0 {
		t.Fatal("no triggers")
	}
	again := e.evaluateAll(tracks[:1], nil)
	if len(again) != len(ids) {
		t.Fatalf("second evaluation: %d triggers, first %d", len(again), len(ids))
	}
	for _, id := range ids {
		if _, ok := again[id]; !ok {
			t.Errorf("id %s not given again", id)
		}
	}
}

func TestTriggerID(t *testing.T) {
	at := time.Date(2026, 3, 2, 7, 5, 0, 0, time.UTC)
	a := triggerID("van-01", "cust-03", eventEnter, at)
	if b := triggerID("van-01", "cust-03", eventEnter, at.In(time.FixedZone("CET", 3600))); a != b {
		t.Errorf("same instant in another zone: %s != %s", a, b)
	}
	for _, other := range []string{
		triggerID("van-02", "cust-03", eventEnter, at),
		triggerID("van-01", "cust-04", eventEnter, at),
		triggerID("van-01", "cust-03", eventExit, at),
		triggerID("van-01", "cust-03", eventEnter, at.Add(time.Second)),
	} {
		if other == a {
			t.Errorf("different trigger, same id %s", a)
		}
	}
	if len(a) != 36 || a[14] != '5' {
		t.Errorf("id %q is not a version 5 UUID", a)
	}
}

func TestParseFencesRejects(t *testing.T) {
	for name, doc := range map[string]string{
		"not a collection": `{"type":"Feature"}`,
		"no features":      `{"type":"FeatureCollection","features":[]}`,
		"unknown kind":     `{"type":"FeatureCollection","features":[{"properties":{"id":"a","kind":"lake"},"geometry":{"type":"Polygon","coordinates":[[[0,0],[1,0],[1,1],[0,0]]]}}]}`,
		"open ring":        `{"type":"FeatureCollection","features":[{"properties":{"id":"a","kind":"depot"},"geometry":{"type":"Polygon","coordinates":[[[0,0],[1,0],[1,1],[0,1]]]}}]}`,
		"point":            `{"type":"FeatureCollection","features":[{"properties":{"id":"a","kind":"depot"},"geometry":{"type":"Point","coordinates":[0,0]}}]}`,
	} {
		if _, err := parseFences([]byte(doc)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestFenceContains(t *testing.T) {
	doc := `{"type":"FeatureCollection","features":[{"properties":{"id":"z","kind":"restricted"},"geometry":{"type":"MultiPolygon","coordinates":[
		[[[0,0],[2,0],[2,2],[0,2],[0,0]],[[0.5,0.5],[1.5,0.5],[1.5,1.5],[0.5,1.5],[0.5,0.5]]],
		[[[5,5],[6,5],[6,6],[5,6],[5,5]]]]}}]}`
	fs, err := parseFences([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		lon, lat float64
		want     bool
	}{{0.25, 0.25, true}, {1, 1, false}, {5.5, 5.5, true}, {3, 3, false}, {2, 1, true}} {
		if got := fs[0].contains([2]float64{tc.lon, tc.lat}); got != tc.want {
			t.Errorf("contains(%v, %v) = %v, want %v", tc.lon, tc.lat, got, tc.want)
		}
	}
}

// distance is the equirectangular distance in metres, fine at city scale.
func distance(a, b fix) float64 {
	const r = 6371000.0
	dlat := (b.Lat - a.Lat) * math.Pi / 180
	dlon := (b.Lon - a.Lon) * math.Pi / 180 * math.Cos(a.Lat*math.Pi/180)
	return r * math.Hypot(dlat, dlon)
}
