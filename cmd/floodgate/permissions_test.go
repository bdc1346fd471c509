package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/breaker/natskv"
	"github.com/floodgate-go/floodgate/internal/natsconn"
	"github.com/floodgate-go/floodgate/internal/natsserver"
	"github.com/floodgate-go/floodgate/internal/natstest"
	"github.com/floodgate-go/floodgate/internal/tlstest"
	"github.com/floodgate-go/floodgate/jsq"
	"github.com/floodgate-go/floodgate/middleware"
	"github.com/floodgate-go/floodgate/partner"
	"github.com/floodgate-go/floodgate/permissions"
	"github.com/floodgate-go/floodgate/retryqueue"
)

// testPKI makes a CA and a server certificate for 127.0.0.1 signed by it
// (internal/tlstest). It returns the CA's PEM file and the server's TLS
// configuration.
func testPKI(t *testing.T) (caFile string, srv *tls.Config) {
	t.Helper()
	pki := tlstest.New(t, "floodgate test CA")
	return pki.Files.CA, pki.ServerConfig(false)
}

// serverPerms converts a generated set to the embedded server's.
func serverPerms(t *testing.T, cfg permissions.Config) *server.Permissions {
	t.Helper()
	s, err := permissions.Generate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	sp := func(r permissions.Rules) *server.SubjectPermission {
		return &server.SubjectPermission{Allow: r.Allow, Deny: r.Deny}
	}
	return &server.Permissions{Publish: sp(s.Publish), Subscribe: sp(s.Subscribe)}
}

// violations collects a connection's asynchronous permission violations.
type violations struct {
	mu   sync.Mutex
	seen []string
}

func (v *violations) handler(_ *nats.Conn, _ *nats.Subscription, err error) {
	if errors.Is(err, nats.ErrPermissionViolation) {
		v.mu.Lock()
		v.seen = append(v.seen, err.Error())
		v.mu.Unlock()
	}
}

// has reports whether a violation names subject exactly (quoted).
func (v *violations) has(subject string) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, s := range v.seen {
		if strings.Contains(s, fmt.Sprintf("%q", subject)) {
			return true
		}
	}
	return false
}

