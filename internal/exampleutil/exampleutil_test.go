package exampleutil_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/internal/exampleutil"
	"github.com/floodgate-go/floodgate/internal/natsconn"
	"github.com/floodgate-go/floodgate/internal/natstest"
	"github.com/floodgate-go/floodgate/jsq"
	"github.com/floodgate-go/floodgate/middleware"
)

// TestCloseDeletesStreamsOnExternalServer: a run on an external server
// leaves it as it found it.
func TestCloseDeletesStreamsOnExternalServer(t *testing.T) {
	srv := natstest.Server(t)
	nc, err := exampleutil.StartNATS(natsconn.Options{Server: srv.ClientURL()})
	if err != nil {
		t.Fatal(err)
	}
	if nc.Embedded() {
		t.Fatal("URL given, but embedded")
	}
	ctx := context.Background()
	if err := nc.EnsureStreams(ctx, "src_close_test"); err != nil {
		t.Fatal(err)
	}
	// Streams made elsewhere (floodgate.New's retry and dead-letter
	// streams) are deleted too once tracked.
	for _, topic := range []string{"retry_close_test", "dead_close_test"} {
		if _, err := jsq.EnsureStream(ctx, nc.JetStream, topic); err != nil {
			t.Fatal(err)
		}
	}
	nc.Track("retry_close_test", "dead_close_test")
	nc.Close()
	nc.Close() // harmless

	js := natstest.JetStream(t, natstest.Conn(t, srv.ClientURL()))
	for _, s := range []string{"src_close_test", "retry_close_test", "dead_close_test"} {
		if _, err := js.Stream(ctx, s); !errors.Is(err, jetstream.ErrStreamNotFound) {
			t.Errorf("stream %s after Close: %v, want not found", s, err)
		}
	}
}

func TestStartNATSBadURL(t *testing.T) {
	_, err := exampleutil.StartNATS(natsconn.Options{Server: "nats://ops:pw@127.0.0.1:1"})
	if err == nil || !strings.Contains(err.Error(), "REDACTED@127.0.0.1:1") || strings.Contains(err.Error(), "pw") {
		t.Errorf("err = %v, want one naming the URL, redacted", err)
	}
}

func TestCounters(t *testing.T) {
	var c exampleutil.Counters
	for _, ev := range []middleware.Event{
		{UUID: "a", Action: middleware.Delivered, Admitted: true},
		{UUID: "b", Action: middleware.Diverted, Admitted: true, Probe: true},
		{UUID: "c", Action: middleware.Diverted},
		{UUID: "d", Action: middleware.DeadLettered, Admitted: true},
		{UUID: "e", Action: middleware.Nacked},
	} {
		c.OnEvent(ev)
	}
	c.OnTransition(breaker.Transition{From: breaker.StateClosed, To: breaker.StateOpen})
	c.OnTransition(breaker.Transition{From: breaker.StateOpen, To: breaker.StateHalfOpen})
	c.OnTransition(breaker.Transition{From: breaker.StateHalfOpen, To: breaker.StateOpen})
	got := []int64{c.Admitted.Load(), c.Probes.Load(), c.Delivered.Load(), c.Diverted.Load(), c.DeadLettered.Load(), c.Nacked.Load(), c.Trips.Load()}
	want := []int64{3, 1, 1, 2, 1, 1, 2}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("admitted, probes, delivered, diverted, dead, nacked, trips = %v, want %v", got, want)
		}
	}
	if !c.Dead("d") || c.Dead("a") {
		t.Error("Dead: want d only")
	}
}

// PartnerCounters keeps each partner's counts apart and sums them.
func TestPartnerCounters(t *testing.T) {
	var pc exampleutil.PartnerCounters
	pc.OnEvent(middleware.Event{UUID: "a", PartnerKey: "A", Action: middleware.Delivered, Admitted: true})
	pc.OnEvent(middleware.Event{UUID: "b", PartnerKey: "B", Action: middleware.Diverted, Admitted: true})
	pc.OnEvent(middleware.Event{UUID: "c", PartnerKey: "B", Action: middleware.DeadLettered, Admitted: true})
	if pc.Of("A").Delivered.Load() != 1 || pc.Of("A").Diverted.Load() != 0 || pc.Of("B").Diverted.Load() != 1 {
		t.Errorf("A delivered %d diverted %d, B diverted %d; want 1, 0, 1",
			pc.Of("A").Delivered.Load(), pc.Of("A").Diverted.Load(), pc.Of("B").Diverted.Load())
	}
	if n := pc.Sum(func(c *exampleutil.Counters) int64 { return c.Admitted.Load() }); n != 3 {
		t.Errorf("admitted in all = %d, want 3", n)
	}
	if !pc.Dead("c") || pc.Dead("b") || pc.Of("A").Dead("c") {
		t.Error("Dead: want c, for B only")
	}
}

// A partner's accounting counts a message another partner received as
// misdelivered, and one received nowhere as lost unless queued.
func TestPartnerSummaryAccount(t *testing.T) {
	own := map[string]int{"a": 1, "b": 2}
	other := map[string]int{"c": 1}
	var s exampleutil.PartnerSummary
	s.Account([]string{"a", "b", "c", "d", "e"}, func(id string) int { return own[id] },
		func(id string) int { return other[id] }, func(id string) bool { return id == "d" })
	if s.Produced != 5 || s.Delivered != 2 || s.Duplicates != 1 || s.Misdelivered != 1 || s.Lost != 2 {
		t.Errorf("produced %d, delivered %d, duplicates %d, misdelivered %d, lost %d; want 5, 2, 1, 1, 2",
			s.Produced, s.Delivered, s.Duplicates, s.Misdelivered, s.Lost)
	}
	s.Unsettled(1)
	if s.Queued != 1 || s.Lost != 1 {
		t.Errorf("queued %d, lost %d; want 1, 1", s.Queued, s.Lost)
	}
	var out strings.Builder
	exampleutil.PrintPartners(&out, []exampleutil.PartnerSummary{s, {Partner: "B", Faulty: true}})
	if !strings.Contains(out.String(), "misdelivered") || !strings.Contains(out.String(), "B (faulty)") {
		t.Errorf("PrintPartners:\n%s", out.String())
	}
}

