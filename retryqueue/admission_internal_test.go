package retryqueue

import (
	"testing"
	"time"
)

// A FIFO round fetches four budgets ahead until a call returned, then as
// many budgets as the gate starts within half of admitWait at the calls'
// latency, from one budget to sixteen: a fast partner's drain fetches
// large batches, a slow one's messages do not wait fetched until they are
// handed back.
func TestFetchBoundFollowsCallLatency(t *testing.T) {
	d := &Drainer{
		cfg:   DrainerConfig{Queue: &Queue{}, AckWait: 30 * time.Second, HandlerTimeout: 15 * time.Second},
		slots: make(chan struct{}, 256),
	}
	// admitWait is 7.5s: a message may wait 3.75s fetched before its call.
	for _, tc := range []struct {
		name          string
		pace          time.Duration // 0: no call returned yet
		budget, ahead int
		want          int
	}{
		{"no call yet", 0, 16, 0, 64},
		{"no call yet, some ahead", 0, 16, 40, 24},
		{"fast partner", 10 * time.Microsecond, 16, 0, 256},
		{"fast partner, some ahead", 10 * time.Microsecond, 16, 100, 156},
		{"budget above MaxInFlight", 10 * time.Microsecond, 1000, 0, 16 * 256},
		{"1s calls: 3 budgets start in 3.75s", time.Second, 16, 0, 48},
		{"10s calls: one budget", 10 * time.Second, 16, 0, 16},
	} {
		d.pace.Store(int64(tc.pace))
		if got := d.fetchBound(tc.budget, tc.ahead); got != tc.want {
			t.Errorf("%s: fetchBound(%d, %d) = %d, want %d", tc.name, tc.budget, tc.ahead, got, tc.want)
		}
	}
}

// The pace is the first call's latency, then a moving average weighing
// each new call 1/8.
func TestNotePace(t *testing.T) {
	var d Drainer
	d.notePace(8 * time.Millisecond)
	if got := time.Duration(d.pace.Load()); got != 8*time.Millisecond {
		t.Fatalf("after one call: pace %v, want 8ms", got)
	}
	d.notePace(16 * time.Millisecond)
	if got := time.Duration(d.pace.Load()); got != 9*time.Millisecond {
		t.Fatalf("after a 16ms call: pace %v, want 9ms", got)
	}
	d.notePace(0)
	if got := d.pace.Load(); got <= 0 {
		t.Fatalf("pace %d after an instant call, want > 0 (0 means unknown)", got)
	}
}
