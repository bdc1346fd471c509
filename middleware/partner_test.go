package middleware_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/breaker/breakertest"
	"github.com/floodgate-go/floodgate/internal/configtest"
	"github.com/floodgate-go/floodgate/internal/natstest"
	"github.com/floodgate-go/floodgate/jsq"
	"github.com/floodgate-go/floodgate/middleware"
	"github.com/floodgate-go/floodgate/partner"
	"github.com/floodgate-go/floodgate/retryqueue"
)

// toKey is the metadata key the tests' messages carry their partner key
// in (an AS2-To header).
const toKey = "as2_to"

func keyOf(m *message.Message) string { return m.Metadata.Get(toKey) }

// penv is a partner registry on a fake clock, a queue on real JetStream
// streams, and a per-partner middleware over them. Events are recorded,
// and each message's intended partner key is kept by UUID.
type penv struct {
	t     *testing.T
	js    jetstream.JetStream
	clock *breakertest.Clock
	reg   *partner.Registry
	qcfg  retryqueue.Config
	q     *retryqueue.Queue
	mw    message.HandlerMiddleware

	mu       sync.Mutex
	events   []middleware.Event
	intended map[string]string // uuid -> partner key
}

// newPartnerEnv builds a penv; pcfg's Template breaker defaults to
// smallBreaker, and mod adjusts the middleware's config.
func newPartnerEnv(t *testing.T, pcfg partner.Config, mod func(*middleware.Config)) *penv {
	t.Helper()
	e := &penv{t: t, clock: breakertest.NewClock(time.Time{}), intended: map[string]string{}}
	nc := natstest.Conn(t, natstest.URL(t))
	e.js = natstest.JetStream(t, nc)
	if pcfg.Template.Breaker.WindowSize == 0 {
		pcfg.Template.Breaker = smallBreaker
	}
	pcfg.Clock = e.clock
	var err error
	if e.reg, err = partner.New(pcfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.reg.Close)
	pub, err := jsq.NewPublisher(jsq.PublisherConfig{Conn: nc, PublishTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	e.qcfg = retryqueue.Config{
		Publisher:       pub,
		Service:         "svc",
		RetryTopic:      natstest.Name(t, "retry"),
		DeadLetterTopic: natstest.Name(t, "dead"),
		PublishTimeout:  2 * time.Second,
		MaxAttempts:     3,
	}
	natstest.DeleteStreams(t, e.js, e.qcfg.RetryTopic, e.qcfg.DeadLetterTopic, "OBJ_"+e.qcfg.DeadLetterTopic+"_payloads")
	if err := retryqueue.Provision(context.Background(), e.js, e.qcfg); err != nil {
		t.Fatal(err)
	}
	if e.q, err = retryqueue.New(e.qcfg); err != nil {
		t.Fatal(err)
	}
	cfg := middleware.Config{
		Partners:   e.reg,
		PartnerKey: keyOf,
		Queue:      e.q,
		Timeout:    5 * time.Second,
		OnEvent: func(ev middleware.Event) {
			e.mu.Lock()
			e.events = append(e.events, ev)
			e.mu.Unlock()
		},
	}
	if mod != nil {
		mod(&cfg)
	}
	if e.mw, err = middleware.New(cfg); err != nil {
		t.Fatal(err)
	}
	return e
}

// msgFor returns a new message for partner key (no metadata when key is
// ""), and records it as the message's intended partner.
func (e *penv) msgFor(key string) *message.Message {
	m := message.NewMessage(uuid.NewString(), []byte("ISA*00*...~"))
	if key != "" {
		m.Metadata.Set(toKey, key)
	}
	e.mu.Lock()
	e.intended[m.UUID] = key
	e.mu.Unlock()
	return m
}

func (e *penv) eventsOf(uuid string) []middleware.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	var evs []middleware.Event
	for _, ev := range e.events {
		if ev.UUID == uuid {
			evs = append(evs, ev)
		}
	}
	return evs
}

func (e *penv) last(uuid string) middleware.Event {
	e.t.Helper()
	evs := e.eventsOf(uuid)
	if len(evs) == 0 {
		e.t.Fatalf("no event for %s", uuid)
	}
	return evs[len(evs)-1]
}

// subjects returns the retry or dead-letter stream's message count per
// subject.
func (e *penv) subjects(stream string) map[string]uint64 {
	e.t.Helper()
	s, err := e.js.Stream(context.Background(), stream)
	if err != nil {
		e.t.Fatal(err)
	}
	info, err := s.Info(context.Background(), jetstream.WithSubjectFilter(">"))
	if err != nil {
		e.t.Fatal(err)
	}
	return info.State.Subjects
}

// wantSafeSubjects fails unless every subject is topic.svc.<token>, the
// token a valid partner token (no injected '.', wildcard or whitespace).
func (e *penv) wantSafeSubjects(topic string, subjects map[string]uint64) {
	e.t.Helper()
	tok := regexp.MustCompile(`^[-_=A-Za-z0-9]{1,64}$`)
	for s := range subjects {
		rest, ok := strings.CutPrefix(s, topic+".svc.")
		if !ok || !tok.MatchString(rest) {
			e.t.Errorf("subject %q is not %s.svc.<partner token>", s, topic)
		}
	}
}

func (e *penv) breakerOf(key string) *breaker.Breaker {
	e.t.Helper()
	p, ok := e.reg.Lookup(key)
	if !ok {
		e.t.Fatalf("registry holds no partner %q", key)
	}
	return p.Breaker()
}

// force changes the breaker of key (created if need be) with fn.
func (e *penv) force(key string, fn func(*breaker.Breaker)) {
	e.t.Helper()
	if err := e.reg.With(key, func(p *partner.Partner) { fn(p.Breaker()) }); err != nil {
		e.t.Fatal(err)
	}
}

// Several partners behind one middleware, one of them failing: only its
// breaker trips, only its messages are diverted, to its own route
// subject; the others are all delivered, each to its own partner.
func TestPartnersTripIndependently(t *testing.T) {
	e := newPartnerEnv(t, partner.Config{}, nil)
	keys := []string{"ACME", "globex.example", "initech"}
	const failing, perPartner = "globex.example", 12
	var dmu sync.Mutex
	delivered := map[string]string{} // uuid -> key the handler delivered to
	h := e.mw(func(m *message.Message) ([]*message.Message, error) {
		k := keyOf(m)
		if k == failing {
			return nil, errPartner503
		}
		dmu.Lock()
		delivered[m.UUID] = k
		dmu.Unlock()
		return nil, nil
	})
	var wg sync.WaitGroup
	for _, k := range keys {
		msgs := make([]*message.Message, perPartner)
		for i := range msgs {
			msgs[i] = e.msgFor(k)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, m := range msgs {
				if _, err := h(m); err != nil {
					t.Errorf("message for %q: %v", k, err)
				}
			}
		}()
	}
	wg.Wait()

	for _, k := range keys {
		want := breaker.StateClosed
		if k == failing {
			want = breaker.StateOpen
		}
		if s := e.breakerOf(k).State(); s != want {
			t.Errorf("partner %q breaker %s, want %s", k, s, want)
		}
	}
	misdelivered, lost := 0, 0
	for id, k := range e.intended {
		ev := e.last(id)
		if ev.Partner != partner.Token(k) {
			t.Errorf("event partner %q for a message to %q", ev.Partner, k)
		}
		got, ok := delivered[id]
		switch {
		case ok && got != k:
			misdelivered++
		case k == failing && (ev.Action != middleware.Diverted || ok):
			t.Errorf("message to the failing partner: %s (delivered %v), want diverted", ev.Action, ok)
		case k != failing && (!ok || ev.Action != middleware.Delivered):
			lost++
		}
	}
	if misdelivered != 0 || lost != 0 || len(delivered) != 2*perPartner {
		t.Errorf("misdelivered %d, lost %d, delivered %d; want 0, 0, %d", misdelivered, lost, len(delivered), 2*perPartner)
	}
	subjects := e.subjects(e.qcfg.RetryTopic)
	want := map[string]uint64{retryqueue.RouteSubject(e.qcfg.RetryTopic, "svc", failing): perPartner}
	if fmt.Sprint(subjects) != fmt.Sprint(want) {
		t.Errorf("retry subjects %v, want %v", subjects, want)
	}
	for _, m := range natstest.StreamMsgs(t, e.js, e.qcfg.RetryTopic) {
		if k, ok := retryqueue.PartnerKey(m); !ok || k != failing || e.intended[m.UUID] != failing {
			t.Errorf("diverted %s carries partner %q (%v), intended %q", m.UUID, k, ok, e.intended[m.UUID])
		}
	}
}

// Untrusted partner keys: each message is delivered to its own partner
// (the key the handler takes from its route, compared byte for byte) or
// dead-lettered with a reason; no key adds a token or a wildcard to a
// retry subject. The backlog is drained back by one drainer for every
// partner of the service, and each drained message is guarded by its
// route's breaker (one partner, held open, keeps its message in place).
func TestBadPartnerKeys(t *testing.T) {
	e := newPartnerEnv(t, partner.Config{MaxKeyLen: 5000}, nil)
	long := strings.Repeat("k.>*", 1024) // 4 KiB
	keys := []string{".", "*", ">", " a b ", "a.b", "a_b", "a=2Eb", long, "\xff\xfe\x00", "ok"}
	tooLong := strings.Repeat("x", 5001)
	const heldOpen = "*"
	for _, k := range keys {
		e.force(k, (*breaker.Breaker).ForceOpen)
	}

	// Live: every partner is open, so each message is diverted to its route.
	byKey := map[string]*message.Message{}
	for _, k := range append(keys, "", tooLong) {
		m := e.msgFor(k)
		byKey[k] = m
		if _, err := e.mw(ok)(m); err != nil {
			t.Fatalf("key %q: %v", k, err)
		}
	}
	for _, k := range keys {
		if ev := e.last(byKey[k].UUID); ev.Action != middleware.Diverted || ev.Reason != "open" || ev.Partner != partner.Token(k) {
			t.Errorf("key %q: event %+v, want diverted for open, partner %q", k, ev, partner.Token(k))
		}
	}
	if ev := e.last(byKey[""].UUID); ev.Action != middleware.DeadLettered || ev.Reason != middleware.DeadReasonNoPartner || ev.Partner != "" || !errors.Is(ev.Err, middleware.ErrNoPartner) {
		t.Errorf("empty key: event %+v, want dead-lettered no-partner", ev)
	}
	if ev := e.last(byKey[tooLong].UUID); ev.Action != middleware.DeadLettered || ev.Reason != middleware.DeadReasonPartnerKey || !errors.Is(ev.Err, partner.ErrKeyTooLong) {
		t.Errorf("too-long key: event %+v, want dead-lettered %s", ev, middleware.DeadReasonPartnerKey)
	}
	// A message whose metadata names heldOpen but whose route is "ok" (its
	// key function changed, say): drained, it is "ok"'s, never re-chosen.
	moved := e.msgFor(heldOpen)
	if _, err := e.q.RouteTo(context.Background(), moved, "ok", retryqueue.ReasonOpen, nil); err != nil {
		t.Fatal(err)
	}
	e.intended[moved.UUID] = "ok"
	retry := e.subjects(e.qcfg.RetryTopic)
	e.wantSafeSubjects(e.qcfg.RetryTopic, retry)
	if len(retry) != len(keys) {
		t.Errorf("%d retry subjects, want %d (one per key): %v", len(retry), len(keys), retry)
	}
	for _, k := range keys {
		want := uint64(1)
		if k == "ok" {
			want = 2 // and moved
		}
		if n := retry[retryqueue.RouteSubject(e.qcfg.RetryTopic, "svc", k)]; n != want {
			t.Errorf("key %q: %d messages on its route subject, want %d", k, n, want)
		}
	}
	dead := e.subjects(e.qcfg.DeadLetterTopic)
	e.wantSafeSubjects(e.qcfg.DeadLetterTopic, dead)
	for _, k := range []string{"", tooLong} {
		if n := dead[retryqueue.RouteSubject(e.qcfg.DeadLetterTopic, "svc", k)]; n != 1 {
			t.Errorf("key %q: %d dead letters on its route subject, want 1 (%v)", k, n, dead)
		}
	}

	// Drain: every partner but heldOpen recovers.
	for _, k := range keys {
		if k != heldOpen {
			e.force(k, (*breaker.Breaker).Reset)
		}
	}
	var dmu sync.Mutex
	delivered := map[string][]string{} // uuid -> keys the handler delivered to
	d, err := retryqueue.NewDrainer(retryqueue.DrainerConfig{
		JetStream: e.js, Queue: e.q, AllPartners: true, PollInterval: 20 * time.Millisecond, Rate: 500,
		Gate: retryqueue.GateFunc(func() int { return math.MaxInt }),
		Handler: e.mw(func(m *message.Message) ([]*message.Message, error) {
			k, ok := retryqueue.DrainedPartner(m.Context(), m)
			if !ok {
				t.Errorf("drained %s without a route partner", m.UUID)
			}
			dmu.Lock()
			delivered[m.UUID] = append(delivered[m.UUID], k)
			dmu.Unlock()
			return nil, nil
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	natstest.Run(t, d.Run)
	count := func() int {
		dmu.Lock()
		defer dmu.Unlock()
		return len(delivered)
	}
	natstest.Eventually(t, 30*time.Second, func() bool { return count() == len(keys) },
		"every partner but %q drained", heldOpen)
	natstest.Eventually(t, 30*time.Second, func() bool {
		for _, ev := range e.eventsOf(byKey[heldOpen].UUID) {
			if ev.Action == middleware.Deferred {
				return true
			}
		}
		return false
	}, "the held-open partner's drained message deferred by its own breaker")
	// The handler has run for the others; their acks follow.
	natstest.Eventually(t, 30*time.Second, func() bool {
		got := e.subjects(e.qcfg.RetryTopic)
		return len(got) == 1 && got[retryqueue.RouteSubject(e.qcfg.RetryTopic, "svc", heldOpen)] == 1
	}, "retry subjects %v, want only %q's message left", natstest.Now(func() any { return e.subjects(e.qcfg.RetryTopic) }), heldOpen)
	e.force(heldOpen, (*breaker.Breaker).Reset)
	d.Wake()
	natstest.Eventually(t, 30*time.Second, func() bool { return count() == len(keys)+1 }, "%q drained once reset", heldOpen)

	dmu.Lock()
	defer dmu.Unlock()
	misdelivered := 0
	byKey["moved"] = moved
	for _, id := range byKey {
		k := e.intended[id.UUID]
		if k == "" || k == tooLong {
			continue
		}
		id := id.UUID
		got := delivered[id]
		if len(got) != 1 || got[0] != k {
			misdelivered++
			t.Errorf("message to %q delivered to %q", k, got)
		}
		if ev := e.last(id); ev.Action != middleware.Delivered || ev.Partner != partner.Token(k) {
			t.Errorf("key %q: drained event %+v, want delivered, partner %q", k, ev, partner.Token(k))
		}
	}
	if misdelivered != 0 {
		t.Errorf("%d misdelivered", misdelivered)
	}
}

// A full registry and a full bulkhead both divert as not attempted: no
// attempt counted, the breaker not asked, the detail in Event.Reason and
// in the diversion's history; over and over, never dead-lettered for the
// cap (MaxAttempts is 3).
func TestPartnerLimitAndBulkheadAreNotAttempted(t *testing.T) {
	e := newPartnerEnv(t, partner.Config{MaxPartners: 1, Template: partner.PartnerConfig{MaxInFlight: 1}}, nil)
	release, running, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		_, err := e.mw(func(*message.Message) ([]*message.Message, error) {
			close(running)
			<-release
			return nil, nil
		})(e.msgFor("A"))
		done <- err
	}()
	<-running
	calls := 0
	h := e.mw(func(*message.Message) ([]*message.Message, error) { calls++; return nil, nil })

	for _, tc := range []struct {
		key, reason string
		cause       error
	}{
		{"A", middleware.ReasonBulkhead, partner.ErrBulkheadFull},
		{"B", middleware.ReasonPartnerLimit, partner.ErrPartnerLimit},
	} {
		m := e.msgFor(tc.key)
		for i := 1; i <= 6; i++ {
			if _, err := h(m); err != nil {
				t.Fatal(err)
			}
			ev := e.last(m.UUID)
			if ev.Action != middleware.Diverted || ev.Reason != tc.reason || ev.Admitted || ev.Partner != partner.Token(tc.key) {
				t.Fatalf("%s, try %d: event %+v, want diverted %q, not admitted", tc.key, i, ev, tc.reason)
			}
			var copy *message.Message
			for _, c := range natstest.StreamMsgs(t, e.js, e.qcfg.RetryTopic) {
				if c.UUID == m.UUID {
					copy = c
				}
			}
			wantMetaValues(t, copy, map[string]string{
				retryqueue.MetaReason:       string(retryqueue.ReasonNotAttempted),
				retryqueue.MetaAttempt:      "0",
				retryqueue.MetaNotAttempted: fmt.Sprint(i),
				retryqueue.MetaPartner:      tc.key,
			})
			hist, err := retryqueue.History(copy)
			if err != nil || len(hist) == 0 || !strings.Contains(hist[len(hist)-1].Error, tc.cause.Error()) {
				t.Errorf("%s: history %+v (%v), want the last entry to say %q", tc.key, hist, err, tc.cause)
			}
			m = copy // as the drainer would hand it over again
		}
	}
	if calls != 0 {
		t.Errorf("handler called %d times", calls)
	}
	if n := len(natstest.StreamMsgs(t, e.js, e.qcfg.DeadLetterTopic)); n != 0 {
		t.Errorf("%d dead letters, want 0", n)
	}
	if s := e.breakerOf("A").Snapshot(); s.Calls != 0 {
		t.Errorf("partner A's breaker counted %d calls with its one in flight, want 0", s.Calls)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	p, _ := e.reg.Lookup("A")
	if p.InFlight() != 0 || p.Breaker().Snapshot().Calls != 1 {
		t.Errorf("after the held call: %d in flight, %d calls; want 0, 1", p.InFlight(), p.Breaker().Snapshot().Calls)
	}
}

// A message without a partner key is dead-lettered with reason
// no-partner, under the empty key's route; a PartnerKey that panics counts
// as no key. With DefaultPartner set, it goes to that partner.
func TestNoPartnerKey(t *testing.T) {
	t.Run("dead letter", func(t *testing.T) {
		e := newPartnerEnv(t, partner.Config{}, func(c *middleware.Config) {
			c.PartnerKey = func(m *message.Message) string {
				if m.Metadata.Get("boom") != "" {
					panic("bad header")
				}
				return keyOf(m)
			}
		})
		plain, boom := e.msgFor(""), e.msgFor("")
		boom.Metadata.Set("boom", "1")
		for _, m := range []*message.Message{plain, boom} {
			if _, err := e.mw(func(*message.Message) ([]*message.Message, error) {
				t.Error("handler called for a message without a partner")
				return nil, nil
			})(m); err != nil {
				t.Fatal(err)
			}
			if ev := e.last(m.UUID); ev.Action != middleware.DeadLettered || ev.Reason != "no-partner" || ev.Partner != "" || !errors.Is(ev.Err, middleware.ErrNoPartner) {
				t.Errorf("event %+v, want dead-lettered no-partner, no partner", ev)
			}
		}
		dead := natstest.StreamMsgs(t, e.js, e.qcfg.DeadLetterTopic)
		if len(dead) != 2 {
			t.Fatalf("%d dead letters, want 2", len(dead))
		}
		for _, d := range dead {
			wantMetaValues(t, d, map[string]string{retryqueue.MetaDeadReason: "no-partner", retryqueue.MetaPartnerToken: "="})
		}
		if got := e.subjects(e.qcfg.DeadLetterTopic); got[retryqueue.RouteSubject(e.qcfg.DeadLetterTopic, "svc", "")] != 2 {
			t.Errorf("dead-letter subjects %v, want both on the empty key's route", got)
		}
		if e.reg.Len() != 0 {
			t.Errorf("registry holds %d partners, want 0", e.reg.Len())
		}
	})
	t.Run("default partner", func(t *testing.T) {
		e := newPartnerEnv(t, partner.Config{}, func(c *middleware.Config) { c.DefaultPartner = "fallback" })
		m := e.msgFor("")
		var got string
		if _, err := e.mw(func(*message.Message) ([]*message.Message, error) { got = "called"; return nil, nil })(m); err != nil {
			t.Fatal(err)
		}
		if ev := e.last(m.UUID); ev.Action != middleware.Delivered || ev.Partner != "fallback" || got != "called" {
			t.Errorf("event %+v, handler %q; want delivered to partner fallback", ev, got)
		}
		if s := e.breakerOf("fallback").Snapshot(); s.Calls != 1 {
			t.Errorf("fallback breaker counted %d calls, want 1", s.Calls)
		}
	})
}

// The lease is reported as the single-breaker permit is: probes are
// marked, a not-attempted probe and a shutdown are cancelled (the breaker
// stays half-open), a slow probe reopens, a panic is a failure; and the
// bulkhead slot is freed every time.
func TestPartnerLeaseOutcomes(t *testing.T) {
	e := newPartnerEnv(t, partner.Config{}, nil)
	const k = "ACME"
	inFlight := func() int { p, _ := e.reg.Lookup(k); return p.InFlight() }
	run := func(m *message.Message, h message.HandlerFunc) middleware.Event {
		t.Helper()
		if _, err := e.mw(h)(m); err != nil {
			t.Fatal(err)
		}
		if n := inFlight(); n != 0 {
			t.Errorf("%d calls in flight after the call, want 0", n)
		}
		return e.last(m.UUID)
	}
	for range smallBreaker.MinimumCalls {
		run(e.msgFor(k), failWith(errPartner503))
	}
	b := e.breakerOf(k)
	if s := b.State(); s != breaker.StateOpen {
		t.Fatalf("after %d failures: %s, want open", smallBreaker.MinimumCalls, s)
	}
	e.clock.Advance(2 * time.Second)
	trips := b.Snapshot().ConsecutiveTrips

	var probe bool
	ev := run(e.msgFor(k), func(m *message.Message) ([]*message.Message, error) {
		probe = middleware.IsProbe(m.Context())
		return nil, middleware.NotAttempted(nil, 0)
	})
	if !probe || !ev.Probe || ev.Reason != "not-attempted" {
		t.Errorf("not-attempted probe: IsProbe %v, event %+v", probe, ev)
	}
	msg := e.msgFor(k)
	ctx, cancel := context.WithCancel(context.Background())
	msg.SetContext(ctx)
	run(msg, func(m *message.Message) ([]*message.Message, error) { cancel(); return nil, m.Context().Err() })
	if s := b.Snapshot(); s.State != breaker.StateHalfOpen || s.ProbesInFlight != 0 || s.ConsecutiveTrips != trips {
		t.Errorf("after a not-attempted and a cancelled probe: %s, %d probes in flight, trips %d; want half-open, 0, %d",
			s.State, s.ProbesInFlight, s.ConsecutiveTrips, trips)
	}
	ev = run(e.msgFor(k), func(*message.Message) ([]*message.Message, error) {
		e.clock.Advance(150 * time.Millisecond) // SlowCallDuration is 100ms
		return nil, nil
	})
	if ev.Action != middleware.Delivered || !ev.Probe || ev.Latency != 150*time.Millisecond {
		t.Errorf("slow probe: event %+v", ev)
	}
	if s := b.Snapshot(); s.State != breaker.StateOpen || s.ConsecutiveTrips != trips+1 {
		t.Errorf("after a slow probe: %s, trips %d; want open, %d", s.State, s.ConsecutiveTrips, trips+1)
	}
	e.force(k, (*breaker.Breaker).Reset)
	ev = run(e.msgFor(k), func(*message.Message) ([]*message.Message, error) { panic("boom") })
	if ev.Action != middleware.Diverted || ev.Outcome != breaker.OutcomeFailure {
		t.Errorf("panic: event %+v, want diverted as a failure", ev)
	}
	if s := b.Snapshot(); s.Failures != 1 {
		t.Errorf("panic: breaker failures %d, want 1", s.Failures)
	}
}

// PartnerDrainGate follows each partner's breaker and bulkhead, and gives
// a partner the registry does not hold one message.
func TestPartnerDrainGate(t *testing.T) {
	e := newPartnerEnv(t, partner.Config{Template: partner.PartnerConfig{MaxInFlight: 3}}, nil)
	gate := middleware.PartnerDrainGate(e.reg)
	if n := gate("new").Budget(); n != middleware.UnknownPartnerBudget {
		t.Errorf("unknown partner: budget %d, want %d", n, middleware.UnknownPartnerBudget)
	}
	if !gate("new").(retryqueue.ClosedGate).Closed() {
		t.Error("unknown partner: not closed, want closed (a fresh breaker is)")
	}
	if _, ok := e.reg.Lookup("new"); ok {
		t.Error("the gate created the partner")
	}
	g := gate("A")
	closed := g.(retryqueue.ClosedGate).Closed
	_, lease, err := e.reg.Acquire("A")
	if err != nil {
		t.Fatal(err)
	}
	if n := g.Budget(); n != 2 || !closed() {
		t.Errorf("closed, 1 of 3 in flight: budget %d, closed %v; want 2, true", n, closed())
	}
	lease.Done(nil)
	e.force("A", (*breaker.Breaker).ForceOpen)
	if n := g.Budget(); n != 0 || closed() {
		t.Errorf("open: budget %d, closed %v; want 0, false", n, closed())
	}
	if n := gate("new").Budget(); n != 1 {
		t.Errorf("another partner's gate: budget %d, want 1", n)
	}
	e.force("A", (*breaker.Breaker).Reset)
	for range smallBreaker.MinimumCalls {
		if _, err := e.mw(failWith(errPartner503))(e.msgFor("A")); err != nil {
			t.Fatal(err)
		}
	}
	e.clock.Advance(2 * time.Second)
	if n := g.Budget(); n != smallBreaker.ProbeConcurrency || closed() {
		t.Errorf("half-open: budget %d, closed %v; want %d, false", n, closed(), smallBreaker.ProbeConcurrency)
	}
	defer func() {
		if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "nil registry") {
			t.Errorf("recovered %v, want a panic naming the nil registry", r)
		}
	}()
	middleware.PartnerDrainGate(nil)
}

// Event.Partner is the queue partner's token in single-breaker mode.
func TestSingleBreakerEventPartner(t *testing.T) {
	e := newEnv(t, smallBreaker)
	msg := newMsg()
	if _, err := e.mw(ok)(msg); err != nil {
		t.Fatal(err)
	}
	if ev := e.lastEvent(); ev.Partner != partner.Token(retryqueue.DefaultPartner) {
		t.Errorf("event partner %q, want %q", ev.Partner, partner.Token(retryqueue.DefaultPartner))
	}
}

func TestPartnerConfigValidate(t *testing.T) {
	b, q, reg := &breaker.Breaker{}, &retryqueue.Queue{}, &partner.Registry{}
	configtest.Run(t, middleware.ErrInvalidConfig, []configtest.Case[middleware.Config]{
		{Name: "partners", Cfg: middleware.Config{Partners: reg, PartnerKey: keyOf, Queue: q}},
		{Name: "partners with default", Cfg: middleware.Config{Partners: reg, PartnerKey: keyOf, DefaultPartner: "x", Queue: q}},
		{Name: "neither", Cfg: middleware.Config{Queue: q}, Want: "one of Breaker and Partners is required"},
		{Name: "both", Cfg: middleware.Config{Breaker: b, Partners: reg, PartnerKey: keyOf, Queue: q}, Want: "exactly one of Breaker and Partners"},
		{Name: "no PartnerKey", Cfg: middleware.Config{Partners: reg, Queue: q}, Want: "PartnerKey is required with Partners"},
		{Name: "PartnerKey with Breaker", Cfg: middleware.Config{Breaker: b, PartnerKey: keyOf, Queue: q}, Want: "PartnerKey and DefaultPartner are allowed with Partners only"},
		{Name: "DefaultPartner with Breaker", Cfg: middleware.Config{Breaker: b, DefaultPartner: "x", Queue: q}, Want: "PartnerKey and DefaultPartner are allowed with Partners only"},
	}, &configtest.Options[middleware.Config]{
		Snapshot: func(c middleware.Config) any {
			c.PartnerKey, c.IsPermanent, c.OnEvent = nil, nil, nil
			return c
		},
		New: func(c middleware.Config) error { _, err := middleware.New(c); return err },
	})
}
