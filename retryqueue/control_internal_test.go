package retryqueue

import (
	"encoding/json"
	"math"
	"testing"
	"time"

	"golang.org/x/time/rate"
)

// The drain rate control, step by step on a fixed timeline: slow start
// grows by half per clean, rate-limited interval; a failure multiplies by
// the decrease factor and ends slow start; then growth is additive; an
// interval that did not use its rate or saw nothing changes nothing; the
// rate stays within [min, max].
func TestAIMDSteps(t *testing.T) {
	const iv = 500 * time.Millisecond
	a := aimd{rate: 40, min: 5, max: 100, inc: 4, dec: 0.5, slowStart: true}
	full := func() float64 { return a.rate * iv.Seconds() } // served the whole rate
	steps := []struct {
		name    string
		ok, bad int
		served  float64
		want    float64
		change  change
	}{
		{"slow start", 20, 0, full(), 60, increased},
		{"slow start again", 30, 0, 30, 90, increased},
		{"capped at max", 45, 0, 45, 100, increased},
		{"at max stays", 50, 0, 50, 100, unchanged},
		{"failure halves, slow start ends", 40, 1, 40, 50, decreased},
		{"additive now", 25, 0, 25, 54, increased},
		{"additive again", 27, 0, 27, 58, increased},
		{"not rate-limited: backlog was the limit", 10, 0, 10, 58, unchanged},
		{"nothing seen", 0, 0, 0, 58, unchanged},
		{"failure", 1, 9, 20, 29, decreased},
		{"failure", 0, 3, 0, 14.5, decreased},
		{"failure", 0, 3, 0, 7.25, decreased},
		{"floor at min", 0, 3, 0, 5, decreased},
		{"at min stays", 0, 3, 0, 5, unchanged},
		{"from the floor: slow start again", 5, 0, 2.5, 7.5, increased},
		{"slow start", 5, 0, 3.75, 11.25, increased},
	}
	for i, s := range steps {
		got := a.step(s.ok, s.bad, s.served, 0, iv, false)
		if math.Abs(a.rate-s.want) > 1e-9 || got != s.change {
			t.Fatalf("step %d (%s): rate %v change %v, want %v %v", i, s.name, a.rate, got, s.want, s.change)
		}
	}
	if !a.slowStart {
		t.Error("slow start off after backing off to the floor")
	}
}

// On a failure the rate backs off to 90 % of the measured goodput, but
// never more than by the decrease factor, and never up; a pause restarts
// slow start from at least the configured rate.
func TestAIMDGoodputBackoff(t *testing.T) {
	const sec = time.Second
	for _, c := range []struct {
		name       string
		rate, good float64
		want       float64
	}{
		{"overshoot: back to 90% of what got through", 120, 100, 90},
		{"collapse: no more than the decrease factor", 120, 10, 84},
		{"goodput above the rate: no increase", 50, 80, 50},
	} {
		a := aimd{rate: c.rate, min: 1, inc: 1, dec: 0.7}
		a.step(10, 1, c.rate, c.good, sec, false)
		if math.Abs(a.rate-c.want) > 1e-9 {
			t.Errorf("%s: rate %v, want %v", c.name, a.rate, c.want)
		}
	}
	a := aimd{rate: 3, min: 1, max: 100, inc: 1, dec: 0.7}
	a.resume(50)
	if a.rate != 50 || !a.slowStart {
		t.Fatalf("resume: rate %v slow start %v, want 50 true", a.rate, a.slowStart)
	}
	a.resume(20)
	if a.rate != 50 {
		t.Fatalf("resume never lowers the rate: %v", a.rate)
	}
}

// Unbounded max: slow start grows without a cap while clean.
func TestAIMDUnbounded(t *testing.T) {
	a := aimd{rate: 10, min: 1, inc: 1, dec: 0.7, slowStart: true}
	for range 10 {
		a.step(1, 0, a.rate, a.rate, time.Second, false)
	}
	if want := 10 * math.Pow(1.5, 10); math.Abs(a.rate-want) > 1e-6 {
		t.Fatalf("rate %v, want %v", a.rate, want)
	}
}

