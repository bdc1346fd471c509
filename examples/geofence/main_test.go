package main

import (
	"bytes"
	"context"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/internal/exampleutil"
)

// TestShortRun runs the whole example with a shorter replay: a real
// embedded JetStream server, two real webhook consumers over HTTP, each
// behind its own breaker judging every call on latency. The second one's
// P99 spikes and then recovers; the first has a slow period below the
// slow-call threshold.
//
// It asserts what holds at any machine speed. The consumer's outage is
// counted in requests (-degraded-calls), not wall time, so the breaker
// sees it however slowly the triggers come; -settle is a hang guard. Slow
// is unambiguous: the degraded consumer's slow answers take 4× -slow-call
// (a sleep, so never less) and the recovered one answers at once.
//
// The design note's expectations, as invariants: per consumer nothing lost
// or misdelivered, the healthy consumers' breakers never tripped, every
// trigger delivered with the right content, at most 2 probes in flight,
// the breaker tripped during the outage with growing open windows and is
// closed at the end, closed once, with no re-trip after the recovery. A
// re-trip is tolerated only when the breaker saw calls sent after the
// recovery as slow (a starved machine can stretch an instant answer past
// -slow-call); the summary prints how often, and how soon it closed.
func TestShortRun(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the example end to end (~30 s)")
	}
	o, err := parseFlags([]string{
		"-produce-for", "17s", "-settle", "5m", "-consumers", "2", "-faulty", "2",
		"-slow-at", "1s", "-slow-for", "5s", "-slow-latency", "20ms",
		"-healthy", "0", "-degraded-calls", "20",
		"-fast", "0", "-slow-call", "500ms", "-spike", "2s", "-timeout", "5s",
	}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	var out bytes.Buffer
	sum, err := run(ctx, o, &out)
	t.Log("\n" + out.String())
	if err != nil {
		t.Fatal(err)
	}
	// The per-run stream names are printed, so "floodgate backlog" finds
	// them (issue 15).
	if !regexp.MustCompile(`streams: retry floodgate_retry_\w+, dead letters floodgate_dead_\w+; while it runs: floodgate backlog -s nats://`).MatchString(out.String()) {
		t.Errorf("output does not name the streams:\n%s", out.String())
	}
	checkShortRun(t, sum)
}

