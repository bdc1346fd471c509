package bench

import (
	"testing"
	"time"
)

// TestClosedPathAllocs keeps the benchmark cases honest: each one works and
// floodgate's does not allocate.
func TestClosedPathAllocs(t *testing.T) {
	cb := newFloodgateT(t)
	t0 := time.Now()
	t1 := t0.Add(latency)
	n := testing.AllocsPerRun(1000, func() {
		p, err := cb.AllowAt(t0)
		if err != nil {
			t.Fatal(err)
		}
		p.DoneAt(t1, nil)
	})
	if n != 0 {
		t.Fatalf("floodgate closed path: %v allocs per call", n)
	}
	if s := cb.Snapshot(); s.Calls != 20 || s.Failures != 0 || s.SlowCalls != 0 {
		t.Fatalf("snapshot %+v", s)
	}
}