// An early look in slow start doubles the rate; once slow start has ended
// an early look (which the drainer does not make then) grows it additively.
func TestAIMDEarlyLook(t *testing.T) {
	a := aimd{rate: 100, min: 1, inc: 5, dec: 0.5, slowStart: true}
	if c := a.step(20, 0, 10, 10, 100*time.Millisecond, true); c != increased || a.rate != 200 {
		t.Fatalf("early look: rate %v change %v, want 200 increased", a.rate, c)
	}
	if c := a.step(40, 0, 20, 20, 100*time.Millisecond, false); c != increased || a.rate != 300 {
		t.Fatalf("regular look: rate %v change %v, want 300 increased", a.rate, c)
	}
	a.step(10, 1, 30, 20, 100*time.Millisecond, true)
	before := a.rate
	if a.step(40, 0, before, before, time.Second, true); a.rate != before+a.inc {
		t.Fatalf("after slow start: rate %v, want %v", a.rate, before+a.inc)
	}
}

// The hand-written encoding of a history entry is what encoding/json
// writes.
func TestEncodeEntryMatchesJSON(t *testing.T) {
	at := time.Date(2026, 11, 30, 8, 0, 0, 123456789, time.UTC)
	for _, e := range []HistoryEntry{
		{At: at, Event: EventDiverted, Reason: "open"},
		{At: at.Truncate(time.Second), Event: EventDiverted, Reason: "failure", Attempt: 3, Error: `HTTP 503 "busy" <b> & \ done`},
		{At: at, Event: EventDeadLettered, Reason: "permanent: MDN processed/error", Attempt: 12, Error: "line1\nline2\tü\x00"},
		{At: at, Event: EventReplayed},
	} {
		want, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		if got := encodeEntry(nil, e); string(got) != string(want) {
			t.Errorf("encodeEntry\n got %s\nwant %s", got, want)
		}
	}
}

// A failure in slow start falls back to the last rate known to be clean
// (the one before the last doubling), however good the goodput estimate of
// a short interval looks, and ends slow start.
func TestAIMDSlowStartFailureFallsBackToClean(t *testing.T) {
	a := aimd{rate: 50, min: 1, inc: 5, dec: 0.7, slowStart: true}
	for _, want := range []float64{100, 200} {
		if a.step(20, 0, want, want, 100*time.Millisecond, true); a.rate != want {
			t.Fatalf("clean early look: rate %v, want %v", a.rate, want)
		}
	}
	// 20 ms into the interval: 10 served, goodput 450/s estimated.
	if c := a.step(9, 1, 10, 10, 20*time.Millisecond, false); c != decreased || a.rate != 100 || a.slowStart {
		t.Fatalf("failure in slow start: rate %v, change %v, slow start %v; want 100, decreased, false", a.rate, c, a.slowStart)
	}
	// Out of slow start a failure backs off as before: to 0.7 of the rate
	// at least.
	if a.step(9, 1, 10, 0, time.Second, false); a.rate != 70 {
		t.Fatalf("failure after slow start: rate %v, want 70", a.rate)
	}
}

// spend takes every token asked for, in reservations no larger than the
// burst (a larger one is refused and would take none): 25 from a bucket of
// 10 leaves it 15 in debt. The rate is one token in 1000 s, so the refill
// during the test is below the tolerance.
func TestSpendTakesEveryToken(t *testing.T) {
	d := &Drainer{lim: rate.NewLimiter(0.001, 10)}
	d.spend(25)
	if got := d.lim.Tokens(); math.Abs(got-(-15)) > 0.01 {
		t.Fatalf("tokens after spending 25 of 10: %v, want -15", got)
	}
	d.spend(0)
	if got := d.lim.Tokens(); math.Abs(got-(-15)) > 0.01 {
		t.Fatalf("tokens after spending 0: %v, want -15", got)
	}
}
