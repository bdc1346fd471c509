package retryqueue

import (
	"strconv"
	"testing"
	"time"
)

// Holds and pending entries of keys that never come back (unique keys,
// purged messages) are swept once they lapse, so they do not pile up with
// a large backlog; entries not yet lapsed stay.
func TestKeyOrderSweepsLapsedEntries(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	o := keyOrder{holds: map[string]hold{}, pending: map[string]map[uint64]time.Time{}}
	const n = 10_000
	for i := range n {
		k := "order-" + strconv.Itoa(i)
		o.holds[k] = hold{uuid: k, expires: t0.Add(time.Minute)}
		o.addPending(k, uint64(i), t0.Add(time.Minute))
	}
	o.holds["live"] = hold{uuid: "live", expires: t0.Add(time.Hour)}
	o.addPending("live", 1, t0.Add(time.Hour))

	o.caughtUp(t0.Add(30 * time.Second)) // nothing lapsed yet
	if len(o.holds) != n+1 || len(o.pending) != n+1 {
		t.Fatalf("%d holds, %d pending keys before any lapsed, want %d each", len(o.holds), len(o.pending), n+1)
	}
	for i := range 2 * n { // they double since the sweep, and lapse
		k := "late-" + strconv.Itoa(i)
		o.holds[k] = hold{uuid: k, expires: t0.Add(time.Minute)}
		o.addPending(k, uint64(i), t0.Add(time.Minute))
	}
	o.caughtUp(t0.Add(2 * time.Minute))
	if len(o.holds) != 1 || len(o.pending) != 1 || o.holds["live"].uuid != "live" || len(o.pending["live"]) != 1 {
		t.Fatalf("after the sweep: holds %v, pending %v; want only key live", len(o.holds), len(o.pending))
	}
}
