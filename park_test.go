package floodgate_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/floodgate-go/floodgate"
	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/breaker/natskv"
	"github.com/floodgate-go/floodgate/deliver/as2"
	"github.com/floodgate-go/floodgate/deliver/as2/as2partner"
	"github.com/floodgate-go/floodgate/deliver/as2/as2test"
	"github.com/floodgate-go/floodgate/internal/natstest"
	"github.com/floodgate-go/floodgate/partner"
	"github.com/floodgate-go/floodgate/retryqueue"
)

// Two AS2 partners through the whole middleware (router, embedded NATS,
// fleet on a KV bucket): partner A signs its MDNs with a certificate that
// is not the pinned one. A is parked: its breaker forced open with the
// reason in the shared state that "floodgate status" shows, its messages
// kept in the retry stream, none dead-lettered. B keeps delivering and is
// never parked. Once the operator pins the right certificate and runs
// "floodgate close" (the same KV write), A's messages are all delivered:
// 0 lost.
func TestBadCertificateParksOnlyItsPartner(t *testing.T) {
	e := newEnv(t)
	rt := newRoute(t, e)
	bucket := natstest.Name(t, "breakers")
	t.Cleanup(func() { _ = e.js.DeleteKeyValue(context.Background(), bucket) })
	store, err := natskv.New(context.Background(), e.js, natskv.Config{Bucket: bucket, Storage: jetstream.MemoryStorage})
	if err != nil {
		t.Fatal(err)
	}
	pki, err := as2test.New("BUYER", "SUPPLIER")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	mallory, err := pki.Issue("SUPPLIER-UNPINNED", now.Add(-time.Hour), now.Add(24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}

	// B: healthy, signs its MDNs with the pinned certificate. A: signs them
	// with another one (and takes unencrypted messages).
	start := func(cfg as2partner.Config) (*as2partner.Partner, string) {
		p, err := as2partner.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(p)
		t.Cleanup(srv.Close)
		return p, srv.URL
	}
	partnerB, urlB := start(pki.PartnerConfig())
	cfgA := pki.PartnerConfig()
	cfgA.Cert, cfgA.Key, cfgA.RequireEncrypted = mallory.Cert, mallory.Key, false
	partnerA, urlA := start(cfgA)
	newSender := func(url string, mod func(*as2.Config)) *as2.Sender {
		cfg := pki.SenderConfig(url)
		cfg.Timeout = 10 * time.Second
		if mod != nil {
			mod(&cfg)
		}
		s, err := as2.NewSender(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	senders := map[string]*atomic.Pointer[as2.Sender]{"A": {}, "B": {}}
	senders["A"].Store(newSender(urlA, func(c *as2.Config) { c.EncryptionCert = nil })) // pins pki.Partner's certificate
	senders["B"].Store(newSender(urlB, nil))

	rep := startReplica(t, e, rt, nil, func(c *floodgate.Config) {
		c.OnTransition = nil
		c.Fleet = &breaker.FleetConfig{Store: store, Replica: "r1"}
		c.Deliver = func(msg *message.Message) error {
			s := senders[msg.Metadata.Get("partner")].Load()
			_, err := s.Send(msg.Context(), msg.UUID, msg.Payload)
			return err
		}
	})

	const per = 20
	for i := range per {
		for _, k := range []string{"A", "B"} {
			m := message.NewMessage(fmt.Sprintf("%s-%d", k, i), []byte(fmt.Sprintf("ISA*00*order %s %d~", k, i)))
			m.Metadata.Set("partner", k)
			if err := e.pub.Publish(rt.topic, m); err != nil {
				t.Fatal(err)
			}
		}
	}
	received := func(p *as2partner.Partner, key string) int {
		n := 0
		for id := range p.Received() {
			if strings.HasPrefix(id, "<"+key+"-") {
				n++
			}
		}
		return n
	}
	natstest.Eventually(t, 60*time.Second, func() bool { return received(partnerB, "B") == per },
		"B delivers while A is parked (%d of %d)", natstest.Now(func() any { return received(partnerB, "B") }), per)

	service := retryqueue.ServiceName(rt.topic, "as2")
	shared := func(key string) breaker.SharedState {
		st, _, err := store.Load(context.Background(), partner.FleetName(service, key))
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	natstest.Eventually(t, 30*time.Second, func() bool { st := shared("A"); return st.State == breaker.StateOpen && st.Forced },
		"A parked: forced open in the shared state")
	if r := shared("A").Reason; !strings.HasPrefix(r, "forced open: ") || !strings.Contains(r, "as2-trust") || !strings.Contains(r, "not the pinned one") {
		t.Errorf("A's shared reason %q, want forced open with the trust error", r)
	}
	pa, _ := rep.fg.Partners().Lookup("A")
	if s := pa.Breaker().Snapshot(); s.State != breaker.StateOpen || !s.Forced {
		t.Errorf("A's breaker %+v, want forced open", s)
	}
	pb, _ := rep.fg.Partners().Lookup("B")
	if s := pb.Breaker().Snapshot(); s.State != breaker.StateClosed || s.Forced {
		t.Errorf("B's breaker %+v, want closed: only A is parked", s)
	}
	if st := shared("B"); st.Forced {
		t.Errorf("B's shared state %+v is forced", st)
	}
	// Every one of A's messages waits in the retry stream; none is dead.
	inRetry := func() int {
		ids := map[string]bool{}
		for _, m := range natstest.StreamMsgs(t, e.js, rt.retry) {
			if strings.HasPrefix(m.UUID, "A-") {
				ids[m.UUID] = true
			}
		}
		return len(ids)
	}
	natstest.Eventually(t, 30*time.Second, func() bool { return inRetry() == per },
		"A's messages in the retry stream (%d of %d)", natstest.Now(func() any { return inRetry() }), per)
	if n := len(natstest.StreamMsgs(t, e.js, rt.dead)); n != 0 {
		t.Fatalf("%d dead letters while A is parked, want 0", n)
	}
	parkedCalls := partnerA.Stats()

	// The operator pins A's new certificate, then un-parks A as
	// "floodgate close" does: closed, not forced, in the shared state.
	senders["A"].Store(newSender(urlA, func(c *as2.Config) { c.EncryptionCert, c.MDNCert = nil, mallory.Cert }))
	for {
		cur, rev, err := store.Load(context.Background(), partner.FleetName(service, "A"))
		if err != nil {
			t.Fatal(err)
		}
		next := cur
		next.State, next.Forced, next.OpenUntil = breaker.StateClosed, false, time.Time{}
		next.Epoch, next.Successes, next.RampStart = cur.Epoch+1, 0, time.Time{}
		next.By, next.Reason, next.UpdatedAt = "floodgate-cli", "operator: floodgate close", time.Now()
		if _, err := store.CompareAndSwap(context.Background(), partner.FleetName(service, "A"), next, rev); err == nil {
			break
		}
	}
	natstest.Eventually(t, 60*time.Second, func() bool { return received(partnerA, "A") == per },
		"A's messages delivered after the un-park (%d of %d)", natstest.Now(func() any { return received(partnerA, "A") }), per)
	natstest.Eventually(t, 30*time.Second, func() bool { return rep.settled("A") && rep.settled("B") },
		"A and B closed with no backlog")
	if n := len(natstest.StreamMsgs(t, e.js, rt.dead)); n != 0 {
		t.Errorf("%d dead letters, want 0", n)
	}
	t.Logf("A's partner saw %+v while parked; %d of A's messages kept and delivered after the un-park", parkedCalls, per)
}