// checkShortRun asserts TestShortRun's invariants on a run's summary.
func checkShortRun(t *testing.T, sum *summary) {
	t.Helper()
	// The replay publishes every fix due by -produce-for, late or not: a
	// fixed count, whatever the load.
	if sum.Produced < 100 || sum.Fixes < 5000 {
		t.Fatalf("produced %d triggers from %d fixes; the replay is too short", sum.Produced, sum.Fixes)
	}
	if len(sum.Partners) != 2 {
		t.Fatalf("%d partners in the summary, want 2", len(sum.Partners))
	}
	var faulty exampleutil.PartnerSummary
	for i, p := range sum.Partners {
		if p.Faulty != (i == 1) {
			t.Errorf("partner %d (%s): faulty %v, want %v", i+1, p.Partner, p.Faulty, i == 1)
		}
		if p.Produced == 0 {
			t.Errorf("%s: no trigger produced for it", p.Partner)
		}
		if p.Lost != 0 || p.Misdelivered != 0 || p.Queued != 0 || p.DeadLettered != 0 || p.Delivered != p.Produced {
			t.Errorf("%s: lost %d, misdelivered %d, queued %d, dead-lettered %d, delivered %d of %d; want 0, 0, 0, 0, all",
				p.Partner, p.Lost, p.Misdelivered, p.Queued, p.DeadLettered, p.Delivered, p.Produced)
		}
		if p.Faulty {
			faulty = p
		} else if p.Trips != 0 {
			t.Errorf("%s: trips %d; a healthy consumer's breaker must not trip", p.Partner, p.Trips)
		}
	}
	if faulty.Trips < 1 || faulty.Diverted < 1 || faulty.Drained < 1 || faulty.DrainS < 0 {
		t.Errorf("faulty consumer: trips %d, diverted %d, drained %d, drain_s %v; its outage must trip its breaker, divert and drain",
			faulty.Trips, faulty.Diverted, faulty.Drained, faulty.DrainS)
	}
	if sum.Lost != 0 || sum.Misdelivered != 0 || sum.DeadLettered != 0 || sum.Queued != 0 {
		t.Errorf("lost = %d, misdelivered = %d, dead_lettered = %d, queued = %d, want 0 each", sum.Lost, sum.Misdelivered, sum.DeadLettered, sum.Queued)
	}
	if sum.DeliveredUnique != sum.Produced || sum.TriggersExpected != sum.Produced || sum.Unexpected != 0 {
		t.Errorf("delivered %d unique, produced %d, expected %d, unexpected %d: every trigger once per key",
			sum.DeliveredUnique, sum.Produced, sum.TriggersExpected, sum.Unexpected)
	}
	if sum.ContentMismatches != 0 || sum.SignatureFailures != 0 {
		t.Errorf("content mismatches %d, signature failures %d, want 0", sum.ContentMismatches, sum.SignatureFailures)
	}
	if sum.RecoverAtS < 0 {
		t.Fatalf("the consumer never recovered: fewer than -degraded-calls requests reached it")
	}
	if faulty.Trips < 1 || sum.SlowResponses < 1 {
		t.Errorf("trips %d, slow answers %d: the outage must trip the breaker", faulty.Trips, sum.SlowResponses)
	}
	// A trip judging calls sent during the outage may come after the
	// recovery, within the grace: it is still the outage's.
	if faulty.Trips-sum.RetripsAfterRecovery < 1 {
		t.Errorf("trips %d, %d of them re-trips after the recovery: none judged the outage",
			faulty.Trips, sum.RetripsAfterRecovery)
	}
	if sum.MaxProbesInFlight < 1 || sum.MaxProbesInFlight > probeConcurrency {
		t.Errorf("at most %d probes in flight, want 1 to %d", sum.MaxProbesInFlight, probeConcurrency)
	}
	if sum.ClosedAfterRecoveryS < 0 {
		t.Errorf("the breaker is not closed at the end")
	}
	t.Logf("trips %d, open windows %v s, closed %.2fs after recovery, diverted %d, drained %d, %d calls judged slow after recovery",
		faulty.Trips, sum.OpenWindowsS, sum.ClosedAfterRecoveryS, sum.Diverted, sum.Drained, sum.SlowAfterRecovery)
	if sum.RetripsAfterRecovery > 0 {
		if sum.SlowAfterRecovery == 0 {
			t.Errorf("re-trips after recovery = %d, but no call sent after the recovery was judged slow or failed",
				sum.RetripsAfterRecovery)
		}
		return // the machine, not the consumer, was slow: the rest does not follow
	}
	if sum.Closes != 1 {
		t.Errorf("closes = %d, want 1: backed-off probing closes once", sum.Closes)
	}
	for i := 1; i < len(sum.OpenWindowsS); i++ {
		if sum.OpenWindowsS[i] <= sum.OpenWindowsS[i-1] {
			t.Errorf("open windows %v: each trip before the close must open longer", sum.OpenWindowsS)
		}
	}
}

func TestBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-speed", "-5"}, "-speed"},
		{[]string{"-speed", "0"}, "-speed"},
		{[]string{"-metrics-addr", "nohost"}, "-metrics-addr"},
		{[]string{"-vehicles", "0"}, "-vehicles"},
		{[]string{"-consumers", "0"}, "-consumers"},
		{[]string{"-consumers", "9"}, "-consumers"},
		{[]string{"-consumers", "2", "-faulty", "3"}, "-faulty"},
		{[]string{"-slow-for", "0s"}, "-slow-for"},
		{[]string{"-slow-latency", "300ms"}, "-slow-latency"},
		{[]string{"-vehicles", "17"}, "-vehicles"},
		{[]string{"-degraded", "soon"}, "-degraded"},
		{[]string{"-degraded", "0s"}, "-degraded"},
		{[]string{"-produce-for", "0s"}, "-produce-for"},
		{[]string{"-degraded-calls", "-1"}, "-degraded-calls"},
		{[]string{"-degraded-calls", "100001"}, "-degraded-calls"},
		{[]string{"-slow-fraction", "0"}, "-slow-fraction"},
		{[]string{"-slow-fraction", "1.5"}, "-slow-fraction"},
		{[]string{"-spike", "-1s"}, "-spike"},
		{[]string{"-fast", "300ms"}, "-fast"},
		{[]string{"-timeout", "0s"}, "-timeout"},
		{[]string{"-settle", "-1s"}, "-settle"},
		{[]string{"-dwell", "0s"}, "-dwell"},
		{[]string{"-seed", "x"}, "-seed"},
		{[]string{"extra"}, "extra"},
		// Regression: an unwritable summary failed only after the run.
		{[]string{"-summary", filepath.Join(t.TempDir(), "missing", "s.json")}, "-summary: cannot write the output file"},
	} {
		var stderr bytes.Buffer
		_, err := parseFlags(tc.args, &stderr)
		if err == nil {
			t.Errorf("%v: no error", tc.args)
			continue
		}
		if msg := err.Error() + stderr.String(); !strings.Contains(msg, tc.want) {
			t.Errorf("%v: error %q does not name %s", tc.args, msg, tc.want)
		}
	}
	if _, err := parseFlags(nil, &bytes.Buffer{}); err != nil {
		t.Errorf("defaults: %v", err)
	}
}

