package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/breaker/natskv"
	"github.com/floodgate-go/floodgate/internal/natstest"
	"github.com/floodgate-go/floodgate/partner"
	"github.com/floodgate-go/floodgate/retryqueue"
)

// TestPartnerCommands: two services' registries join their partners'
// breakers to one bucket (the partner "ACME.EU" in both). status lists the
// partners, of one service or all, with state and backlog; open, close and
// reset with -service and -partner reach exactly that partner's breaker in
// that service, and leave the other service's breaker of the same partner
// alone.
func TestPartnerCommands(t *testing.T) {
	url := natstest.URL(t)
	js := natstest.JetStream(t, natstest.Conn(t, url))
	bucket, retry, dead := natstest.Name(t, "kv"), natstest.Name(t, "retry"), natstest.Name(t, "dead")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := natskv.New(ctx, js, natskv.Config{Bucket: bucket})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = js.DeleteKeyValue(context.Background(), bucket) })
	for _, st := range []string{retry, dead} {
		if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: st, Subjects: []string{st + ".>"}}); err != nil {
			t.Fatal(err)
		}
	}
	natstest.DeleteStreams(t, js, retry, dead)
	// Three messages wait for ACME.EU of orders/as2, one is dead.
	for i := range 3 {
		if _, err := js.Publish(ctx, retryqueue.RouteSubject(retry, "orders/as2", "ACME.EU"), []byte(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := js.Publish(ctx, retryqueue.RouteSubject(dead, "orders/as2", "ACME.EU"), []byte("x")); err != nil {
		t.Fatal(err)
	}

	regs := map[string]*partner.Registry{}
	for _, svc := range []string{"orders/as2", "invoices/webhook"} {
		r, err := partner.New(partner.Config{Fleet: &partner.FleetConfig{Service: svc, Template: breaker.FleetConfig{Store: s, Replica: "r1"}}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(r.Close)
		for _, k := range []string{"ACME.EU", "globex"} {
			if _, err := r.Get(k); err != nil {
				t.Fatal(err)
			}
		}
		regs[svc] = r
	}
	brk := func(svc, key string) *breaker.Breaker {
		p, ok := regs[svc].Lookup(key)
		if !ok {
			t.Fatalf("%s/%s not held", svc, key)
		}
		return p.Breaker()
	}

	cli := func(args ...string) (string, string, int) {
		var out, errb bytes.Buffer
		code := run(append(args, "-nats-url", url, "-bucket", bucket), &out, &errb)
		return out.String(), errb.String(), code
	}
	status := func(args ...string) []breakerStatus {
		t.Helper()
		args = append([]string{"status", "-format", "json", "-retry-topic", retry, "-dead-topic", dead}, args...)
		out, errs, code := cli(args...)
		var st []breakerStatus
		if code != exitOK || json.Unmarshal([]byte(out), &st) != nil {
			t.Fatalf("%v: exit %d, out %q, err %q", args, code, out, errs)
		}
		return st
	}

	// A partner is listed once its breaker has a shared state or its
	// route holds messages: globex of invoices/webhook trips; ACME.EU of
	// orders/as2 has a backlog, and the others have neither.
	b := brk("invoices/webhook", "globex")
	for b.State() == breaker.StateClosed {
		if p, err := b.Allow(); err == nil {
			p.Done(fmt.Errorf("boom"))
		}
	}
	// The trip reaches the shared store asynchronously: until then status
	// answers "no shared state" (exit 1), which is not yet a failure.
	natstest.Eventually(t, 30*time.Second, func() bool {
		out, _, code := cli("status", "-format", "json", "-retry-topic", retry, "-dead-topic", dead, "-service", "invoices/webhook", "-partner", "globex")
		var st []breakerStatus
		return code == exitOK && json.Unmarshal([]byte(out), &st) == nil &&
			len(st) == 1 && st[0].ConsecutiveTrips == 1 && st[0].State == "open"
	}, "trip of globex not published")
	all := status()
	if len(all) != 2 {
		t.Fatalf("status lists %+v, want 2 partners", all)
	}
	st := status("-service", "orders/as2")
	if len(st) != 1 || st[0].State != "unknown" {
		t.Fatalf("status -service orders/as2 lists %+v, want ACME.EU with no shared state", st)
	}
	var acme *breakerStatus
	for i := range st {
		if st[i].Service != "orders/as2" {
			t.Fatalf("service %q in a listing of orders/as2", st[i].Service)
		}
		if st[i].Partner == "ACME.EU" {
			acme = &st[i]
		}
	}
	if acme == nil || acme.Backlog != 3 || acme.DeadLetters != 1 || acme.Breaker != partner.FleetName("orders/as2", "ACME.EU") {
		t.Fatalf("ACME.EU of orders/as2: %+v, want closed with a backlog of 3 and 1 dead letter", acme)
	}
	if st := status("-partner", "globex"); len(st) != 1 || st[0].Service != "invoices/webhook" {
		t.Fatalf("status -partner globex lists %+v, want it in invoices/webhook", st)
	}
	out, _, code := cli("status", "-service", "orders/as2", "-retry-topic", retry, "-dead-topic", dead)
	if code != exitOK || !strings.Contains(out, "SERVICE") || !strings.Contains(out, `"ACME.EU"`) || !strings.Contains(out, "orders/as2") {
		t.Fatalf("status table: exit %d, %q", code, out)
	}

	// open isolates ACME.EU in orders/as2 only.
	// Its breaker never tripped: no shared state yet, which the note says.
	// Its route holds messages, so the write needs no -create, and the
	// output counts them as status does.
	out, errs, code := cli("open", "-service", "orders/as2", "-partner", "ACME.EU", "-format", "json",
		"-retry-topic", retry, "-dead-topic", dead)
	if code != exitOK || !strings.Contains(errs, "never tripped") {
		t.Fatalf("open: exit %d, err %q", code, errs)
	}
	var opened []breakerStatus
	if err := json.Unmarshal([]byte(out), &opened); err != nil || len(opened) != 1 || opened[0].Backlog != 3 || opened[0].DeadLetters != 1 {
		t.Fatalf("open -format json: %+v (%v), want backlog 3 and 1 dead letter as in status", opened, err)
	}
	// A misspelt service has no shared state and no messages: refused.
	if out, errs, code := cli("open", "-service", "orders/send-order", "-partner", "ACME.EU",
		"-retry-topic", retry, "-dead-topic", dead); code != exitError || out != "" || !strings.Contains(errs, "-create") {
		t.Fatalf("open of a misspelt service: exit %d, out %q, err %q", code, out, errs)
	}
	if st := status("-service", "orders/send-order"); len(st) != 0 {
		t.Fatalf("a refused open left a state: %+v", st)
	}
	natstest.Eventually(t, 10*time.Second, func() bool { return brk("orders/as2", "ACME.EU").State() == breaker.StateOpen },
		"orders/as2 ACME.EU not forced open")
	for _, o := range [][2]string{{"invoices/webhook", "ACME.EU"}, {"orders/as2", "globex"}} {
		if b := brk(o[0], o[1]); b.State() != breaker.StateClosed {
			t.Fatalf("%s %s is %v after opening another partner", o[0], o[1], b.State())
		}
	}
	if st := status("-service", "orders/as2", "-partner", "ACME.EU"); len(st) != 1 || st[0].State != "open" || !st[0].Forced {
		t.Fatalf("status after open: %+v", st)
	}
	if _, errs, code := cli("close", "-service", "orders/as2", "-partner", "ACME.EU"); code != exitOK || errs != "" {
		t.Fatalf("close: exit %d, err %q", code, errs)
	}
	natstest.Eventually(t, 10*time.Second, func() bool { return brk("orders/as2", "ACME.EU").State() == breaker.StateClosed },
		"orders/as2 ACME.EU not closed")
	if st := status("-partner", "ACME.EU"); len(st) != 1 || st[0].Service != "orders/as2" || st[0].State != "closed" {
		t.Fatalf("status -partner ACME.EU lists %+v, want it closed in orders/as2 only", st)
	}
	// reset of the tripped partner brings its ladder back to base.
	if _, errs, code := cli("reset", "-service", "invoices/webhook", "-partner", "globex"); code != exitOK || errs != "" {
		t.Fatalf("reset: exit %d, err %q", code, errs)
	}
	natstest.Eventually(t, 10*time.Second, func() bool {
		s := b.Snapshot()
		return s.State == breaker.StateClosed && s.ConsecutiveTrips == 0
	}, "globex not reset")
}

// Without a fleet (no KV bucket) status still lists the routes that hold
// messages, with state "-", and exits 0.
func TestStatusWithoutFleetListsRoutes(t *testing.T) {
	url := natstest.URL(t)
	js := natstest.JetStream(t, natstest.Conn(t, url))
	bucket, retry, dead := natstest.Name(t, "kv"), natstest.Name(t, "retry"), natstest.Name(t, "dead")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, st := range []string{retry, dead} {
		if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: st, Subjects: []string{st + ".>"}}); err != nil {
			t.Fatal(err)
		}
	}
	natstest.DeleteStreams(t, js, retry, dead)
	for i := range 2 {
		if _, err := js.Publish(ctx, retryqueue.RouteSubject(retry, "orders/as2", "ACME.EU"), []byte(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	var out, errb bytes.Buffer
	code := run([]string{"status", "-nats-url", url, "-bucket", bucket, "-retry-topic", retry, "-dead-topic", dead, "-format", "json"}, &out, &errb)
	if code != exitOK {
		t.Fatalf("status without a bucket: exit %d, err %q", code, errb.String())
	}
	var got []struct {
		Service, Partner, State string
		Backlog                 uint64
	}
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	if len(got) != 1 || got[0].Service != "orders/as2" || got[0].Partner != "ACME.EU" || got[0].State != "unknown" || got[0].Backlog != 2 {
		t.Fatalf("status without a bucket: %+v, want orders/as2 ACME.EU state - backlog 2", got)
	}
	if !strings.Contains(errb.String(), "only routes with messages are listed") {
		t.Errorf("stderr %q does not say the breakers are not shared", errb.String())
	}
}
