package asyncmdn_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/floodgate-go/floodgate/deliver/as2"
	"github.com/floodgate-go/floodgate/deliver/as2/asyncmdn"
	"github.com/floodgate-go/floodgate/internal/natstest"
	"github.com/floodgate-go/floodgate/jsq"
	"github.com/floodgate-go/floodgate/metrics"
	"github.com/floodgate-go/floodgate/retryqueue"
)

// queue returns a retry queue of service on the env's retry and
// dead-letter streams.
func (e *env) queue(service string) *retryqueue.Queue {
	e.t.Helper()
	pub, err := jsq.NewPublisher(jsq.PublisherConfig{URL: e.url})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = pub.Close() })
	q, err := retryqueue.New(retryqueue.Config{Publisher: pub, Service: service, RetryTopic: e.retry,
		DeadLetterTopic: e.dead, PublishTimeout: 5 * time.Second})
	if err != nil {
		e.t.Fatal(err)
	}
	return q
}

// serviceReplica is a replica of q's service on the env's (shared) bucket,
// its Store stamping that service; its sender asks for MDNs at receiptURL
// ("" for its own endpoint).
func (e *env) serviceReplica(q *retryqueue.Queue, receiptURL string) *replica {
	e.t.Helper()
	r := &replica{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) { r.resolver.ServeHTTP(w, req) }))
	e.t.Cleanup(r.srv.Close)
	if receiptURL == "" {
		receiptURL = r.srv.URL + "/mdn"
	}
	store, err := asyncmdn.NewStore(testCtx(e.t), natstest.JetStream(e.t, natstest.Conn(e.t, e.url)),
		asyncmdn.StoreConfig{Bucket: e.bucket, Storage: jetstream.MemoryStorage, Service: q.Service()})
	if err != nil {
		e.t.Fatal(err)
	}
	cfg := e.pki.SenderConfig(e.psrv.URL)
	cfg.Timeout = 10 * time.Second
	cfg.MDNMode, cfg.AsyncMDNURL, cfg.Receipts, cfg.AsyncMDNTimeout = as2.MDNAsync, receiptURL, store, time.Hour
	if r.sender, err = as2.NewSender(cfg); err != nil {
		e.t.Fatal(err)
	}
	r.resolver, err = asyncmdn.New(asyncmdn.Config{Store: store, Senders: []*as2.Sender{r.sender}, Queue: q, Metrics: e.metrics,
		OnOutcome: func(o asyncmdn.Outcome) { r.mu.Lock(); r.outcomes = append(r.outcomes, o); r.mu.Unlock() }})
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

// record reads the pending record of id from the bucket; nil when none.
func (e *env) record(id string) *as2.PendingReceipt {
	e.t.Helper()
	rec, _, err := e.store(e.js, e.bucket).Get(testCtx(e.t), as2.MessageID(id, as2.DefaultMessageIDDomain))
	if errors.Is(err, as2.ErrUnknownReceipt) {
		return nil
	}
	if err != nil {
		e.t.Fatal(err)
	}
	return rec
}

// deadOn checks that id's dead letter is on the dead-letter subject of
// the route (service, partner-key), with that service in its route
// metadata and reason mdn-timeout.
func (e *env) deadOn(service, id string) {
	e.t.Helper()
	st, err := e.js.Stream(testCtx(e.t), e.dead)
	if err != nil {
		e.t.Fatal(err)
	}
	info, err := st.Info(testCtx(e.t))
	if err != nil {
		e.t.Fatal(err)
	}
	want := retryqueue.RouteSubject(e.dead, service, "partner-key")
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := st.GetMsg(testCtx(e.t), seq)
		if err != nil {
			e.t.Fatal(err)
		}
		if m.Header.Get(jsq.UUIDHeader) != id {
			continue
		}
		if m.Subject != want || m.Header.Get(retryqueue.MetaService) != service ||
			m.Header.Get(retryqueue.MetaDeadReason) != retryqueue.DeadReasonMDNTimeout {
			e.t.Fatalf("dead letter %s on %s, service %q, reason %q; want %s, %s, %s", id, m.Subject,
				m.Header.Get(retryqueue.MetaService), m.Header.Get(retryqueue.MetaDeadReason), want, service, retryqueue.DeadReasonMDNTimeout)
		}
		return
	}
	e.t.Fatalf("no dead letter for %s", id)
}

