package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/floodgate-go/floodgate/deliver/as2"
	"github.com/floodgate-go/floodgate/deliver/as2/as2partner"
	"github.com/floodgate-go/floodgate/deliver/as2/as2test"
	"github.com/floodgate-go/floodgate/deliver/as2/asyncmdn"
	"github.com/floodgate-go/floodgate/internal/natsconn"
	"github.com/floodgate-go/floodgate/internal/natsserver"
	"github.com/floodgate-go/floodgate/internal/natstest"
	"github.com/floodgate-go/floodgate/jsq"
	"github.com/floodgate-go/floodgate/permissions"
	"github.com/floodgate-go/floodgate/retryqueue"
)

// TestPermissionsAsyncMDNAndSource runs, on a TLS server, a service whose
// user has only the generated permissions (with its pending-receipts
// bucket and its source topic): a jsq subscriber consumes the source, an
// AS2 sender in asynchronous mode stores pending receipts, the Resolver
// resolves one receipt posted by the partner and dead-letters another at
// its deadline, all without a permission violation. Another service's user
// is denied the bucket and the source's consumer, each through the
// asynchronous permission-violation error naming the subject.
func TestPermissionsAsyncMDNAndSource(t *testing.T) {
	const (
		svcA, svcB = "orders/as2", "invoices/webhook"
		source     = "edi.orders.in"
		n          = 5
	)
	ownA := permissions.Config{Role: permissions.RoleService, Service: svcA, RetryTopic: "retry_a", DeadLetterTopic: "dead_a",
		ReceiptBucket: "rcpt_a", Sources: []permissions.Source{{Topic: source}}}
	ownB := permissions.Config{Role: permissions.RoleService, Service: svcB, RetryTopic: "retry_b", DeadLetterTopic: "dead_b",
		ReceiptBucket: "rcpt_b", Sources: []permissions.Source{{Topic: source, Consumer: "invoices"}}}
	caFile, tlsCfg := testPKI(t)
	srv, err := natsserver.Start(natsserver.Options{TLS: tlsCfg, Users: []*server.User{
		{Username: "a", Password: "pa", Permissions: serverPerms(t, ownA)},
		{Username: "b", Password: "pb", Permissions: serverPerms(t, ownB)},
		{Username: "producer", Password: "pp"}, // no permissions: all allowed
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	url := srv.ClientURL()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second) // hang guard
	defer cancel()
	connect := func(user, pass, service string) (*nats.Conn, jetstream.JetStream, *violations) {
		t.Helper()
		v := &violations{}
		nc, err := natsconn.Options{Server: url, User: user, Password: pass, TLSCA: caFile, InboxPrefix: permissions.InboxPrefix(service)}.Connect(user, nats.ErrorHandler(v.handler))
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
	_, jsA, vA := connect("a", "pa", svcA)
	ncB, _, vB := connect("b", "pb", svcB)
	_, jsP, _ := connect("producer", "pp", "producer")

	// The source: a producer publishes, A's jsq subscriber consumes and
	// acks with its own durable consumer.
	prod, err := jsq.NewPublisher(jsq.PublisherConfig{JetStream: jsP})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := jsq.EnsureStream(ctx, jsP, source); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		if err := prod.Publish(source, message.NewMessage(watermill.NewUUID(), []byte("po"))); err != nil {
			t.Fatal(err)
		}
	}
	sub, err := jsq.NewSubscriber(jsq.SubscriberConfig{JetStream: jsA, FetchWait: 200 * time.Millisecond, AckWait: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	msgs, err := sub.Subscribe(ctx, source)
	if err != nil {
		t.Fatalf("subscribe under A's permissions: %v", err)
	}
	for i := 0; i < n; i++ {
		select {
		case m := <-msgs:
			m.Ack()
		case <-ctx.Done():
			t.Fatalf("received %d of %d source messages under A's permissions", i, n)
		}
	}
	cons := jsq.DefaultConsumerName(source)
	natstest.Eventually(t, 10*time.Second, func() bool {
		c, err := jsP.Consumer(ctx, jsq.StreamName(source), cons)
		if err != nil {
			return false
		}
		ci, err := c.Info(ctx)
		return err == nil && ci.NumAckPending == 0 && ci.NumPending == 0 && ci.AckFloor.Stream == n
	}, "A's acks did not reach the source's consumer")

	// Asynchronous MDNs: A's sender stores pending receipts in A's bucket;
	// the partner's MDN resolves one, the deadline sweep dead-letters the
	// other through A's retry queue.
	pki, err := as2test.New("floodgate", "partner")
	if err != nil {
		t.Fatal(err)
	}
	pcfg := pki.PartnerConfig()
	pcfg.Async = as2partner.AsyncConfig{AllowURLs: []string{"http://127.0.0.1"}, Hold: true}
	ptr, err := as2partner.New(pcfg)
	if err != nil {
		t.Fatal(err)
	}
	psrv := httptest.NewServer(ptr)
	defer psrv.Close()
	q := queueAs(t, ctx, jsA, ownA, "")
	store, err := asyncmdn.NewStore(ctx, jsA, asyncmdn.StoreConfig{Bucket: ownA.ReceiptBucket})
	if err != nil {
		t.Fatalf("receipt store under A's permissions: %v", err)
	}
	var mu sync.Mutex
	var outcomes []asyncmdn.Outcome
	var h atomic.Pointer[asyncmdn.Resolver]
	rsrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h.Load().ServeHTTP(w, r) }))
	defer rsrv.Close()
	scfg := pki.SenderConfig(psrv.URL)
	scfg.Timeout = 10 * time.Second
	scfg.MDNMode, scfg.AsyncMDNURL, scfg.Receipts, scfg.AsyncMDNTimeout = as2.MDNAsync, rsrv.URL+"/mdn", store, time.Hour
	sender, err := as2.NewSender(scfg)
	if err != nil {
		t.Fatal(err)
	}
	res, err := asyncmdn.New(asyncmdn.Config{Store: store, Senders: []*as2.Sender{sender}, Queue: q,
		OnOutcome: func(o asyncmdn.Outcome) { mu.Lock(); outcomes = append(outcomes, o); mu.Unlock() }})
	if err != nil {
		t.Fatal(err)
	}
	h.Store(res)
	start := time.Now()
	for _, id := range []string{"order-1", "order-2"} {
		if mdn, err := sender.Send(as2.WithOriginal(ctx, "acme", nil), id, []byte("ISA*00~")); err != nil || mdn != nil {
			t.Fatalf("async Send %s under A's permissions = %v, %v", id, mdn, err)
		}
		if _, _, err := store.Get(ctx, as2.MessageID(id, as2.DefaultMessageIDDomain)); err != nil {
			t.Fatalf("pending receipt %s: %v", id, err)
		}
		if id == "order-1" {
			if k, err := ptr.PostReceipts(ctx); k != 1 || err != nil {
				t.Fatalf("partner posted %d receipts: %v", k, err)
			}
		}
	}
	if k, err := res.SweepAt(ctx, start.Add(2*time.Hour)); k != 1 || err != nil {
		t.Fatalf("sweep under A's permissions = %d, %v; want 1 dead letter", k, err)
	}
	mu.Lock()
	got := append([]asyncmdn.Outcome(nil), outcomes...)
	mu.Unlock()
	if len(got) != 2 || !got[0].Delivered() || got[1].DeadReason != retryqueue.DeadReasonMDNTimeout {
		t.Fatalf("outcomes %+v; want order-1 delivered, order-2 %s", got, retryqueue.DeadReasonMDNTimeout)
	}
	if st, err := jsP.Stream(ctx, ownA.DeadLetterTopic); err != nil || st.CachedInfo().State.Msgs != 1 {
		t.Errorf("dead letters: %v; want 1", err)
	}

	// B is denied A's bucket and A's consumer on the shared source.
	denied := []string{
		"$KV.rcpt_a." + asyncmdn.Key("order-3"),
		"$JS.API.STREAM.INFO.KV_rcpt_a",
		"$JS.API.DIRECT.GET.KV_rcpt_a",
		"$JS.API.STREAM.MSG.GET.KV_rcpt_a",
		"$JS.API.CONSUMER.CREATE.KV_rcpt_a.x.$KV.rcpt_a.>",
		"$JS.API.CONSUMER.MSG.NEXT." + jsq.StreamName(source) + "." + cons,
		"$JS.API.CONSUMER.INFO." + jsq.StreamName(source) + "." + cons,
		"$JS.ACK." + jsq.StreamName(source) + "." + cons + ".1.1.1.1.1",
	}
	for _, s := range denied {
		if err := ncB.Publish(s, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := ncB.Flush(); err != nil {
		t.Fatal(err)
	}
	for _, s := range denied {
		natstest.Eventually(t, 30*time.Second, func() bool { return vB.has(s) }, "b: no permission violation for publish to %q", s)
	}
	vA.mu.Lock()
	defer vA.mu.Unlock()
	if len(vA.seen) > 0 {
		t.Errorf("service A met permission violations (the generator misses a subject): %q", vA.seen)
	}
}

// TestPermissionsCommandReceiptsAndSources: -receipt-bucket and -source
// (repeatable, topic[=consumer]) reach the generated set.
func TestPermissionsCommandReceiptsAndSources(t *testing.T) {
	code, out, errOut := runCmd("permissions", "-role", "service", "-service", "orders/as2", "-retry-topic", "retry_o", "-dead-topic", "dead_o",
		"-receipt-bucket", "rcpt_o", "-source", "edi.orders", "-source", "flat=mine", "-format", "json")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var set permissions.Set
	if err := json.Unmarshal([]byte(out), &set); err != nil {
		t.Fatal(err)
	}
	want := append(asyncmdn.ServiceAccess("rcpt_o"), jsq.SubscriberAccess("edi.orders", jsq.DefaultConsumerName("edi.orders"))...)
	for _, w := range append(want, jsq.SubscriberAccess("flat", "mine")...) {
		if !slices.Contains(set.Publish.Allow, w) {
			t.Errorf("publish allow lacks %q", w)
		}
	}
	if code, _, errOut := runCmd("permissions", "-role", "service", "-service", "s", "-retry-topic", "r", "-dead-topic", "d", "-source", "a.*"); code != exitUsage || !strings.Contains(errOut, "Sources[0].Topic") {
		t.Errorf("-source a.*: exit %d, %q; want a usage error naming Sources[0].Topic", code, errOut)
	}
}
