package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/breaker/natskv"
	"github.com/floodgate-go/floodgate/internal/natstest"
)

func TestFleetCommands(t *testing.T) {
	url := natstest.URL(t)
	js := natstest.JetStream(t, natstest.Conn(t, url))
	bucket := natstest.Name(t, "kv")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := natskv.New(ctx, js, natskv.Config{Bucket: bucket})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = js.DeleteKeyValue(context.Background(), bucket) })

	// A replica of the fleet, in this process.
	b, err := breaker.New(breaker.Config{Name: "partner"})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Stop()
	f, err := breaker.JoinFleet(b, breaker.FleetConfig{Store: s, Replica: "r1", ResyncInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Leave()

	cli := func(args ...string) (string, string, int) {
		var out, errb bytes.Buffer
		code := run(append(args, "-nats-url", url, "-bucket", bucket), &out, &errb)
		return out.String(), errb.String(), code
	}
	decode := func(out string) []breakerStatus {
		t.Helper()
		var st []breakerStatus
		if err := json.Unmarshal([]byte(out), &st); err != nil {
			t.Fatalf("output %q: %v", out, err)
		}
		return st
	}

	out, errs, code := cli("open", "-breaker", "partner", "-reason", "partner maintenance", "-format", "json")
	if code != exitOK {
		t.Fatalf("open: exit %d: %s", code, errs)
	}
	st := decode(out)
	if len(st) != 1 || st[0].State != "open" || !st[0].Shared.Forced || st[0].Shared.Reason != "partner maintenance" || st[0].Shared.By != "floodgate-cli" {
		t.Fatalf("after open: %+v", st)
	}
	natstest.Eventually(t, 3*time.Second, func() bool { return b.State() == breaker.StateOpen && b.Snapshot().Forced },
		"replica not forced open")

	out, errs, code = cli("status")
	if code != exitOK || !strings.Contains(out, "partner") || !strings.Contains(out, "open") || !strings.Contains(out, "partner maintenance") {
		t.Fatalf("status: exit %d, out %q, err %q", code, out, errs)
	}

	if _, errs, code = cli("close", "-breaker", "partner"); code != exitOK {
		t.Fatalf("close: exit %d: %s", code, errs)
	}
	natstest.Eventually(t, 3*time.Second, func() bool { return b.State() == breaker.StateClosed && !b.Snapshot().Forced },
		"replica not closed")

	// A trip of the replica shows in status, and reset puts the ladder back.
	for range 20 {
		if p, err := b.Allow(); err == nil {
			p.Record(breaker.OutcomeFailure, time.Millisecond)
		}
	}
	natstest.Eventually(t, 3*time.Second, func() bool {
		out, _, _ := cli("status", "-breaker", "partner", "-format", "json")
		st := decode(out)
		return len(st) == 1 && st[0].Shared.Trips == 1 && st[0].Shared.By == "r1"
	}, "trip not in status")
	out, errs, code = cli("reset", "-breaker", "partner", "-format", "json")
	if st := decode(out); code != exitOK || st[0].State != "closed" || st[0].Shared.Trips != 0 {
		t.Fatalf("reset: exit %d %s: %+v", code, errs, st)
	}
	natstest.Eventually(t, 3*time.Second, func() bool {
		s := b.Snapshot()
		return s.State == breaker.StateClosed && s.ConsecutiveTrips == 0
	}, "replica not reset")
}

func TestFleetCommandsUsage(t *testing.T) {
	for _, args := range [][]string{
		{"status"},
		{"open", "-nats-url", "nats://127.0.0.1:1"},
		{"reset", "-nats-url", "nats://127.0.0.1:1", "-breaker", "x", "-format", "xml"},
	} {
		var out, errb bytes.Buffer
		if code := run(args, &out, &errb); code != exitUsage {
			t.Errorf("%v: exit %d, want %d (%s)", args, code, exitUsage, errb.String())
		}
	}
}