// Two services share one bucket, each with its own Store (Service set),
// Queue and Resolver: each sweep dead-letters only its own service's
// expired receipt, on its own route; a record naming no service (a Store
// without Service) is swept by whichever Resolver comes first, as before.
// The pending gauge counts the sweeping service's records only.
func TestSharedBucketSweepsOwnService(t *testing.T) {
	e := newEnv(t, nil)
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg, metrics.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e.metrics = m
	a := e.serviceReplica(e.q, "") // service "svc"
	b := e.serviceReplica(e.queue("svc-b"), "")
	legacy := e.replica("", nil) // a Store without Service
	e.sendAsync(a, "order-a")
	e.sendAsync(b, "order-b")
	e.sendAsync(legacy, "order-none")
	for id, want := range map[string]string{"order-a": "svc", "order-b": "svc-b", "order-none": ""} {
		if rec := e.record(id); rec.Service != want {
			t.Fatalf("record %s names service %q; want %q", id, rec.Service, want)
		}
	}
	if n, err := a.resolver.SweepAt(testCtx(t), time.Now()); n != 0 || err != nil {
		t.Fatalf("sweep before the deadlines = %d, %v; want 0", n, err)
	}
	if g := gathered(t, reg, metrics.NameAS2PendingReceipts); g != 2 {
		t.Fatalf("svc's pending gauge %v; want 2 (its own and the unnamed one, not svc-b's)", g)
	}
	late := time.Now().Add(2 * time.Hour) // AsyncMDNTimeout is 1h
	if n, err := b.resolver.SweepAt(testCtx(t), late); n != 2 || err != nil {
		t.Fatalf("svc-b's sweep = %d, %v; want 2 (its own and the one naming no service)", n, err)
	}
	if e.record("order-a") == nil || e.record("order-b") != nil || e.record("order-none") != nil {
		t.Fatal("svc-b's sweep: want svc's record pending, its own and the unnamed one dead-lettered")
	}
	e.deadOn("svc-b", "order-b")
	e.deadOn("svc-b", "order-none")
	if n, err := a.resolver.SweepAt(testCtx(t), late); n != 1 || err != nil {
		t.Fatalf("svc's sweep = %d, %v; want 1 (its own)", n, err)
	}
	e.deadOn("svc", "order-a")
	if dl := e.deadLetters(); len(dl) != 3 {
		t.Fatalf("%d dead letters; want 3, one per receipt", len(dl))
	}
	if len(a.got()) != 1 || a.got()[0].Receipt.MessageID != as2.MessageID("order-a", as2.DefaultMessageIDDomain) || len(b.got()) != 2 {
		t.Fatalf("outcomes svc %+v, svc-b %+v; want each its own", a.got(), b.got())
	}
}

// An MDN for svc-b's record posted to svc's endpoint (one receipt URL in
// front of both) resolves nothing and is answered 503, as an early MDN;
// the partner posts it again, reaches svc-b, and svc-b resolves it.
func TestSharedBucketMDNForOtherService(t *testing.T) {
	e := newEnv(t, nil)
	var front atomic.Pointer[replica] // which service the shared URL reaches
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		front.Load().resolver.ServeHTTP(w, req)
	}))
	t.Cleanup(srv.Close)
	a := e.serviceReplica(e.q, srv.URL+"/mdn")
	b := e.serviceReplica(e.queue("svc-b"), srv.URL+"/mdn")
	e.sendAsync(b, "order-b")
	front.Store(a)
	n, err := e.partner.PostReceipts(testCtx(t))
	if n != 0 || err == nil || !strings.Contains(err.Error(), "HTTP 503") {
		t.Fatalf("PostReceipts to svc = %d, %v; want 503", n, err)
	}
	if rec := e.record("order-b"); rec == nil || !rec.ClaimedUntil.IsZero() || len(a.got()) != 0 || len(b.got()) != 0 || len(e.deadLetters()) != 0 {
		t.Fatal("svc's endpoint resolved, claimed or dead-lettered svc-b's record")
	}
	front.Store(b)
	if n, err := e.partner.PostReceipts(testCtx(t)); n != 1 || err != nil {
		t.Fatalf("PostReceipts to svc-b = %d, %v; want 1", n, err)
	}
	if got := b.got(); len(got) != 1 || !got[0].Delivered() || e.record("order-b") != nil || len(a.got()) != 0 {
		t.Fatalf("outcomes svc %+v, svc-b %+v; want one delivered at svc-b", a.got(), got)
	}
}

