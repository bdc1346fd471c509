package main

import (
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/deliver/as2/as2partner"
	"github.com/floodgate-go/floodgate/middleware"
)

// TestOutageEnd: the outage ends when the partner began the phase after
// it, however late, not at -healthy + -outage.
func TestOutageEnd(t *testing.T) {
	t0 := time.Date(2026, 3, 2, 7, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	changes := []as2partner.PhaseChange{{Phase: 0, At: at(0)}, {Phase: 1, At: at(1)}, {Phase: 2, At: at(9)}}
	for _, tc := range []struct {
		name    string
		o       options
		changes []as2partner.PhaseChange
		want    time.Time
		ok      bool
	}{
		{"healthy, outage: phase 2", options{healthyFor: time.Second, outage: 2 * time.Second}, changes, at(9), true},
		{"outage only: phase 1", options{outage: 2 * time.Second}, changes, at(1), true},
		{"no fault: t=0", options{}, changes, at(0), true},
		{"outage not over", options{healthyFor: time.Second, outage: 2 * time.Second}, changes[:2], time.Time{}, false},
	} {
		got, ok := outageEnd(tc.changes, tc.o)
		if !got.Equal(tc.want) || ok != tc.ok {
			t.Errorf("%s: outageEnd = %v, %v; want %v, %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
	// The script puts -outage-calls on the outage phase.
	s := script(options{healthyFor: time.Second, outage: 2 * time.Second, outageCalls: 10, fragile: time.Second, fragileCapacity: 15})
	if s[1].Name != "outage" || s[1].MinRequests != 10 || s[0].MinRequests != 0 || s[2].MinRequests != 0 {
		t.Errorf("script = %+v, want MinRequests 10 on the outage only", s)
	}
}

// TestBacklogCount: a message is in the backlog from its diversion to its
// drain or dead letter; a re-diversion is not counted twice, nor a
// diversion event that comes after the message was drained.
func TestBacklogCount(t *testing.T) {
	var b backlogCount
	div := func(id string) { b.event(middleware.Event{UUID: id, Action: middleware.Diverted}) }
	div("a")
	div("b")
	div("a") // drained, failed, diverted again
	b.settled("b")
	b.settled("c") // drained before its diversion event
	div("c")
	div("d")
	b.event(middleware.Event{UUID: "d", Action: middleware.DeadLettered})
	b.event(middleware.Event{UUID: "e", Action: middleware.Delivered})
	if got := b.highest(); got != 2 {
		t.Errorf("peak %d, want 2", got)
	}
	if len(b.in) != 1 || !b.in["a"] {
		t.Errorf("in the backlog: %v, want a", b.in)
	}
}
