package main

import (
	"maps"
	"time"

	"github.com/google/uuid"
	"github.com/paulmach/orb"
)

// Trigger events.
const (
	eventEnter = "enter"
	eventExit  = "exit"
	eventDwell = "dwell"
)

// triggerNamespace is the UUID namespace (RFC 9562 §5.5) of trigger ids.
var triggerNamespace = uuid.MustParse("6f3a1c52-8d0e-4b7a-9c61-2f4e8a9b0d17")

// triggerID is the idempotency key of the trigger of event at fence by
// vehicle at t: a name-based UUID (version 5) of the four, so the same
// trigger gets the same key however often it is evaluated, published or
// delivered, and the consumer can recognise a redelivery.
func triggerID(vehicle, fenceID, event string, t time.Time) string {
	return uuid.NewSHA1(triggerNamespace, []byte(vehicle+"|"+fenceID+"|"+event+"|"+t.UTC().Format(time.RFC3339Nano))).String()
}

// trigger is the webhook payload of one geofence event.
type trigger struct {
	ID        string    `json:"id"` // idempotency key, see triggerID
	Vehicle   string    `json:"vehicle"`
	Fence     string    `json:"fence"`
	FenceKind string    `json:"fence_kind"`
	FenceName string    `json:"fence_name"`
	Event     string    `json:"event"`
	Time      time.Time `json:"time"` // when it happened, in trace time
	Lon       float64   `json:"lon"`
	Lat       float64   `json:"lat"`
	DwellS    float64   `json:"dwell_s,omitempty"` // dwell: time inside so far; exit: time inside
}

// evaluator turns a vehicle's fixes into enter, exit and dwell triggers.
//
//   - The first fix of a vehicle sets its state: no trigger for a stay
//     already in progress (a van parked in its depot at the start).
//   - A change of side (outside to inside, or back) is confirmed after
//     debounce consecutive fixes on the new side, so GPS error near a
//     boundary does not make a vehicle flicker in and out; the trigger
//     carries the time and position of the first of them.
//   - dwell fires once per stay, at the first fix dwell after the enter.
//
// It is a pure function of the fixes: evaluating the same fixes again gives
// the same triggers with the same ids.
type evaluator struct {
	fences   []*fence
	dwell    time.Duration
	debounce int
}

// fenceState is a vehicle's state at one fence; the zero value is
// outside, nothing pending.
type fenceState struct {
	Inside   bool
	Since    time.Time // when the stay began (confirmed inside)
	Dwelled  bool      // dwell fired for this stay
	Pending  int       // consecutive fixes on the other side
	FirstOff fix       // the first of them
}

// vehicleState is what the evaluator remembers of one vehicle. Treat it as
// immutable: step returns a new one.
type vehicleState struct {
	Last   time.Time
	Fences map[string]fenceState // only fences inside or pending
}

// step evaluates f against st (nil for a vehicle not seen yet) and returns
// the new state and the triggers. A fix not later than the last one (a
// redelivery, or out of order) changes nothing: ok is false.
func (e *evaluator) step(st *vehicleState, f fix) (next *vehicleState, out []trigger, ok bool) {
	if st != nil && !f.Time.After(st.Last) {
		return st, nil, false
	}
	pt := orb.Point{f.Lon, f.Lat}
	next = &vehicleState{Last: f.Time, Fences: map[string]fenceState{}}
	if st == nil {
		for _, fc := range e.fences {
			if fc.contains(pt) {
				next.Fences[fc.ID] = fenceState{Inside: true, Since: f.Time, Dwelled: true}
			}
		}
		return next, nil, true
	}
	next.Fences = maps.Clone(st.Fences)
	for _, fc := range e.fences {
		in := fc.contains(pt)
		s := next.Fences[fc.ID]
		if in == s.Inside {
			s.Pending = 0
		} else {
			s.Pending++
			if s.Pending == 1 {
				s.FirstOff = f
			}
			if s.Pending >= e.debounce {
				at := s.FirstOff
				if in {
					out = append(out, e.trigger(fc, eventEnter, at, 0))
					s = fenceState{Inside: true, Since: at.Time}
				} else {
					out = append(out, e.trigger(fc, eventExit, at, at.Time.Sub(s.Since).Seconds()))
					s = fenceState{}
				}
			}
		}
		if s.Inside && !s.Dwelled && f.Time.Sub(s.Since) >= e.dwell {
			out = append(out, e.trigger(fc, eventDwell, f, f.Time.Sub(s.Since).Seconds()))
			s.Dwelled = true
		}
		if s == (fenceState{}) {
			delete(next.Fences, fc.ID)
		} else {
			next.Fences[fc.ID] = s
		}
	}
	return next, out, true
}

func (e *evaluator) trigger(fc *fence, event string, at fix, dwellS float64) trigger {
	return trigger{
		ID:      triggerID(at.Vehicle, fc.ID, event, at.Time),
		Vehicle: at.Vehicle, Fence: fc.ID, FenceKind: fc.Kind, FenceName: fc.Name,
		Event: event, Time: at.Time, Lon: at.Lon, Lat: at.Lat, DwellS: dwellS,
	}
}

// evaluateAll runs the evaluator over each track's first n[vehicle] fixes
// (all of them when n is nil) and returns the triggers by id.
func (e *evaluator) evaluateAll(tracks []track, n map[string]int) map[string]trigger {
	out := map[string]trigger{}
	for _, t := range tracks {
		fixes := t.Fixes
		if n != nil {
			fixes = fixes[:min(n[t.Vehicle], len(fixes))]
		}
		var st *vehicleState
		for _, f := range fixes {
			var trs []trigger
			st, trs, _ = e.step(st, f)
			for _, tr := range trs {
				out[tr.ID] = tr
			}
		}
	}
	return out
}
