package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestShortRun runs the whole example in a compressed timeline: a real
// embedded JetStream server (or NATS_URL), a real AS2 partner over HTTP, an
// outage that trips the breaker, and a drain. Nothing may be lost.
func TestShortRun(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the example end to end (~15 s)")
	}
	o, err := parseFlags([]string{
		"-rate", "40", "-produce-for", "6s", "-healthy", "1s", "-outage", "2s",
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
	if sum.Produced == 0 {
		t.Fatal("produced nothing")
	}
	if sum.Lost != 0 || sum.Queued != 0 {
		t.Errorf("lost = %d, queued = %d, want 0 and 0", sum.Lost, sum.Queued)
	}
	if sum.DeliveredUnique+sum.DeadLettered != sum.Produced {
		t.Errorf("delivered %d + dead-lettered %d != produced %d", sum.DeliveredUnique, sum.DeadLettered, sum.Produced)
	}
	if sum.DeadLettered != 0 {
		t.Errorf("dead_lettered = %d, want 0: the script has no permanent failures", sum.DeadLettered)
	}
	if sum.Trips < 1 || sum.Diverted < 1 {
		t.Errorf("trips = %d, diverted = %d; the outage must trip the breaker and divert", sum.Trips, sum.Diverted)
	}
	if sum.SignedEncrypted < sum.DeliveredUnique || sum.SignedMDNs < sum.DeliveredUnique {
		t.Errorf("signed+encrypted %d, signed MDNs %d, want >= delivered %d: the example must use the secure AS2 path",
			sum.SignedEncrypted, sum.SignedMDNs, sum.DeliveredUnique)
	}
	if sum.BacklogPeak < 1 || sum.Drained < 1 {
		t.Errorf("backlog_peak = %d, drained = %d; the backlog must fill and drain", sum.BacklogPeak, sum.Drained)
	}
	if sum.DrainS < 0 || sum.TimeToFullTrafficS < 0 {
		t.Errorf("drain_s = %v, time_to_full_traffic_s = %v; want both measured (>= 0)", sum.DrainS, sum.TimeToFullTrafficS)
	}
	if sum.DrainRatePeak <= 0 {
		t.Errorf("drain_rate_peak = %v", sum.DrainRatePeak)
	}
	if !strings.Contains(out.String(), "rate(/s)") {
		t.Error("the timeline must show the drain rate")
	}
}

func TestBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-rate", "-5"}, "-rate"},
		{[]string{"-rate", "0"}, "-rate"},
		{[]string{"-fragile-capacity", "0"}, "-fragile-capacity"},
		{[]string{"-capacity-after", "-1"}, "-capacity-after"},
		{[]string{"-outage", "soon"}, "-outage"},
		{[]string{"-produce-for", "0s"}, "-produce-for"},
		{[]string{"-settle", "-1s"}, "-settle"},
		{[]string{"extra"}, "extra"},
		// Regression: an unwritable summary failed only after the run.
		{[]string{"-summary", filepath.Join(t.TempDir(), "missing", "s.json")}, "-summary: cannot write the output file"},
		{[]string{"-metrics-addr", "9090"}, "-metrics-addr"},
		{[]string{"-metrics-addr", ":99999"}, "-metrics-addr"},
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