// New refuses a Store of one service with a Queue of another; NewStore a
// Service retryqueue would refuse.
func TestStoreServiceValidation(t *testing.T) {
	e := newEnv(t, nil)
	store, err := asyncmdn.NewStore(testCtx(t), e.js, asyncmdn.StoreConfig{Bucket: e.bucket, Storage: jetstream.MemoryStorage, Service: "svc-b"})
	if err != nil {
		t.Fatal(err)
	}
	if store.Service() != "svc-b" || store.MaxRecordSize() != asyncmdn.DefaultMaxValueSize-len(`,"service":"svc-b"`) {
		t.Fatalf("Service %q, MaxRecordSize %d; want svc-b and room for the stamp", store.Service(), store.MaxRecordSize())
	}
	cfg := e.pki.SenderConfig(e.psrv.URL)
	cfg.MDNMode, cfg.AsyncMDNURL, cfg.Receipts = as2.MDNAsync, "http://127.0.0.1:1/mdn", store
	s, err := as2.NewSender(cfg)
	if err != nil {
		t.Fatal(err)
	}
	_, err = asyncmdn.New(asyncmdn.Config{Store: store, Senders: []*as2.Sender{s}, Queue: e.q})
	if !errors.Is(err, asyncmdn.ErrInvalidConfig) || !strings.Contains(err.Error(), "StoreConfig.Service") ||
		!strings.Contains(err.Error(), "Config.Queue.Service()") {
		t.Fatalf("New(store svc-b, queue svc) = %v; want ErrInvalidConfig naming both fields", err)
	}
	if _, err := asyncmdn.New(asyncmdn.Config{Store: store, Senders: []*as2.Sender{s}, Queue: e.queue("svc-b")}); err != nil {
		t.Fatalf("New(store svc-b, queue svc-b) = %v", err)
	}
	for _, bad := range []string{" svc", "svc ", "a\x00b", "a\nb", "a\x7fb", "a\u0085b", "\xff"} {
		_, err := asyncmdn.NewStore(testCtx(t), e.js, asyncmdn.StoreConfig{Bucket: e.bucket, Storage: jetstream.MemoryStorage, Service: bad})
		if !errors.Is(err, asyncmdn.ErrInvalidConfig) || !strings.Contains(err.Error(), "StoreConfig.Service") {
			t.Fatalf("NewStore(Service %q) = %v; want ErrInvalidConfig naming StoreConfig.Service", bad, err)
		}
	}
}

// PutPending stamps the Store's service on the record it stores, and
// leaves the caller's receipt as it was.
func TestPutPendingStampsService(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	store, err := asyncmdn.NewStore(testCtx(t), e.js, asyncmdn.StoreConfig{Bucket: e.bucket, Storage: jetstream.MemoryStorage, Service: "svc"})
	if err != nil {
		t.Fatal(err)
	}
	p := &as2.PendingReceipt{MessageID: "<x@floodgate>", ID: "x", From: "a", To: "b", Service: "other"}
	if err := store.PutPending(ctx, p); err != nil {
		t.Fatal(err)
	}
	rec, _, err := store.Get(testCtx(t), p.MessageID)
	if err != nil || rec.Service != "svc" || p.Service != "other" {
		t.Fatalf("stored %+v, %v; caller's %q; want the record naming svc, the caller's unchanged", rec, err, p.Service)
	}
}