// DrainTimer measures from the last recovery to the first empty backlog
// after it.
func TestDrainTimer(t *testing.T) {
	t0 := time.Date(2026, 3, 2, 7, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	tr := func(to breaker.State, s float64) breaker.Transition { return breaker.Transition{To: to, At: at(s)} }

	var none exampleutil.DrainTimer
	none.Sample(at(1), 0)
	if got := none.Seconds(); got != 0 {
		t.Errorf("no backlog: %v, want 0", got)
	}

	var d exampleutil.DrainTimer
	d.Transition(tr(breaker.StateOpen, 1))
	d.Sample(at(2), 5)
	d.Transition(tr(breaker.StateClosed, 3)) // recovered
	d.Transition(tr(breaker.StateOpen, 4))   // re-trip: measure again
	d.Sample(at(4.5), 7)
	if got := d.Seconds(); got != -1 {
		t.Errorf("open with a backlog: %v, want -1", got)
	}
	d.Transition(tr(breaker.StateHalfOpen, 5))
	d.Transition(tr(breaker.StateClosed, 6))
	d.Sample(at(7), 3)
	d.Sample(at(8.5), 0)
	d.Sample(at(9), 0)
	if got := d.Seconds(); got != 2.5 {
		t.Errorf("drain = %v, want 2.5 (close at 6, empty at 8.5)", got)
	}

	var never exampleutil.DrainTimer // failures without a trip
	never.Sample(at(1), 2)
	never.Sample(at(2.2), 0)
	if got := never.Seconds(); got != 1.2 {
		t.Errorf("no trip: %v, want 1.2", got)
	}
}

func TestSummaryElapsedAndJSON(t *testing.T) {
	var s exampleutil.Summary
	start := time.Date(2025, 3, 14, 9, 30, 0, 0, time.UTC)
	for _, tc := range []struct {
		after time.Duration
		want  float64
	}{{1540 * time.Millisecond, 1.5}, {1550 * time.Millisecond, 1.6}, {0, 0}, {59960 * time.Millisecond, 60}} {
		s.ElapsedAt(start, start.Add(tc.after))
		if s.ElapsedS != tc.want {
			t.Errorf("ElapsedAt after %v: %v, want %v", tc.after, s.ElapsedS, tc.want)
		}
	}
	// Elapsed reads the clock: at least the 1.5 s already gone, however
	// slow the machine (an exact value would assume the two clock reads
	// are less than 10 ms apart).
	s.Elapsed(time.Now().Add(-1540 * time.Millisecond))
	if s.ElapsedS < 1.5 {
		t.Errorf("Elapsed 1.54 s ago: %v, want >= 1.5", s.ElapsedS)
	}
	path := filepath.Join(t.TempDir(), "s.json")
	if err := exampleutil.WriteJSON(path, struct {
		exampleutil.Summary
		Extra int `json:"extra"`
	}{s, 7}); err != nil {
		t.Fatal(err)
	}
	if err := exampleutil.WriteJSON(filepath.Join(t.TempDir(), "no", "such", "dir.json"), s); err == nil {
		t.Error("write into a missing folder: no error")
	}
}

func TestFlagCheck(t *testing.T) {
	var c exampleutil.FlagCheck
	c.Duration("ok", time.Second, 0, time.Minute, true)
	c.Float("fine", 1, 0, 2, true, "")
	c.Int("good", 3, 1, 3)
	// A writable output file: a missing one is created empty, an existing
	// one is left as it is until the run writes it.
	dir := t.TempDir()
	fresh, kept := filepath.Join(dir, "new.json"), filepath.Join(dir, "old.json")
	if err := os.WriteFile(kept, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	c.OutputFile("summary", fresh)
	c.OutputFile("summary", kept)
	c.OutputFile("summary", "")
	if err := c.Err(); err != nil {
		t.Fatalf("in range: %v", err)
	}
	if b, err := os.ReadFile(fresh); err != nil || len(b) != 0 {
		t.Errorf("new output file: %q, %v; want created empty", b, err)
	}
	if b, err := os.ReadFile(kept); err != nil || string(b) != "old" {
		t.Errorf("existing output file: %q, %v; want unchanged", b, err)
	}
	c.Duration("produce-for", 0, 0, time.Minute, true)
	c.Float("rate", -5, 0, 5000, true, "messages/s")
	c.Int("vehicles", 0, 1, 16)
	c.Failf("-a and -b conflict")
	c.OutputFile("summary", filepath.Join(t.TempDir(), "no", "such", "dir.json"))
	msg := c.Err().Error()
	for _, want := range []string{
		"-summary: cannot write the output file",
		"-produce-for must be in (0s, 1m0s], got 0s",
		"-rate must be in (0, 5000] messages/s, got -5",
		"-vehicles must be in [1, 16], got 0",
		"-a and -b conflict",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("errors %q lack %q", msg, want)
		}
	}
}
