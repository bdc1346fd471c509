package breakertest_test

import (
	"slices"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/breaker/breakertest"
)

func TestClock(t *testing.T) {
	c := breakertest.NewClock(time.Time{})
	start := c.Now()
	if start.IsZero() {
		t.Fatal("zero start")
	}
	var fired []string
	var at []time.Duration
	rec := func(name string) func() {
		return func() {
			fired = append(fired, name)
			at = append(at, c.Now().Sub(start))
		}
	}
	c.AfterFunc(2*time.Second, rec("b"))
	c.AfterFunc(time.Second, rec("a"))
	c.AfterFunc(2*time.Second, rec("c")) // same deadline: creation order
	stopped := c.AfterFunc(1500*time.Millisecond, rec("stopped"))
	c.AfterFunc(time.Second, func() { // a timer may schedule another
		c.AfterFunc(500*time.Millisecond, rec("chained"))
	})
	if !stopped.Stop() || stopped.Stop() {
		t.Fatal("Stop must report true once")
	}
	if d, ok := c.Next(); !ok || d != start.Add(time.Second) {
		t.Fatalf("Next %v %v", d, ok)
	}
	c.Advance(1999 * time.Millisecond)
	if !slices.Equal(fired, []string{"a", "chained"}) {
		t.Fatalf("fired %v", fired)
	}
	c.Advance(time.Millisecond)
	if !slices.Equal(fired, []string{"a", "chained", "b", "c"}) {
		t.Fatalf("fired %v", fired)
	}
	want := []time.Duration{time.Second, 1500 * time.Millisecond, 2 * time.Second, 2 * time.Second}
	if !slices.Equal(at, want) {
		t.Fatalf("fired at %v, want %v", at, want)
	}
	if c.Pending() != 0 {
		t.Fatalf("pending %d", c.Pending())
	}
	c.Set(start) // backwards: no timers fire
	if !c.Now().Equal(start) {
		t.Fatal("Set backwards")
	}
	c.AfterFunc(-time.Second, rec("now"))
	c.Advance(0)
	if fired[len(fired)-1] != "now" {
		t.Fatal("a negative delay fires at the next move")
	}
}
