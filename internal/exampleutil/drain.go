package exampleutil

import (
	"context"
	"math"
	"sync"
	"time"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/retryqueue"
)

// Backlogs reads each partner's retry backlog from d (one stream-info
// request), keyed by partner key; ok is false when it cannot be read.
func Backlogs(ctx context.Context, d *retryqueue.PartnerDrainer) (m map[string]int, ok bool) {
	st, err := d.Status(ctx)
	if err != nil {
		return nil, false
	}
	m = map[string]int{}
	for _, s := range st {
		m[s.Key] += int(s.Backlog)
	}
	return m, true
}

// DrainTimer measures one partner's drain time: from its recovery (its
// breaker's first close after its last trip; for a partner that never
// tripped, the first backlog seen) to the first empty backlog after it. A
// re-trip or a refilled backlog restarts the measure. The zero value is
// ready to use; its methods are safe for concurrent use.
type DrainTimer struct {
	mu        sync.Mutex
	tripped   bool
	had       bool      // a backlog was seen
	recovered time.Time // zero while open (or before any backlog)
	emptyAt   time.Time // zero until the backlog emptied after recovered
}

// Transition records a transition of the partner's breaker.
func (d *DrainTimer) Transition(t breaker.Transition) {
	d.mu.Lock()
	defer d.mu.Unlock()
	switch t.To {
	case breaker.StateOpen:
		d.tripped, d.recovered, d.emptyAt = true, time.Time{}, time.Time{}
	case breaker.StateClosed:
		if d.recovered.IsZero() {
			d.recovered = t.At
		}
	}
}

// Sample records the partner's backlog at now; a negative one (unread) is
// ignored.
func (d *DrainTimer) Sample(now time.Time, backlog int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	switch {
	case backlog > 0:
		d.had, d.emptyAt = true, time.Time{}
		if !d.tripped && d.recovered.IsZero() {
			d.recovered = now
		}
	case backlog == 0 && d.had && !d.recovered.IsZero() && d.emptyAt.IsZero():
		d.emptyAt = now
		if d.recovered.After(now) {
			d.emptyAt = d.recovered
		}
	}
}

// Seconds returns the drain time in seconds, to 0.1 s: 0 when the partner
// never had a backlog, -1 when its backlog did not empty after its
// recovery (or it did not recover).
func (d *DrainTimer) Seconds() float64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	switch {
	case !d.had:
		return 0
	case d.recovered.IsZero() || d.emptyAt.IsZero():
		return -1
	}
	return math.Round(d.emptyAt.Sub(d.recovered).Seconds()*10) / 10
}
