package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/floodgate-go/floodgate/breaker/natskv"
	"github.com/floodgate-go/floodgate/internal/natsconn"
	"github.com/floodgate-go/floodgate/internal/natsserver"
	"github.com/floodgate-go/floodgate/internal/natstest"
	"github.com/floodgate-go/floodgate/partner"
	"github.com/floodgate-go/floodgate/permissions"
	"github.com/floodgate-go/floodgate/retryqueue"
)

// hasPrefix reports whether a violation names a subject starting with p.
func (v *violations) hasPrefix(p string) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, s := range v.seen {
		if strings.Contains(s, `"`+p) {
			return true
		}
	}
	return false
}

// TestReadOnlyOperatorReadsNoMessage checks, on a TLS server whose users
// have only the generated permissions, that the read-only operator reads
// no retry message, dead letter or stored payload (by sequence, direct get
// or consumer: each denied with a permission violation naming the
// subject), still runs status and backlog (counts by route from stream
// info, the unavailable columns said), and cannot list dead letters,
// purge, replay or open; the read-write operator gets the full backlog and
// the dead letters.
func TestReadOnlyOperatorReadsNoMessage(t *testing.T) {
	const svc = "orders/as2"
	own := permissions.Config{Service: svc, RetryTopic: "retry_a", DeadLetterTopic: "dead_a", FleetBucket: "brk_a"}
	role := func(r permissions.Role) permissions.Config { c := own; c.Role = r; return c }
	caFile, tlsCfg := testPKI(t)
	srv, err := natsserver.Start(natsserver.Options{TLS: tlsCfg, Users: []*server.User{
		{Username: "a", Password: "pa", Permissions: serverPerms(t, role(permissions.RoleService))},
		{Username: "ro", Password: "pro", Permissions: serverPerms(t, role(permissions.RoleReadOnly))},
		{Username: "rw", Password: "prw", Permissions: serverPerms(t, role(permissions.RoleReadWrite))},
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	url := srv.ClientURL()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second) // hang guard
	defer cancel()

	// Service A, under its own permissions: 3 diverted for acme, 2 for
	// globex, 2 dead letters for acme, one stored payload, and its fleet
	// bucket.
	ncA, err := natsconn.Options{Server: url, User: "a", Password: "pa", TLSCA: caFile, InboxPrefix: permissions.InboxPrefix(svc)}.Connect("svc-a")
	if err != nil {
		t.Fatal(err)
	}
	defer ncA.Close()
	jsA, err := jetstream.New(ncA)
	if err != nil {
		t.Fatal(err)
	}
	acme, globex := queueAs(t, ctx, jsA, own, "acme"), queueAs(t, ctx, jsA, own, "globex")
	for q, n := range map[*retryqueue.Queue]int{acme: 3, globex: 2} {
		for i := 0; i < n; i++ {
			m := message.NewMessage(watermill.NewUUID(), []byte("purchase order"))
			if err := q.Divert(ctx, m, retryqueue.ReasonOpen, errors.New("partner down")); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i := 0; i < 2; i++ {
		m := message.NewMessage(watermill.NewUUID(), []byte("purchase order"))
		if err := acme.DeadLetter(ctx, m, retryqueue.DeadReasonMalformed, errors.New("bad payload")); err != nil {
			t.Fatal(err)
		}
	}
	const bucket = "dead_a_payloads"
	obs, err := jsA.ObjectStore(ctx, bucket)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := obs.PutBytes(ctx, "po-1", []byte("purchase order")); err != nil {
		t.Fatal(err)
	}
	if _, err := natskv.New(ctx, jsA, natskv.Config{Bucket: own.FleetBucket}); err != nil {
		t.Fatal(err)
	}

	// The read-only operator's reads of messages, each denied: a
	// permission violation names the subject.
	v := &violations{}
	ncRO, err := nats.Connect(url, nats.UserInfo("ro", "pro"), nats.RootCAs(caFile), nats.ErrorHandler(v.handler))
	if err != nil {
		t.Fatal(err)
	}
	defer ncRO.Close()
	jsRO, err := jetstream.New(ncRO)
	if err != nil {
		t.Fatal(err)
	}
	// Each attempt waits for a reply that never comes (a denied request
	// gets only the asynchronous violation), so they run at once, each
	// with a short timeout as a hang guard only.
	var attempts []func(context.Context) error
	var want, wantPrefix []string
	for _, s := range []string{own.RetryTopic, own.DeadLetterTopic, "OBJ_" + bucket} {
		st, err := jsRO.Stream(ctx, s) // stream info stays allowed
		if err != nil {
			t.Fatalf("ro stream info %s: %v", s, err)
		}
		if st.CachedInfo().Config.AllowDirect {
			want = append(want, "$JS.API.DIRECT.GET."+s)
		} else {
			want = append(want, "$JS.API.STREAM.MSG.GET."+s)
		}
		attempts = append(attempts,
			func(c context.Context) error { _, err := st.GetMsg(c, 1); return err },
			func(c context.Context) error {
				_, err := st.CreateOrUpdateConsumer(c, jetstream.ConsumerConfig{Name: "peek"})
				return err
			},
			func(c context.Context) error {
				cons, err := st.OrderedConsumer(c, jetstream.OrderedConsumerConfig{})
				if err != nil {
					return err
				}
				_, err = cons.Next(jetstream.FetchMaxWait(2 * time.Second))
				return err
			})
		want = append(want, "$JS.API.CONSUMER.CREATE."+s+".peek")
		wantPrefix = append(wantPrefix, "$JS.API.CONSUMER.CREATE."+s+".")
		for _, api := range []string{"$JS.API.STREAM.MSG.GET.", "$JS.API.DIRECT.GET."} {
			attempts = append(attempts, func(c context.Context) error {
				_, err := ncRO.RequestWithContext(c, api+s, []byte(`{"seq":1}`))
				return err
			})
			want = append(want, api+s)
		}
	}
	roObs, err := jsRO.ObjectStore(ctx, bucket)
	if err != nil {
		t.Fatalf("ro object store %s: %v", bucket, err)
	}
	attempts = append(attempts, func(c context.Context) error { _, err := roObs.GetBytes(c, "po-1"); return err })
	wantPrefix = append(wantPrefix, "$JS.API.DIRECT.GET.OBJ_"+bucket+".$O."+bucket+".M.")
	var wg sync.WaitGroup
	for i, a := range attempts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, stop := context.WithTimeout(ctx, 3*time.Second)
			defer stop()
			if err := a(c); err == nil {
				t.Errorf("ro read attempt %d succeeded", i)
			}
		}()
	}
	wg.Wait()
	for _, s := range want {
		natstest.Eventually(t, 30*time.Second, func() bool { return v.has(s) }, "ro: no permission violation for %q", s)
	}
	for _, p := range wantPrefix {
		natstest.Eventually(t, 30*time.Second, func() bool { return v.hasPrefix(p) }, "ro: no permission violation for a subject %q…", p)
	}

	cli := func(user, pass string, args ...string) (string, string, int) {
		var out, errb bytes.Buffer
		code := run(append(args, "-server", url, "-user", user, "-password", pass, "-tlsca", caFile), &out, &errb)
		return out.String(), errb.String(), code
	}
	streams := []string{"-retry-topic", own.RetryTopic, "-dead-topic", own.DeadLetterTopic}

	// status: the counts by route, from stream info.
	out, errOut, code := cli("ro", "pro", append([]string{"status", "-bucket", own.FleetBucket, "-format", "json"}, streams...)...)
	if code != exitOK {
		t.Fatalf("ro status: exit %d: %s%s", code, out, errOut)
	}
	var sts []breakerStatus
	if err := json.Unmarshal([]byte(out), &sts); err != nil {
		t.Fatalf("ro status: %v: %s", err, out)
	}
	got := map[string][2]uint64{}
	for _, s := range sts {
		got[s.Partner] = [2]uint64{s.Backlog, s.DeadLetters}
	}
	if w := map[string][2]uint64{"acme": {3, 2}, "globex": {2, 0}}; fmt.Sprint(got) != fmt.Sprint(w) {
		t.Errorf("ro status: backlog and dead letters by partner %v, want %v", got, w)
	}

	// backlog: counts by route; the original topics and ages unavailable,
	// said, because the server denied the message get (not a timeout).
	backlog := func(user, pass string) backlogReport {
		t.Helper()
		out, errOut, code := cli(user, pass, append([]string{"backlog", "-format", "json", "-timeout", "60s"}, streams...)...)
		if code != exitOK {
			t.Fatalf("%s backlog: exit %d: %s%s", user, code, out, errOut)
		}
		var rep backlogReport
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("%s backlog: %v: %s", user, err, out)
		}
		return rep
	}
	routes := func(d streamDepth) map[string]uint64 {
		m := map[string]uint64{}
		for _, r := range d.ByRoute {
			m[r.Service+" "+r.Partner] = r.Messages
		}
		return m
	}
	ro := backlog("ro", "pro")
	for _, c := range []struct {
		d      streamDepth
		n      uint64
		routes map[string]uint64
	}{
		{ro.Retry, 5, map[string]uint64{svc + " acme": 3, svc + " globex": 2}},
		{ro.Dead, 2, map[string]uint64{svc + " acme": 2}},
	} {
		if c.d.Messages != c.n || fmt.Sprint(routes(c.d)) != fmt.Sprint(c.routes) {
			t.Errorf("ro backlog %s: %d messages by route %v, want %d by %v", c.d.Stream, c.d.Messages, routes(c.d), c.n, c.routes)
		}
		if !slices.Equal(c.d.Unavailable, unavailableWithoutRead) || len(c.d.ByTopic) != 0 {
			t.Errorf("ro backlog %s: unavailable %q, by topic %v; want %q and none", c.d.Stream, c.d.Unavailable, c.d.ByTopic, unavailableWithoutRead)
		}
		if !strings.Contains(c.d.Note, `permission violation for publish to "$JS.API.`) || !strings.Contains(c.d.Note, c.d.Stream+`"`) {
			t.Errorf("ro backlog %s: note %q does not name the denied subject", c.d.Stream, c.d.Note)
		}
	}
	out, errOut, code = cli("ro", "pro", append([]string{"backlog", "-timeout", "60s"}, streams...)...)
	if code != exitOK || !strings.Contains(out, "note: "+own.RetryTopic+": original topic and oldest unavailable") {
		t.Errorf("ro backlog table: exit %d, no note on the unavailable columns: %s%s", code, out, errOut)
	}

	// The read-write operator reads the messages: the full backlog and
	// the dead letters.
	rw := backlog("rw", "prw")
	if rw.Retry.Messages != 5 || rw.Dead.Messages != 2 || len(rw.Retry.Unavailable)+len(rw.Dead.Unavailable) != 0 || len(rw.Dead.ByTopic) == 0 {
		t.Errorf("rw backlog: %+v, want a full scan of 5 and 2", rw)
	}
	if out, errOut, code := cli("rw", "prw", append([]string{"deadletters", "list", "-format", "json"}, streams...)...); code != exitOK || !strings.Contains(out, `"matched": 2`) {
		t.Errorf("rw deadletters list: exit %d: %s%s", code, out, errOut)
	}

	// deadletters, purge, replay and open are refused to the read-only
	// operator; deadletters says why at once.
	if out, errOut, code := cli("ro", "pro", append([]string{"deadletters", "list", "-timeout", "60s"}, streams...)...); code != exitError || !strings.Contains(errOut, errReadDenied.Error()) {
		t.Errorf("ro deadletters list: exit %d, want %d saying %q: %s%s", code, exitError, errReadDenied, out, errOut)
	}
	if out, errOut, code := cli("ro", "pro", append([]string{"deadletters", "show", "1", "-timeout", "60s"}, streams...)...); code != exitError || !strings.Contains(errOut, errReadDenied.Error()) {
		t.Errorf("ro deadletters show: exit %d, want %d saying %q: %s%s", code, exitError, errReadDenied, out, errOut)
	}
	// Refused by the permission violation, not by the timeout (a hang
	// guard only).
	for _, c := range []struct {
		args   []string
		denied string // the denied subject, or its prefix ending in '.'
	}{
		{append([]string{"purge", "-yes", "-timeout", "60s"}, streams...), "$JS.API.STREAM.PURGE.dead_a"},
		{append([]string{"replay", "-timeout", "60s"}, streams...), "$JS.API.CONSUMER.CREATE.dead_a."},
		{append([]string{"open", "-bucket", own.FleetBucket, "-service", svc, "-partner", "acme", "-timeout", "60s"}, streams...), "$KV." + own.FleetBucket + "." + partner.FleetName(svc, "acme") + ".state"},
	} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if out, errOut, code := cli("ro", "pro", c.args...); code == exitOK || !deniedOutput(errOut, c.denied) {
				t.Errorf("ro %s: exit %d, want a refusal naming the denied subject %q: %s%s", c.args[0], code, c.denied, out, errOut)
			}
		}()
	}
	wg.Wait()
	// Nothing was removed by the refused commands.
	if rep := backlog("rw", "prw"); rep.Retry.Messages != 5 || rep.Dead.Messages != 2 {
		t.Errorf("after ro purge/replay: %d retry, %d dead, want 5 and 2", rep.Retry.Messages, rep.Dead.Messages)
	}
}

// readsMessages matches the API requests that read one stream's messages,
// not another stream whose name it prefixes, nor its info.
func TestReadsMessages(t *testing.T) {
	for _, c := range []struct {
		subject string
		want    bool
	}{
		{"$JS.API.STREAM.MSG.GET.dead", true},
		{"$JS.API.DIRECT.GET.dead", true},
		{"$JS.API.DIRECT.GET.dead.dead.s.p", true},
		{"$JS.API.CONSUMER.CREATE.dead.x.dead.>", true},
		{"$JS.API.CONSUMER.DURABLE.CREATE.dead.x", true},
		{"$JS.API.CONSUMER.MSG.NEXT.dead.x", true},
		{"$JS.API.STREAM.MSG.GET.dead_a", false},
		{"$JS.API.DIRECT.GET.deadx.y", false},
		{"$JS.API.STREAM.INFO.dead", false},
		{"$JS.API.STREAM.PURGE.dead", false},
	} {
		if got := readsMessages("dead", c.subject); got != c.want {
			t.Errorf("readsMessages(dead, %q) = %v, want %v", c.subject, got, c.want)
		}
	}
}
