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

// fleetCLI starts a replica of the breaker "partner" in this process,
// joined to a fresh fleet bucket, and returns it, the bucket's store, and
// a cli that runs the floodgate command against that bucket (stdout,
// stderr, exit status).
func fleetCLI(t *testing.T) (*breaker.Breaker, *natskv.Store, func(args ...string) (string, string, int)) {
	t.Helper()
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
	b, err := breaker.New(breaker.Config{Name: "partner"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Stop)
	f, err := breaker.JoinFleet(b, breaker.FleetConfig{Store: s, Replica: "r1", ResyncInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Leave)
	return b, s, func(args ...string) (string, string, int) {
		var out, errb bytes.Buffer
		code := run(append(args, "-nats-url", url, "-bucket", bucket), &out, &errb)
		return out.String(), errb.String(), code
	}
}

func TestFleetCommands(t *testing.T) {
	// A replica of the fleet, in this process.
	b, s, cli := fleetCLI(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	decode := func(out string) []breakerStatus {
		t.Helper()
		var st []breakerStatus
		if err := json.Unmarshal([]byte(out), &st); err != nil {
			t.Fatalf("output %q: %v", out, err)
		}
		return st
	}

	// Joined, never tripped: no shared state, and the message does not
	// claim that no replica joined (issue 15).
	out, errs, code := cli("status", "-breaker", "partner")
	if code != exitError || strings.Contains(errs, "no replica has joined") || !strings.Contains(errs, "never tripped") {
		t.Errorf("status of a joined breaker that never tripped: exit %d, err %q", code, errs)
	}

	// A write to a breaker with no shared state and no messages on its
	// route is refused (a misspelt name looks the same) and writes nothing.
	out, errs, code = cli("open", "-breaker", "partner", "-reason", "partner maintenance", "-format", "json")
	if code != exitError || out != "" || !strings.Contains(errs, "-create") || !strings.Contains(errs, "nothing written") {
		t.Fatalf("open of a breaker with no shared state: exit %d, out %q, err %q", code, out, errs)
	}
	if _, rev, err := s.Load(ctx, "partner"); err != nil || rev != 0 {
		t.Fatalf("refused open wrote the state: rev %d, %v", rev, err)
	}
	out, errs, code = cli("open", "-breaker", "partner", "-reason", "partner maintenance", "-format", "json", "-create")
	if code != exitOK {
		t.Fatalf("open: exit %d: %s", code, errs)
	}
	st := decode(out)
	if len(st) != 1 || st[0].State != "open" || !st[0].Forced || st[0].Reason != "partner maintenance" || st[0].UpdatedBy != "floodgate-cli" {
		t.Fatalf("after open: %+v", st)
	}
	natstest.Eventually(t, 30*time.Second, func() bool { return b.State() == breaker.StateOpen && b.Snapshot().Forced },
		"replica not forced open")

	out, errs, code = cli("status")
	if code != exitOK || !strings.Contains(out, "partner") || !strings.Contains(out, "open") || !strings.Contains(out, "partner maintenance") {
		t.Fatalf("status: exit %d, out %q, err %q", code, out, errs)
	}

	if _, errs, code = cli("close", "-breaker", "partner"); code != exitOK {
		t.Fatalf("close: exit %d: %s", code, errs)
	}
	natstest.Eventually(t, 30*time.Second, func() bool { return b.State() == breaker.StateClosed && !b.Snapshot().Forced },
		"replica not closed")

	// A trip of the replica shows in status, and reset puts the ladder back.
	for range 20 {
		if p, err := b.Allow(); err == nil {
			p.Record(breaker.OutcomeFailure, time.Millisecond)
		}
	}
	natstest.Eventually(t, 30*time.Second, func() bool {
		out, _, _ := cli("status", "-breaker", "partner", "-format", "json")
		st := decode(out)
		return len(st) == 1 && st[0].ConsecutiveTrips == 1 && st[0].UpdatedBy == "r1"
	}, "trip not in status")
	out, errs, code = cli("reset", "-breaker", "partner", "-format", "json")
	if st := decode(out); code != exitOK || st[0].State != "closed" || st[0].ConsecutiveTrips != 0 {
		t.Fatalf("reset: exit %d %s: %+v", code, errs, st)
	}
	natstest.Eventually(t, 30*time.Second, func() bool {
		s := b.Snapshot()
		return s.State == breaker.StateClosed && s.ConsecutiveTrips == 0
	}, "replica not reset")
}

func TestFleetCommandsUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		flag string
	}{
		{[]string{"open", "-nats-url", "nats://127.0.0.1:1"}, "-breaker"},
		{[]string{"reset", "-nats-url", "nats://127.0.0.1:1", "-breaker", "x", "-format", "xml"}, "-format"},
		// A name natskv cannot store is a bad flag, found before
		// connecting (and before open creates a bucket).
		{[]string{"open", "-nats-url", "nats://127.0.0.1:1", "-breaker", "edi.orders.partner"}, "-breaker"},
		{[]string{"open", "-nats-url", "nats://127.0.0.1:1", "-service", "orders/as2"}, "-partner"},
		{[]string{"close", "-nats-url", "nats://127.0.0.1:1", "-partner", "ACME"}, "-service"},
		{[]string{"reset", "-nats-url", "nats://127.0.0.1:1", "-breaker", "x", "-partner", "ACME"}, "-breaker"},
		{[]string{"status", "-nats-url", "nats://127.0.0.1:1", "-retry-topic", "a b"}, "-retry-topic"},
		{[]string{"status", "-nats-url", "nats://127.0.0.1:1", "-breaker", "two words"}, "-breaker"},
		{[]string{"status", "-nats-url", "nats://127.0.0.1:1", "-bucket", "a.b"}, "-bucket"},
	} {
		var out, errb bytes.Buffer
		if code := run(tc.args, &out, &errb); code != exitUsage || !strings.Contains(errb.String(), tc.flag) {
			t.Errorf("%v: exit %d, want %d naming %s (%s)", tc.args, code, exitUsage, tc.flag, errb.String())
		}
	}
}

// TestFleetCommandsWithoutState: status of a breaker no replica has joined
// (or of a bucket no replica has created) is an error that says so; open,
// close and reset of one work (creating the bucket if needed) with a note
// that makes a misspelt name visible, and a replica that joins later
// starts from the state written.
func TestFleetCommandsWithoutState(t *testing.T) {
	url := natstest.URL(t)
	js := natstest.JetStream(t, natstest.Conn(t, url))
	bucket := natstest.Name(t, "kv")
	t.Cleanup(func() { _ = js.DeleteKeyValue(context.Background(), bucket) })
	cli := func(args ...string) (string, string, int) {
		var out, errb bytes.Buffer
		code := run(append(args, "-nats-url", url, "-bucket", bucket), &out, &errb)
		return out.String(), errb.String(), code
	}

	// No bucket yet.
	out, errs, code := cli("status", "-breaker", "partner")
	if code != exitError || out != "" || !strings.Contains(errs, "partner: no shared state: it never tripped") ||
		!strings.Contains(errs, "bucket "+bucket+" does not exist") {
		t.Errorf("status -breaker before any bucket: exit %d, out %q, err %q", code, out, errs)
	}
	out, errs, code = cli("status")
	if code != exitError || out != "" || !strings.Contains(errs, "bucket "+bucket+" does not exist") || strings.Contains(errs, "nats:") {
		t.Errorf("status before any bucket: exit %d, out %q, err %q", code, out, errs)
	}

	// Without -create a write of an unknown name is refused, and the
	// bucket is not created.
	out, errs, code = cli("open", "-breaker", "partner", "-format", "json")
	if code != exitError || out != "" || !strings.Contains(errs, `breaker "partner" has no shared state`) || !strings.Contains(errs, "-create") {
		t.Fatalf("open without -create before any bucket: exit %d, out %q, err %q", code, out, errs)
	}
	if _, err := js.KeyValue(context.Background(), bucket); err == nil {
		t.Fatal("a refused open created the bucket")
	}

	// An operator isolates a partner before the first deploy.
	out, errs, code = cli("open", "-breaker", "partner", "-format", "json", "-create")
	if code != exitOK || !strings.Contains(errs, "bucket "+bucket+" did not exist; created it") ||
		!strings.Contains(errs, `breaker "partner" had no shared state`) {
		t.Fatalf("open before any bucket: exit %d, out %q, err %q", code, out, errs)
	}
	var st []breakerStatus
	if err := json.Unmarshal([]byte(out), &st); err != nil || len(st) != 1 || st[0].State != "open" || !st[0].Forced {
		t.Fatalf("open before any bucket: %+v, %v", st, err)
	}
	if _, err := js.KeyValue(context.Background(), bucket); err != nil {
		t.Fatalf("bucket not created: %v", err)
	}

	// The bucket exists now; another name is still unknown.
	out, errs, code = cli("status", "-breaker", "nosuch")
	if code != exitError || out != "" || !strings.Contains(errs, "nosuch: no shared state: it never tripped") ||
		strings.Contains(errs, "does not exist") {
		t.Errorf("status -breaker nosuch: exit %d, out %q, err %q", code, out, errs)
	}
	_, errs, code = cli("close", "-breaker", "nosuch")
	if code != exitError || !strings.Contains(errs, "-create") {
		t.Errorf("close -breaker nosuch without -create: exit %d, err %q", code, errs)
	}
	_, errs, code = cli("close", "-breaker", "nosuch", "-create")
	if code != exitOK || !strings.Contains(errs, `breaker "nosuch" had no shared state`) || strings.Contains(errs, "created it") {
		t.Errorf("close -breaker nosuch: exit %d, err %q", code, errs)
	}
	// Once it has a state, status shows it without a note.
	out, errs, code = cli("status", "-breaker", "nosuch")
	if code != exitOK || errs != "" || !strings.Contains(out, "nosuch") || !strings.Contains(out, "closed") {
		t.Errorf("status after close: exit %d, out %q, err %q", code, out, errs)
	}

	// A replica that joins starts forced open; later writes have no note.
	s, err := natskv.New(context.Background(), js, natskv.Config{Bucket: bucket})
	if err != nil {
		t.Fatal(err)
	}
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
	natstest.Eventually(t, 30*time.Second, func() bool { return b.State() == breaker.StateOpen && b.Snapshot().Forced },
		"replica that joined after open is not forced open")
	_, errs, code = cli("reset", "-breaker", "partner")
	if code != exitOK || strings.Contains(errs, "note") {
		t.Errorf("reset of a joined breaker: exit %d, err %q", code, errs)
	}
	natstest.Eventually(t, 30*time.Second, func() bool { return b.State() == breaker.StateClosed }, "replica not reset")
}