// TestRecovery checks how the summary judges the transitions around the
// consumer's recovery.
func TestRecovery(t *testing.T) {
	rec := time.Date(2026, 3, 2, 7, 0, 10, 0, time.UTC)
	at := func(d time.Duration) time.Time { return rec.Add(d) }
	open := func(d, w time.Duration) breaker.Transition {
		return breaker.Transition{To: breaker.StateOpen, At: at(d), Window: w}
	}
	closed := func(d time.Duration) breaker.Transition {
		return breaker.Transition{To: breaker.StateClosed, At: at(d)}
	}
	const s, ms = time.Second, time.Millisecond
	for _, tc := range []struct {
		name                 string
		ts                   []breaker.Transition
		final                breaker.State
		rec, graceEnd        time.Time
		recAt, grace         float64
		closedAfter          float64
		retrips, inGrace, cl int
	}{
		{"open across recovery", []breaker.Transition{open(-5*s, s), open(-2*s, 4*s), closed(2500 * ms)},
			breaker.StateClosed, rec, at(1100 * ms), 10, 1.1, 2.5, 0, 0, 1},
		{"probe judged in the grace", []breaker.Transition{open(-s, s), open(800*ms, 2*s), closed(3 * s)},
			breaker.StateClosed, rec, at(1100 * ms), 10, 1.1, 3, 0, 1, 1},
		{"re-trip after the grace", []breaker.Transition{open(-s, s), closed(s), open(3*s, s), closed(5 * s)},
			breaker.StateClosed, rec, at(1100 * ms), 10, 1.1, 5, 1, 0, 2},
		// A call sent before the recovery and judged late (a loaded
		// machine) extends the grace: its trip is not a re-trip.
		{"late judgement of an outage call", []breaker.Transition{open(-s, s), open(3*s, 2*s), closed(6 * s)},
			breaker.StateClosed, rec, at(3100 * ms), 10, 3.1, 6, 0, 1, 1},
		{"no call sent before recovery", []breaker.Transition{open(-5*s, s), closed(-3 * s)},
			breaker.StateClosed, rec, time.Time{}, 10, 0, 0, 0, 0, 1},
		{"never closed", []breaker.Transition{open(-5*s, s)},
			breaker.StateOpen, rec, at(-4 * s), 10, 0, -1, 0, 0, 0},
		{"never recovered", []breaker.Transition{open(-5*s, s), open(-3*s, 2*s)},
			breaker.StateOpen, time.Time{}, time.Time{}, -1, 0, -1, 0, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var sum summary
			recovery(&sum, tc.ts, tc.final, rec.Add(-10*s), tc.rec, tc.graceEnd)
			if sum.ClosedAfterRecoveryS != tc.closedAfter || sum.RetripsAfterRecovery != tc.retrips ||
				sum.TripsInRecoveryGrace != tc.inGrace || sum.Closes != tc.cl {
				t.Errorf("closed after %v, re-trips %d, in grace %d, closes %d; want %v, %d, %d, %d",
					sum.ClosedAfterRecoveryS, sum.RetripsAfterRecovery, sum.TripsInRecoveryGrace, sum.Closes,
					tc.closedAfter, tc.retrips, tc.inGrace, tc.cl)
			}
			if sum.RecoverAtS != tc.recAt || sum.RecoveryGraceS != tc.grace || len(sum.OpenWindowsS) != len(tc.ts)-tc.cl {
				t.Errorf("recovered at %v s, grace %v s, open windows %v; want %v s, %v s, %d windows",
					sum.RecoverAtS, sum.RecoveryGraceS, sum.OpenWindowsS, tc.recAt, tc.grace, len(tc.ts)-tc.cl)
			}
		})
	}
}

// TestQuietKeepsSummary: -quiet hides the per-second timeline only; the
// per-partner summary and its "lost" count are still printed.
func TestQuietKeepsSummary(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the example end to end")
	}
	o, err := parseFlags([]string{"-quiet", "-vehicles", "2", "-consumers", "1", "-faulty", "1", "-speed", "1000",
		"-produce-for", "2s", "-healthy", "0", "-degraded", "10ms", "-settle", "2m"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var out bytes.Buffer
	if _, err := run(ctx, o, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if s := out.String(); strings.Contains(s, "transitions") || !strings.Contains(s, "lost 0") || !strings.Contains(s, "delivered") {
		t.Errorf("-quiet output, want the summary without the timeline:\n%s", s)
	}
}