// TestPermissionsUnderTLS runs a service's outage, diversion, drain and
// close on a TLS server whose users have only the generated permissions,
// and checks that another service's user and a read-only operator are
// denied the service's retry messages, dead letters and breaker keys.
func TestPermissionsUnderTLS(t *testing.T) {
	const (
		svcA, svcB = "orders/as2", "invoices/webhook"
		key        = "acme"
		n          = 20
	)
	ownA := permissions.Config{Service: svcA, RetryTopic: "retry_a", DeadLetterTopic: "dead_a", FleetBucket: "brk_a"}
	ownB := permissions.Config{Service: svcB, RetryTopic: "retry_b", DeadLetterTopic: "dead_b", FleetBucket: "brk_b"}
	role := func(c permissions.Config, r permissions.Role) permissions.Config { c.Role = r; return c }
	caFile, tlsCfg := testPKI(t)
	srv, err := natsserver.Start(natsserver.Options{TLS: tlsCfg, Users: []*server.User{
		{Username: "a", Password: "pa", Permissions: serverPerms(t, role(ownA, permissions.RoleService))},
		{Username: "b", Password: "pb", Permissions: serverPerms(t, role(ownB, permissions.RoleService))},
		{Username: "ro", Password: "pro", Permissions: serverPerms(t, role(ownA, permissions.RoleReadOnly))},
		{Username: "rw", Password: "prw", Permissions: serverPerms(t, role(ownA, permissions.RoleReadWrite))},
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	url := srv.ClientURL()
	connect := func(user, pass string, opts ...nats.Option) (*nats.Conn, jetstream.JetStream, *violations) {
		t.Helper()
		v := &violations{}
		nc, err := nats.Connect(url, append(opts, nats.UserInfo(user, pass), nats.RootCAs(caFile), nats.ErrorHandler(v.handler))...)
		if err != nil {
			t.Fatalf("connect %s: %v", user, err)
		}
		t.Cleanup(nc.Close)
		js, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		return nc, js, v
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second) // hang guard
	defer cancel()

	// Service A, with its generated user and inbox prefix.
	// Service A connects through the library's connection helper, with
	// its inbox prefix.
	vA := &violations{}
	ncA, err := natsconn.Options{Server: url, User: "a", Password: "pa", TLSCA: caFile, InboxPrefix: permissions.InboxPrefix(svcA)}.Connect("svc-a", nats.ErrorHandler(vA.handler))
	if err != nil {
		t.Fatal(err)
	}
	defer ncA.Close()
	jsA, err := jetstream.New(ncA)
	if err != nil {
		t.Fatal(err)
	}
	q := queueAs(t, ctx, jsA, ownA, key)
	store, err := natskv.New(ctx, jsA, natskv.Config{Bucket: ownA.FleetBucket})
	if err != nil {
		t.Fatalf("fleet store under A's permissions: %v", err)
	}
	b, err := breaker.New(breaker.Config{Name: key, WindowSize: 4, MinimumCalls: 2, BaseOpenWindow: 100 * time.Millisecond, DisableJitter: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Stop()
	fleetName := partner.FleetName(svcA, key)
	fl, err := breaker.JoinFleet(b, breaker.FleetConfig{Store: store, Replica: "r1", Name: fleetName, ResyncInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer fl.Leave()

	// Outage: every delivery fails, the breaker trips (shared state in
	// A's bucket), and the messages are diverted.
	errDown := errors.New("partner down")
	var ids []string
	for i := 0; i < n; i++ {
		m := message.NewMessage(watermill.NewUUID(), []byte(fmt.Sprintf("po-%d", i)))
		ids = append(ids, m.UUID)
		reason := retryqueue.ReasonOpen
		if p, err := b.Allow(); err == nil {
			p.Done(errDown)
			reason = retryqueue.ReasonFailure
		}
		if err := q.Divert(ctx, m, reason, errDown); err != nil {
			t.Fatalf("divert under A's permissions: %v", err)
		}
	}
	natstest.Eventually(t, 10*time.Second, func() bool {
		st, _, err := store.Load(ctx, fleetName)
		return err == nil && st.State != breaker.StateClosed
	}, "the trip never reached A's bucket")
	dead := message.NewMessage(watermill.NewUUID(), []byte("malformed"))
	if err := q.DeadLetter(ctx, dead, retryqueue.DeadReasonMalformed, errors.New("bad payload")); err != nil {
		t.Fatalf("dead letter under A's permissions: %v", err)
	}

	// Another service and the read-only operator are denied A's retry
	// messages, dead letters and keys; a permission violation names each
	// subject.
	ncB, _, vB := connect("b", "pb", permissions.InboxOption(svcB))
	ncRO, _, vRO := connect("ro", "pro")
	cons := retryqueue.ConsumerName(svcA, key)
	kvKey := "$KV." + ownA.FleetBucket + "." + fleetName + ".state"
	denied := map[*nats.Conn][]string{
		ncB: {
			"$JS.API.STREAM.MSG.GET.retry_a", "$JS.API.DIRECT.GET.retry_a", "$JS.API.CONSUMER.MSG.NEXT.retry_a." + cons,
			"$JS.API.STREAM.INFO.retry_a", "$JS.API.CONSUMER.CREATE.retry_a.x.retry_a.>",
			"$JS.API.STREAM.MSG.GET.dead_a", "$JS.API.DIRECT.GET.dead_a", "$JS.API.CONSUMER.CREATE.dead_a.x.dead_a.>",
			kvKey, "$JS.API.DIRECT.GET.KV_brk_a.$KV.brk_a." + fleetName + ".state", "$JS.API.STREAM.MSG.GET.KV_brk_a",
			retryqueue.RouteSubject("retry_a", svcA, key),
		},
		ncRO: {
			"$JS.API.CONSUMER.MSG.NEXT.retry_a." + cons, "$JS.ACK.retry_a.x", "$JS.API.STREAM.MSG.DELETE.retry_a",
			"$JS.API.STREAM.PURGE.dead_a", "$JS.API.STREAM.MSG.DELETE.dead_a", kvKey,
			retryqueue.RouteSubject("retry_a", svcA, key),
		},
	}
	vs := map[*nats.Conn]*violations{ncB: vB, ncRO: vRO}
	inboxA := permissions.InboxPrefix(svcA) + ".>"
	for nc, subjects := range denied {
		for _, s := range subjects {
			if err := nc.Publish(s, nil); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := nc.SubscribeSync(inboxA); err != nil {
			t.Fatal(err)
		}
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	for nc, subjects := range denied {
		v := vs[nc]
		for _, s := range subjects {
			natstest.Eventually(t, 30*time.Second, func() bool { return v.has(s) }, "%s: no permission violation for publish to %q", nc.Opts.User, s)
		}
		natstest.Eventually(t, 30*time.Second, func() bool { return v.has(inboxA) }, "%s: no permission violation for subscription to A's inbox", nc.Opts.User)
	}

	// The read-only operator runs status and backlog, and cannot purge,
	// replay or open.
	cli := func(user, pass string, args ...string) (string, int) {
		var out, errb bytes.Buffer
		code := run(append(args, "-server", url, "-user", user, "-password", pass, "-tlsca", caFile), &out, &errb)
		return out.String() + errb.String(), code
	}
	streams := []string{"-retry-topic", "retry_a", "-dead-topic", "dead_a"}
	if out, code := cli("ro", "pro", append([]string{"status", "-bucket", "brk_a", "-service", svcA}, streams...)...); code != exitOK {
		t.Errorf("ro status: exit %d: %s", code, out)
	}
	if out, code := cli("ro", "pro", append([]string{"backlog"}, streams...)...); code != exitOK || !strings.Contains(out, "retry_a") {
		t.Errorf("ro backlog: exit %d: %s", code, out)
	}
	// Each is refused by the server's permission violation for its first
	// write, which the command reports at once; the timeout is a hang
	// guard only (a command that waited for it fails the test).
	var wg sync.WaitGroup
	for _, c := range []struct {
		args   []string
		denied string // the denied subject, or its prefix ending in '.'
	}{
		{append([]string{"purge", "-yes", "-timeout", "60s"}, streams...), "$JS.API.STREAM.PURGE.dead_a"},
		{append([]string{"replay", "-timeout", "60s"}, streams...), "$JS.API.CONSUMER.CREATE.dead_a."},
		{append([]string{"open", "-bucket", "brk_a", "-service", svcA, "-partner", key, "-timeout", "60s"}, streams...), kvKey},
	} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, code := cli("ro", "pro", c.args...)
			if code == exitOK || !deniedOutput(out, c.denied) {
				t.Errorf("ro %s: exit %d, want a refusal naming the denied subject %q: %s", c.args[0], code, c.denied, out)
			}
		}()
	}
	wg.Wait()

	// Recovery: the drainer, under A's permissions, delivers the backlog
	// through the breaker's probes until it closes.
	var mu sync.Mutex
	delivered := map[string]bool{}
	d, err := retryqueue.NewDrainer(retryqueue.DrainerConfig{
		JetStream: jsA, Queue: q, Stream: ownA.RetryTopic, Gate: middleware.DrainGate(b),
		PollInterval: 20 * time.Millisecond,
		Handler: func(m *message.Message) ([]*message.Message, error) {
			p, err := b.Allow()
			if err != nil {
				return nil, err
			}
			mu.Lock()
			delivered[m.UUID] = true
			mu.Unlock()
			p.Done(nil)
			return nil, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	dctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- d.Run(dctx) }()
	natstest.Eventually(t, 30*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(delivered) == n
	}, "drain under A's permissions did not deliver every message")
	natstest.Eventually(t, 10*time.Second, func() bool {
		depth, err := retryqueue.Depth(ctx, jsA, ownA.RetryTopic, d.Consumer())
		st, _, lerr := store.Load(ctx, fleetName)
		return err == nil && depth == 0 && lerr == nil && st.State == breaker.StateClosed
	}, "backlog not empty or the shared breaker not closed")
	stop()
	<-done
	lost := 0
	for _, id := range ids {
		if !delivered[id] {
			lost++
		}
	}
	if lost != 0 {
		t.Errorf("%d of %d messages lost", lost, n)
	}
	vA.mu.Lock()
	if len(vA.seen) > 0 {
		t.Errorf("service A met permission violations (the generator misses a subject): %q", vA.seen)
	}
	vA.mu.Unlock()

	// The read-write operator can open the breaker and purge dead letters.
	if out, code := cli("rw", "prw", append([]string{"open", "-bucket", "brk_a", "-service", svcA, "-partner", key, "-reason", "maintenance"}, streams...)...); code != exitOK {
		t.Errorf("rw open: exit %d: %s", code, out)
	}
	if out, code := cli("rw", "prw", append([]string{"purge", "-yes"}, streams...)...); code != exitOK {
		t.Errorf("rw purge: exit %d: %s", code, out)
	}
}

// deniedOutput reports whether a command's output says the server refused
// a publish to subject (a subject ending in '.' is a prefix), as a
// *deniedError prints it, not a timeout.
func deniedOutput(out, subject string) bool {
	q := strconv.Quote(subject)
	if strings.HasSuffix(subject, ".") {
		q = strings.TrimSuffix(q, `"`)
	}
	return strings.Contains(out, errDenied.Error()+" (permission violation for publish to "+q) && !strings.Contains(out, "deadline exceeded")
}

func TestPermissionsCommand(t *testing.T) {
	var out, errb bytes.Buffer
	code := run([]string{"permissions", "-service", "orders/as2", "-role", "service", "-retry-topic", "retry_o", "-dead-topic", "dead_o", "-bucket", "brk_o", "-format", "json"}, &out, &errb)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var set permissions.Set
	if err := json.Unmarshal(out.Bytes(), &set); err != nil {
		t.Fatal(err)
	}
	want := []string{retryqueue.ServiceRoutes("retry_o", "orders/as2"), "$KV.brk_o.>", "$JS.API.CONSUMER.MSG.NEXT.retry_o.*"}
	for _, w := range want {
		if !slices.Contains(set.Publish.Allow, w) {
			t.Errorf("publish allow lacks %q: %q", w, set.Publish.Allow)
		}
	}
	if got := set.Subscribe.Allow; len(got) != 1 || got[0] != permissions.InboxPrefix("orders/as2")+".>" {
		t.Errorf("subscribe allow %q, want only the service's inbox", got)
	}
	for _, args := range [][]string{
		{"permissions", "-role", "admin"},
		{"permissions", "-role", "service", "-service", "s"}, // the shared default streams
		{"permissions", "-role", "ro", "-format", "yaml"},
	} {
		out.Reset()
		errb.Reset()
		if code := run(args, &out, &errb); code != exitUsage || errb.Len() == 0 {
			t.Errorf("%q: exit %d, stderr %q; want %d with a message", args, code, errb.String(), exitUsage)
		}
	}
	out.Reset()
	if code := run([]string{"permissions", "-role", "ro"}, &out, &errb); code != exitOK || !strings.Contains(out.String(), "permissions: {") || !strings.Contains(out.String(), `"_INBOX.>"`) {
		t.Errorf("ro nats-conf: exit %d: %s", code, out.String())
	}
}

// queueAs provisions and returns the retry queue of own's service for
// partner ("" for none) through js, a connection holding only what the
// generated permissions allow, publishing on it too.
func queueAs(t *testing.T, ctx context.Context, js jetstream.JetStream, own permissions.Config, partner string) *retryqueue.Queue {
	t.Helper()
	pub, err := jsq.NewPublisher(jsq.PublisherConfig{JetStream: js})
	if err != nil {
		t.Fatal(err)
	}
	cfg := retryqueue.Config{Publisher: pub, JetStream: js, Service: own.Service, Partner: partner, RetryTopic: own.RetryTopic, DeadLetterTopic: own.DeadLetterTopic}
	if err := retryqueue.Provision(ctx, js, cfg); err != nil {
		t.Fatalf("provision under %s's permissions: %v", own.Service, err)
	}
	q, err := retryqueue.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return q
}
