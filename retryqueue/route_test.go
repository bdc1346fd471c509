package retryqueue_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/floodgate-go/floodgate/internal/natstest"
	"github.com/floodgate-go/floodgate/jsq"
	fgpartner "github.com/floodgate-go/floodgate/partner"
	"github.com/floodgate-go/floodgate/retryqueue"
	"github.com/nats-io/nats.go/jetstream"
)

// routeQueue builds another Queue on e's streams for service and partner.
func routeQueue(t *testing.T, e env, service, partnerKey string) *retryqueue.Queue {
	t.Helper()
	cfg := e.cfg
	cfg.Service, cfg.Partner, cfg.Source = service, partnerKey, ""
	q, err := retryqueue.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// subjects returns the subject of every message stored in stream.
func subjects(t *testing.T, e env, stream string) map[string][]string {
	t.Helper()
	st, err := e.js.Stream(testCtx(t), stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for seq := info.State.FirstSeq; info.State.Msgs > 0 && seq <= info.State.LastSeq; seq++ {
		raw, err := st.GetMsg(testCtx(t), seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		out[raw.Subject] = append(out[raw.Subject], raw.Header.Get(jsq.UUIDHeader))
	}
	return out
}

// The subject layout: <retry>.<service token>.<partner token>, and the
// same under the dead-letter stream; the route travels in the metadata,
// and a live message's forged route metadata is overwritten.
func TestRouteSubjectLayout(t *testing.T) {
	e := newEnv(t, natstest.URL(t), nil)
	q := routeQueue(t, e, "edi_orders/as2", "ACME")
	if got, want := q.RetrySubject(), e.cfg.RetryTopic+".edi_orders=2Fas2.ACME"; got != want {
		t.Fatalf("RetrySubject = %q, want %q", got, want)
	}
	if got, want := q.DeadLetterSubject(), e.cfg.DeadLetterTopic+".edi_orders=2Fas2.ACME"; got != want {
		t.Fatalf("DeadLetterSubject = %q, want %q", got, want)
	}
	m := message.NewMessage("forged", []byte("p"))
	m.Metadata.Set(retryqueue.MetaService, "other")
	m.Metadata.Set(retryqueue.MetaPartner, "EVIL")
	m.Metadata.Set(retryqueue.MetaPartnerToken, "EVIL")
	if err := q.Divert(context.Background(), m, retryqueue.ReasonOpen, errOpen); err != nil {
		t.Fatal(err)
	}
	if err := q.DeadLetter(context.Background(), message.NewMessage("dead", nil), retryqueue.DeadReasonPermanent, nil); err != nil {
		t.Fatal(err)
	}
	if got := subjects(t, e, e.cfg.RetryTopic); len(got[q.RetrySubject()]) != 1 || len(got) != 1 {
		t.Fatalf("retry subjects %v, want one message on %q", got, q.RetrySubject())
	}
	if got := subjects(t, e, e.cfg.DeadLetterTopic); len(got[q.DeadLetterSubject()]) != 1 || len(got) != 1 {
		t.Fatalf("dead-letter subjects %v, want one message on %q", got, q.DeadLetterSubject())
	}
	wantMeta(t, last(t, e.js, e.cfg.RetryTopic), map[string]string{
		retryqueue.MetaService: "edi_orders/as2", retryqueue.MetaPartner: "ACME", retryqueue.MetaPartnerToken: "ACME",
	})
	wantMeta(t, last(t, e.js, e.cfg.DeadLetterTopic), map[string]string{
		retryqueue.MetaService: "edi_orders/as2", retryqueue.MetaPartner: "ACME", retryqueue.MetaPartnerToken: "ACME",
	})

	// Derived service names: topic and handler tell routes apart.
	for _, c := range []struct{ source, handler, want string }{
		{"orders", "", "orders/"}, {"orders", "as2", "orders/as2"},
	} {
		cfg := e.cfg
		cfg.Service, cfg.Source, cfg.Handler = "", c.source, c.handler
		q, err := retryqueue.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if q.Service() != c.want || q.Partner() != retryqueue.DefaultPartner {
			t.Errorf("Source %q Handler %q: service %q partner %q, want %q and %q", c.source, c.handler, q.Service(), q.Partner(), c.want, retryqueue.DefaultPartner)
		}
	}
}

// Partner keys that a byte-replacing encoding would merge ("a.b", "a_b"),
// or that try to inject tokens or wildcards, each get a subject of their
// own with exactly three tokens.
func TestRouteSubjectsInjective(t *testing.T) {
	e := newEnv(t, natstest.URL(t), nil)
	q := routeQueue(t, e, "svc", "p")
	keys := []string{"a.b", "a_b", "a=2Eb", "", "*", ">", "a b", "a.>", "\xff\xfe", strings.Repeat("k", 4096), strings.Repeat("k", 4095) + "l"}
	seen := map[string]string{}
	for i, k := range keys {
		if _, err := q.RouteTo(context.Background(), message.NewMessage(fmt.Sprint("u", i), nil), k, retryqueue.ReasonOpen, errOpen); err != nil {
			t.Fatalf("key %q: %v", k, err)
		}
		s := retryqueue.RouteSubject(e.cfg.RetryTopic, "svc", k)
		if prev, dup := seen[s]; dup {
			t.Fatalf("keys %q and %q share subject %q", prev, k, s)
		}
		seen[s] = k
		if n := strings.Count(s, "."); n != 2 || strings.ContainsAny(s, "*> \t") {
			t.Fatalf("key %q: subject %q is not three plain tokens", k, s)
		}
	}
	got := subjects(t, e, e.cfg.RetryTopic)
	if len(got) != len(keys) {
		t.Fatalf("%d subjects in the stream for %d keys: %v", len(got), len(keys), got)
	}
	for s, ids := range got {
		if _, ok := seen[s]; !ok || len(ids) != 1 {
			t.Errorf("subject %q holds %v, want one message of a known key", s, ids)
		}
	}
}

// Two routes on one retry stream, with every drainer default: each drainer
// receives only its own route's messages, for services that differ and for
// partners of one service that differ only in a byte a lossy encoding
// would replace.
func TestDrainersReceiveOnlyTheirRoute(t *testing.T) {
	e := newEnv(t, natstest.URL(t), nil)
	routes := []struct{ service, partner string }{{"orders/as2", "a.b"}, {"orders/as2", "a_b"}, {"geo/webhook", "a.b"}}
	type got struct {
		mu  sync.Mutex
		ids []string
	}
	recs := make([]*got, len(routes))
	const n = 30
	for i, r := range routes {
		q := routeQueue(t, e, r.service, r.partner)
		for j := range n {
			if err := q.Divert(context.Background(), message.NewMessage(fmt.Sprintf("%d-%d", i, j), nil), retryqueue.ReasonOpen, errOpen); err != nil {
				t.Fatal(err)
			}
		}
		rec := &got{}
		recs[i] = rec
		g := &gate{}
		g.budget.Store(1 << 30)
		d, err := retryqueue.NewDrainer(retryqueue.DrainerConfig{JetStream: e.js, Queue: q, Gate: g, Rate: 1000, PollInterval: 10 * time.Millisecond,
			Handler: func(m *message.Message) ([]*message.Message, error) {
				rec.mu.Lock()
				rec.ids = append(rec.ids, m.UUID)
				rec.mu.Unlock()
				return nil, nil
			}})
		if err != nil {
			t.Fatal(err)
		}
		natstest.Run(t, d.Run)
	}
	natstest.Eventually(t, 20*time.Second, func() bool { return streamCount(t, e.js, e.cfg.RetryTopic) == 0 }, "backlog drained")
	for i, rec := range recs {
		rec.mu.Lock()
		for _, id := range rec.ids {
			if !strings.HasPrefix(id, fmt.Sprint(i, "-")) {
				t.Errorf("drainer of route %v received %s, another route's", routes[i], id)
			}
		}
		if len(rec.ids) < n {
			t.Errorf("drainer of route %v received %d messages, want %d", routes[i], len(rec.ids), n)
		}
		rec.mu.Unlock()
	}
}

// A message stored under a route's subject whose route metadata names
// another route is dead-lettered with DeadReasonRoute, never delivered.
func TestDrainDeadLettersRouteMismatch(t *testing.T) {
	e := newEnv(t, natstest.URL(t), nil)
	for _, c := range []struct{ name, service, token, key string }{
		{"service", "other", fgpartner.Token(retryqueue.DefaultPartner), ""},
		{"partner token", "svc", "other", ""},
		{"raw key", "svc", fgpartner.Token(retryqueue.DefaultPartner), "other"},
		{"no metadata", "", "", ""},
	} {
		m := message.NewMessage("bad-"+c.name, nil)
		if c.service != "" {
			m.Metadata.Set(retryqueue.MetaService, c.service)
			m.Metadata.Set(retryqueue.MetaPartnerToken, c.token)
		}
		if c.key != "" {
			m.Metadata.Set(retryqueue.MetaPartner, c.key)
		}
		publishRaw(t, e, e.q.RetrySubject(), m)
	}
	seed(t, e, 1)
	g := &gate{}
	g.budget.Store(1 << 30)
	rec := &recorder{}
	d := startDrainer(t, e, retryqueue.DrainerConfig{Handler: rec.handler(nil), Gate: g, PollInterval: 10 * time.Millisecond})
	natstest.Eventually(t, 10*time.Second, func() bool { s := d.Stats(); return s.DeadLettered == 4 && s.Drained == 1 }, "4 dead-lettered, 1 drained")
	if calls := rec.count(); calls != 1 {
		t.Fatalf("handler called %d times, want 1 (the good message only)", calls)
	}
	for _, dl := range streamMsgs(t, e.js, e.cfg.DeadLetterTopic) {
		if dl.Metadata.Get(retryqueue.MetaDeadReason) != retryqueue.DeadReasonRoute || !strings.Contains(dl.Metadata.Get(retryqueue.MetaLastError), "route mismatch") {
			t.Errorf("dead letter %s: reason %q, error %q", dl.UUID, dl.Metadata.Get(retryqueue.MetaDeadReason), dl.Metadata.Get(retryqueue.MetaLastError))
		}
	}
}

// A drainer whose consumer is another route's (same DrainerConfig.Consumer)
// or overlaps another's filter (AllPartners beside a per-partner drainer)
// fails at start with ErrRouteConflict naming the setting; the other
// route's consumer is left as it was.
func TestDrainerRouteConflict(t *testing.T) {
	e := newEnv(t, natstest.URL(t), nil)
	run := func(cfg retryqueue.DrainerConfig) (*retryqueue.Drainer, error) {
		cfg.JetStream = e.js
		cfg.Handler = func(*message.Message) ([]*message.Message, error) { return nil, nil }
		cfg.Gate = &gate{}
		cfg.PollInterval = 10 * time.Millisecond
		d, err := retryqueue.NewDrainer(cfg)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		// A consumer that exists before Run (another route's, in the
		// conflict cases) says nothing: wait for Run's verdict then.
		_, err = e.js.Consumer(ctx, d.Stream(), d.Consumer())
		existed := err == nil
		done := make(chan error, 1)
		go func() { done <- d.Run(ctx) }()
		if existed {
			return d, <-done
		}
		// Run returns at once on a conflict; otherwise stop it once its
		// consumer exists.
		for {
			select {
			case err := <-done:
				return d, err
			case <-time.After(10 * time.Millisecond):
			}
			if _, err := e.js.Consumer(ctx, d.Stream(), d.Consumer()); err == nil {
				cancel()
				return d, <-done
			}
		}
	}
	a := routeQueue(t, e, "a", "p")
	b := routeQueue(t, e, "b", "p")
	da, err := run(retryqueue.DrainerConfig{Queue: a})
	if err != nil {
		t.Fatal(err)
	}
	_, err = run(retryqueue.DrainerConfig{Queue: b, Consumer: da.Consumer()})
	if !errors.Is(err, retryqueue.ErrRouteConflict) || !strings.Contains(err.Error(), "DrainerConfig.Consumer") {
		t.Fatalf("same consumer name, other route: %v, want ErrRouteConflict naming DrainerConfig.Consumer", err)
	}
	c, err := e.js.Consumer(testCtx(t), da.Stream(), da.Consumer())
	if err != nil || c.CachedInfo().Config.FilterSubject != a.RetrySubject() {
		t.Fatalf("route a's consumer after the conflict: %v, %v", c, err)
	}
	_, err = run(retryqueue.DrainerConfig{Queue: a, AllPartners: true})
	if !errors.Is(err, retryqueue.ErrRouteConflict) || !strings.Contains(err.Error(), "AllPartners") {
		t.Fatalf("service-wide beside per-partner: %v, want ErrRouteConflict naming AllPartners", err)
	}
	// Another service's service-wide drainer does not overlap.
	if _, err := run(retryqueue.DrainerConfig{Queue: b, AllPartners: true}); err != nil {
		t.Fatalf("service-wide drainer of another service: %v", err)
	}
}

// Replay puts each dead letter back on its own route, whatever the
// replaying queue's route, and Service and Partner narrow it.
func TestReplayKeepsRoutes(t *testing.T) {
	e := newEnv(t, natstest.URL(t), nil)
	a := routeQueue(t, e, "a", "p1")
	b := routeQueue(t, e, "b", "p2")
	for i, q := range []*retryqueue.Queue{a, b, a} {
		if err := q.DeadLetter(context.Background(), message.NewMessage(fmt.Sprint("d", i), nil), retryqueue.DeadReasonPermanent, nil); err != nil {
			t.Fatal(err)
		}
	}
	res, err := e.q.Replay(testCtx(t), e.js, retryqueue.ReplayFilter{Service: "b"})
	if err != nil || res.Replayed != 1 {
		t.Fatalf("replay of service b: %+v, %v", res, err)
	}
	res, err = e.q.Replay(testCtx(t), e.js, retryqueue.ReplayFilter{Partner: "p1"})
	if err != nil || res.Replayed != 2 {
		t.Fatalf("replay of partner p1: %+v, %v", res, err)
	}
	got := subjects(t, e, e.cfg.RetryTopic)
	if len(got[a.RetrySubject()]) != 2 || len(got[b.RetrySubject()]) != 1 || len(got) != 2 {
		t.Fatalf("retry subjects after replay: %v, want 2 on %q and 1 on %q", got, a.RetrySubject(), b.RetrySubject())
	}
}

// Every partner key, even one whose token is hashed and which cannot travel
// as a header value, comes back exact from a drained message's route
// (DrainedPartner) and from its metadata (PartnerKey).
func TestDrainedPartnerKeyRoundTrip(t *testing.T) {
	e := newEnv(t, natstest.URL(t), nil)
	keys := []string{"ACME", "a.b", " sp ", "\xff\xfe", strings.Repeat("k", 4096), strings.Repeat("\x00\xff.", 1500)}
	for i, k := range keys {
		if _, err := e.q.RouteTo(context.Background(), message.NewMessage(fmt.Sprint(i), nil), k, retryqueue.ReasonOpen, nil); err != nil {
			t.Fatalf("key %d: %v", i, err)
		}
	}
	var mu sync.Mutex
	got := map[string]string{}
	g := &gate{}
	g.budget.Store(1 << 30)
	h := func(m *message.Message) ([]*message.Message, error) {
		k, ok := retryqueue.DrainedPartner(m.Context(), m)
		mk, mok := retryqueue.PartnerKey(m)
		if !ok || !mok || k != mk {
			t.Errorf("message %s: DrainedPartner %v, PartnerKey %v, keys differ %v", m.UUID, ok, mok, k != mk)
		}
		mu.Lock()
		got[m.UUID] = k
		mu.Unlock()
		return nil, nil
	}
	startDrainer(t, e, retryqueue.DrainerConfig{Handler: h, Gate: g, AllPartners: true, PollInterval: 10 * time.Millisecond})
	natstest.Eventually(t, 10*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return len(got) == len(keys) }, "every key drained")
	for i, k := range keys {
		if got[fmt.Sprint(i)] != k {
			t.Errorf("key %d came back as %q (len %d), want len %d", i, got[fmt.Sprint(i)], len(got[fmt.Sprint(i)]), len(k))
		}
	}
	if _, ok := retryqueue.DrainedPartner(context.Background(), message.NewMessage("live", nil)); ok {
		t.Error("DrainedPartner of a live message: ok")
	}
}
