package main

import (
	"bytes"
	"context"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestShortRun runs the whole example in a compressed timeline: a real
// embedded JetStream server (or NATS_URL), three real AS2 retailers over
// HTTP, one of them (the second) with an outage that trips its breaker, and
// a drain. Per retailer: nothing lost or misdelivered; the faulty one
// tripped and drained, the healthy ones never tripped.
//
// Each assertion holds at any machine speed (regression: on a loaded
// machine only 7 calls reached the retailer in its 2 s outage, too few to
// trip). The outage lasts until the retailer has answered 10 requests with
// 503 (-outage-calls): every one is a call the closed breaker admitted, so
// its window of 20 holds 10 failures (only calls in flight when the outage
// began can report a success among them), a failure rate of 0.5: it trips.
// Those failures are diverted, and delivered later only by the drain. The
// producer goes on until the retailer recovered with its breaker closed,
// so the run ends closed: time to full traffic and drain time are
// measured. The backlog and drain rate peaks are also taken from events
// (each diversion, each drained message), which a starved 100 ms sampler
// cannot miss.
func TestShortRun(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the example end to end (~15 s)")
	}
	o, err := parseFlags([]string{
		"-rate", "60", "-retailers", "3", "-faulty", "2",
		"-produce-for", "6s", "-healthy", "1s", "-outage", "2s", "-outage-calls", "10",
		"-fragile", "1s", "-fragile-capacity", "15", "-settle", "45s",
	}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
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
	if len(sum.Partners) != 3 {
		t.Fatalf("%d partners in the summary, want 3", len(sum.Partners))
	}
	for i, p := range sum.Partners {
		if p.Partner != retailerIDs[i] || p.Faulty != (i == 1) {
			t.Errorf("partner %d: %s (faulty %v), want %s (faulty %v)", i, p.Partner, p.Faulty, retailerIDs[i], i == 1)
		}
		if p.Produced == 0 {
			t.Errorf("%s: produced nothing", p.Partner)
		}
		if p.Lost != 0 || p.Misdelivered != 0 || p.Queued != 0 || p.DeadLettered != 0 {
			t.Errorf("%s: lost %d, misdelivered %d, queued %d, dead-lettered %d; want 0 each",
				p.Partner, p.Lost, p.Misdelivered, p.Queued, p.DeadLettered)
		}
		if p.Delivered != p.Produced {
			t.Errorf("%s: delivered %d of %d", p.Partner, p.Delivered, p.Produced)
		}
		if p.Faulty {
			if p.Trips < 1 || p.Diverted < 1 || p.Drained < 1 {
				t.Errorf("%s: trips %d, diverted %d, drained %d; its outage must trip its breaker, divert and drain",
					p.Partner, p.Trips, p.Diverted, p.Drained)
			}
			if p.DrainS < 0 {
				t.Errorf("%s: drain_s = %v, want measured (>= 0)", p.Partner, p.DrainS)
			}
		} else if p.Trips != 0 {
			t.Errorf("%s: trips %d; a healthy retailer's breaker must not trip", p.Partner, p.Trips)
		}
	}
	if sum.Lost != 0 || sum.Misdelivered != 0 || sum.Queued != 0 || sum.DeliveredUnique != sum.Produced {
		t.Errorf("total: lost %d, misdelivered %d, queued %d, delivered %d of %d",
			sum.Lost, sum.Misdelivered, sum.Queued, sum.DeliveredUnique, sum.Produced)
	}
	if sum.SignedEncrypted < sum.DeliveredUnique || sum.SignedMDNs < sum.DeliveredUnique {
		t.Errorf("signed+encrypted %d, signed MDNs %d, want >= delivered %d: the example must use the secure AS2 path",
			sum.SignedEncrypted, sum.SignedMDNs, sum.DeliveredUnique)
	}
	if sum.BacklogPeak < 1 || sum.DrainRatePeak <= 0 || sum.TimeToFullTrafficS < 0 {
		t.Errorf("backlog_peak = %d, drain_rate_peak = %v, time_to_full_traffic_s = %v; the faulty retailer's backlog must fill and drain",
			sum.BacklogPeak, sum.DrainRatePeak, sum.TimeToFullTrafficS)
	}
	if !strings.Contains(out.String(), "rate(/s)") || !strings.Contains(out.String(), "misdelivered") {
		t.Error("the output must show the drain rate and the per-partner summary")
	}
}

func TestBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-rate", "-5"}, "-rate"},
		{[]string{"-rate", "0"}, "-rate"},
		{[]string{"-retailers", "0"}, "-retailers"},
		{[]string{"-retailers", "9"}, "-retailers"},
		{[]string{"-retailers", "2", "-faulty", "3"}, "-faulty"},
		{[]string{"-faulty", "0"}, "-faulty"},
		{[]string{"-fragile-capacity", "0"}, "-fragile-capacity"},
		{[]string{"-capacity-after", "-1"}, "-capacity-after"},
		{[]string{"-outage", "soon"}, "-outage"},
		{[]string{"-outage-calls", "-1"}, "-outage-calls"},
		{[]string{"-outage", "0", "-outage-calls", "5"}, "-outage-calls 5 needs an outage"},
		{[]string{"-produce-for", "0s"}, "-produce-for"},
		{[]string{"-settle", "-1s"}, "-settle"},
		{[]string{"extra"}, "extra"},
		// Regression: an unwritable summary failed only after the run.
		{[]string{"-summary", filepath.Join(t.TempDir(), "missing", "s.json")}, "-summary: cannot write the output file"},
		{[]string{"-metrics-addr", "9090"}, "-metrics-addr"},
		{[]string{"-mdn", "later"}, "-mdn"},
		{[]string{"-metrics-addr", ":99999"}, "-metrics-addr"},
		{[]string{"-as2-cert", "ours.pem"}, "-as2-cert and -as2-key go together"},
		{[]string{"-as2-key", "ours.key"}, "-as2-cert and -as2-key go together"},
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
}

// TestQuietKeepsSummary: -quiet hides the per-second timeline only; the
// per-partner summary and its "lost" line are still printed.
func TestQuietKeepsSummary(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the example end to end")
	}
	o, err := parseFlags([]string{"-quiet", "-rate", "20", "-retailers", "1", "-faulty", "1",
		"-produce-for", "1s", "-healthy", "0", "-outage", "0", "-fragile", "0", "-settle", "45s"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var out bytes.Buffer
	if _, err := run(ctx, o, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if s := out.String(); strings.Contains(s, "rate(/s)") || !strings.Contains(s, "lost 0") || !strings.Contains(s, retailerIDs[0]) {
		t.Errorf("-quiet output, want the summary without the timeline:\n%s", s)
	}
}
