package main

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/deliver/webhook"
	"github.com/floodgate-go/floodgate/deliver/webhook/webhooktest"
	"github.com/floodgate-go/floodgate/middleware"
)

// TestRecoverySwitchCounts checks that -degraded-calls ends the outage
// after that many degraded requests, whatever the time.
func TestRecoverySwitchCounts(t *testing.T) {
	c, err := webhooktest.New(webhooktest.Config{Script: webhooktest.Degraded(callHold, 0, 0, 0.5)})
	if err != nil {
		t.Fatal(err)
	}
	sw := &recoverySwitch{consumer: c, calls: 3, skip: callHold}
	sw.start(time.Now())
	for i := 1; i <= 5; i++ {
		r := httptest.NewRequest(http.MethodPost, "/hooks", strings.NewReader(`{}`))
		r.Header.Set(webhook.HeaderIdempotencyKey, "k"+strconv.Itoa(i))
		r.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		sw.ServeHTTP(w, r)
		if w.Code != http.StatusNoContent {
			t.Fatalf("request %d: HTTP %d", i, w.Code)
		}
		_, recovered := sw.recoveredAt(time.Now())
		if want := i > 3; recovered != want {
			t.Errorf("after request %d: recovered %v, want %v", i, recovered, want)
		}
	}
	if got := c.PhaseAt(time.Now()).Name; got != "recovered" {
		t.Errorf("phase %q, want recovered", got)
	}
	if st := c.Stats(); st.Slow != 1 { // requests 1-3 degraded, every second one slow
		t.Errorf("slow answers %d, want 1", st.Slow)
	}
}

// TestCallLog checks which judgements extend the recovery grace and which
// count as slow after the recovery.
func TestCallLog(t *testing.T) {
	l := &callLog{slowCall: 500 * time.Millisecond, before: map[string]int{}}
	t0 := time.Date(2026, 3, 2, 7, 0, 0, 0, time.UTC)
	done := l.send("a", true, true)
	doneB := l.send("b", false, true)
	done()
	doneB()
	l.send("c", false, false)()
	l.send("d", false, false)()
	l.judged(middleware.Event{UUID: "a", Admitted: true, Outcome: breaker.OutcomeSuccess, Latency: 2 * time.Second}, t0.Add(3*time.Second))
	l.judged(middleware.Event{UUID: "b", Admitted: true, Outcome: breaker.OutcomeSuccess, Latency: 600 * time.Millisecond}, t0.Add(4*time.Second))
	l.judged(middleware.Event{UUID: "c", Admitted: true, Outcome: breaker.OutcomeFailure}, t0.Add(5*time.Second))
	l.judged(middleware.Event{UUID: "d", Admitted: true, Outcome: breaker.OutcomeSuccess, Latency: time.Millisecond}, t0.Add(6*time.Second))
	l.judged(middleware.Event{UUID: "e", Action: middleware.Diverted}, t0.Add(7*time.Second)) // not admitted
	graceEnd, slowAfter, maxProbes := l.result()
	if !graceEnd.Equal(t0.Add(3*time.Second)) || slowAfter != 2 || maxProbes != 2 {
		t.Errorf("grace end %v, slow after %d, max probes %d; want %v, 2, 2", graceEnd, slowAfter, maxProbes, t0.Add(3*time.Second))
	}
}
