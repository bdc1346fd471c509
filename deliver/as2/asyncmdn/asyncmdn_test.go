package asyncmdn_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/floodgate-go/floodgate/deliver"
	"github.com/floodgate-go/floodgate/deliver/as2"
	"github.com/floodgate-go/floodgate/deliver/as2/as2partner"
	"github.com/floodgate-go/floodgate/deliver/as2/as2test"
	"github.com/floodgate-go/floodgate/deliver/as2/asyncmdn"
	"github.com/floodgate-go/floodgate/internal/natstest"
	"github.com/floodgate-go/floodgate/jsq"
	"github.com/floodgate-go/floodgate/metrics"
	"github.com/floodgate-go/floodgate/retryqueue"
)

const payload = "ISA*00*          *00*          *ZZ*FLOODGATE      *ZZ*PARTNER        *260101*1200*U*00401*000000001*0*P*>~"

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// env is one NATS server, one pending-receipt bucket, one dead-letter
// stream, an as2partner that holds its asynchronous MDNs, and replicas.
type env struct {
	t       *testing.T
	url     string
	js      jetstream.JetStream
	pki     *as2test.PKI
	partner *as2partner.Partner
	psrv    *httptest.Server
	bucket  string
	dead    string
	retry   string
	q       *retryqueue.Queue
	metrics *metrics.Metrics // given to the replicas' resolvers when set
}

func newEnv(t *testing.T, pmod func(*as2partner.Config)) *env {
	t.Helper()
	e := &env{t: t, url: natstest.URL(t)}
	e.js = natstest.JetStream(t, natstest.Conn(t, e.url))
	pki, err := as2test.New("floodgate", "partner")
	if err != nil {
		t.Fatal(err)
	}
	e.pki = pki
	e.bucket = natstest.Name(t, "receipts")
	e.dead = natstest.Name(t, "dead")
	e.retry = natstest.Name(t, "retry")
	pub, err := jsq.NewPublisher(jsq.PublisherConfig{URL: e.url})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pub.Close() })
	qcfg := retryqueue.Config{Publisher: pub, Service: "svc", RetryTopic: e.retry,
		DeadLetterTopic: e.dead, PublishTimeout: 5 * time.Second}
	natstest.DeleteStreams(t, e.js, qcfg.RetryTopic, qcfg.DeadLetterTopic, "OBJ_"+qcfg.DeadLetterTopic+"_payloads")
	if err := retryqueue.Provision(testCtx(t), e.js, qcfg); err != nil {
		t.Fatal(err)
	}
	if e.q, err = retryqueue.New(qcfg); err != nil {
		t.Fatal(err)
	}
	pcfg := pki.PartnerConfig()
	pcfg.Async = as2partner.AsyncConfig{AllowURLs: []string{"http://127.0.0.1"}, Hold: true}
	if pmod != nil {
		pmod(&pcfg)
	}
	if e.partner, err = as2partner.New(pcfg); err != nil {
		t.Fatal(err)
	}
	e.psrv = httptest.NewServer(e.partner)
	t.Cleanup(e.psrv.Close)
	return e
}

// store opens the shared bucket on its own connection.
func (e *env) store(js jetstream.JetStream, bucket string) *asyncmdn.Store {
	e.t.Helper()
	s, err := asyncmdn.NewStore(testCtx(e.t), js, asyncmdn.StoreConfig{Bucket: bucket, Storage: jetstream.MemoryStorage})
	if err != nil {
		e.t.Fatal(err)
	}
	return s
}

// replica is one process: its sender, its resolver and receipt endpoint.
type replica struct {
	sender   *as2.Sender
	resolver *asyncmdn.Resolver
	srv      *httptest.Server
	mu       sync.Mutex
	outcomes []asyncmdn.Outcome
}

func (r *replica) got() []asyncmdn.Outcome {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]asyncmdn.Outcome(nil), r.outcomes...)
}

// replica starts a replica on the env's bucket whose sender asks for MDNs
// at receiptURL ("" for its own endpoint); smod changes its sender config.
func (e *env) replica(receiptURL string, smod func(*as2.Config)) *replica {
	e.t.Helper()
	r := &replica{}
	var h atomic.Pointer[asyncmdn.Resolver]
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) { h.Load().ServeHTTP(w, req) }))
	e.t.Cleanup(r.srv.Close)
	if receiptURL == "" {
		receiptURL = r.srv.URL + "/mdn"
	}
	store := e.store(natstest.JetStream(e.t, natstest.Conn(e.t, e.url)), e.bucket)
	cfg := e.pki.SenderConfig(e.psrv.URL)
	cfg.Timeout = 10 * time.Second
	cfg.MDNMode, cfg.AsyncMDNURL, cfg.Receipts, cfg.AsyncMDNTimeout = as2.MDNAsync, receiptURL, store, time.Hour
	if smod != nil {
		smod(&cfg)
	}
	var err error
	if r.sender, err = as2.NewSender(cfg); err != nil {
		e.t.Fatal(err)
	}
	res, err := asyncmdn.New(asyncmdn.Config{Store: store, Senders: []*as2.Sender{r.sender}, Queue: e.q, Metrics: e.metrics,
		OnOutcome: func(o asyncmdn.Outcome) { r.mu.Lock(); r.outcomes = append(r.outcomes, o); r.mu.Unlock() }})
	if err != nil {
		e.t.Fatal(err)
	}
	h.Store(res)
	r.resolver = res
	return r
}

func (e *env) deadLetters() []*message.Message {
	e.t.Helper()
	return natstest.StreamMsgs(e.t, e.js, e.dead)
}

func (e *env) pending(s *asyncmdn.Store, id string) bool {
	e.t.Helper()
	_, _, err := s.Get(testCtx(e.t), as2.MessageID(id, as2.DefaultMessageIDDomain))
	if err != nil && !errors.Is(err, as2.ErrUnknownReceipt) {
		e.t.Fatal(err)
	}
	return err == nil
}

// sendAsync sends id under MDNAsync with partner key and metadata, and
// checks the record is stored by the time Send returns success.
func (e *env) sendAsync(r *replica, id string) {
	e.t.Helper()
	ctx := as2.WithOriginal(testCtx(e.t), "partner-key", map[string]string{"order": id})
	mdn, err := r.sender.Send(ctx, id, []byte(payload))
	if err != nil || mdn != nil {
		e.t.Fatalf("Send under async = %v, %v; want nil, nil", mdn, err)
	}
	if !e.pending(e.store(e.js, e.bucket), id) {
		e.t.Fatalf("Send returned success without a pending receipt for %s", id)
	}
}

func TestSyncAndAsyncOutcomes(t *testing.T) {
	e := newEnv(t, nil)
	// sync: the MDN is in the answer, nothing pending.
	scfg := e.pki.SenderConfig(e.psrv.URL)
	sync, err := as2.NewSender(scfg)
	if err != nil {
		t.Fatal(err)
	}
	mdn, err := sync.Send(testCtx(t), "sync-1", []byte(payload))
	if err != nil || mdn == nil || !mdn.Verified {
		t.Fatalf("sync Send = %+v, %v; want a verified MDN", mdn, err)
	}
	// async: 200 without a body, the record pending, the MDN held.
	r := e.replica("", nil)
	e.sendAsync(r, "async-1")
	if st := e.partner.AsyncStats(); st.Queued != 1 {
		t.Fatalf("partner AsyncStats %+v, want 1 queued", st)
	}
	if n, err := e.partner.PostReceipts(testCtx(t)); n != 1 || err != nil {
		t.Fatalf("PostReceipts = %d, %v", n, err)
	}
	if e.pending(e.store(e.js, e.bucket), "async-1") {
		t.Fatal("record still pending after its MDN was accepted")
	}
	got := r.got()
	if len(got) != 1 || !got[0].Delivered() || got[0].Err != nil || got[0].MDN == nil || !got[0].MDN.Verified {
		t.Fatalf("outcomes %+v; want one delivered with a verified MDN", got)
	}
	if d := e.deadLetters(); len(d) != 0 {
		t.Fatalf("%d dead letters, want 0", len(d))
	}
}

// An MDN posted to another replica's endpoint resolves the receipt: the
// record is in the shared bucket.
func TestReceiptResolvedBySecondReplica(t *testing.T) {
	e := newEnv(t, nil)
	b := e.replica("", nil)
	a := e.replica(b.srv.URL+"/mdn", nil) // a sends, b's endpoint gets the MDN
	e.sendAsync(a, "order-1")
	if n, err := e.partner.PostReceipts(testCtx(t)); n != 1 || err != nil {
		t.Fatalf("PostReceipts = %d, %v", n, err)
	}
	if len(a.got()) != 0 || len(b.got()) != 1 || !b.got()[0].Delivered() {
		t.Fatalf("outcomes a %+v, b %+v; want one delivered at b", a.got(), b.got())
	}
	if e.pending(e.store(e.js, e.bucket), "order-1") {
		t.Fatal("record still pending")
	}
	// The same MDN again (a partner retrying) resolves nothing more.
	e2 := b.got()[0].MDN
	resp, err := http.Post(b.srv.URL, contentType(t, e2), strings.NewReader(string(e2.Raw)))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || len(b.got()) != 1 {
		t.Fatalf("duplicate MDN: HTTP %d, %d outcomes; want 200 (already resolved: the partner stops) and still 1", resp.StatusCode, len(b.got()))
	}
}

// contentType rebuilds the multipart Content-Type of a raw MDN from its
// first boundary line.
func contentType(t *testing.T, m *as2.MDN) string {
	t.Helper()
	line, _, _ := strings.Cut(strings.TrimLeft(string(m.Raw), "\r\n"), "\r\n")
	b := strings.TrimPrefix(line, "--")
	if m.Signed {
		return `multipart/signed; protocol="application/pkcs7-signature"; micalg=sha-256; boundary="` + b + `"`
	}
	return `multipart/report; report-type=disposition-notification; boundary="` + b + `"`
}

// A negative receipt, or a MIC mismatch under the default policy, is a
// dead letter (reason permanent) carrying the original payload and
// metadata; WarnOnMICMismatch makes the mismatch a delivery with a warning.
func TestNegativeReceipts(t *testing.T) {
	for _, tt := range []struct {
		name  string
		pmod  func(*as2partner.Config)
		smod  func(*as2.Config)
		dead  bool
		warn  string
		errIs error
	}{
		{"processed/error", func(c *as2partner.Config) { c.AS2ID = "someone-else" }, nil, true, "", as2.ErrNotProcessed},
		{"MIC mismatch", func(c *as2partner.Config) { c.WrongMIC = true }, nil, true, "", as2.ErrMICMismatch},
		{"MIC mismatch, warn", func(c *as2partner.Config) { c.WrongMIC = true }, func(c *as2.Config) { c.WarnOnMICMismatch = true }, false, deliver.WarnMICMismatch, as2.ErrMICMismatch},
		{"no MIC, RequireMIC", func(c *as2partner.Config) { c.OmitMIC = true }, func(c *as2.Config) { c.RequireMIC = true }, true, "", as2.ErrMICMissing},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, tt.pmod)
			r := e.replica("", tt.smod)
			e.sendAsync(r, "order-1")
			if n, err := e.partner.PostReceipts(testCtx(t)); n != 1 || err != nil {
				t.Fatalf("PostReceipts = %d, %v", n, err)
			}
			got := r.got()
			if len(got) != 1 || !errors.Is(got[0].Err, tt.errIs) {
				t.Fatalf("outcomes %+v; want one with Is %v", got, tt.errIs)
			}
			if e.pending(e.store(e.js, e.bucket), "order-1") {
				t.Fatal("record still pending")
			}
			dl := e.deadLetters()
			if !tt.dead {
				if !got[0].Delivered() || deliver.AsWarning(got[0].Err).Reason != tt.warn || len(dl) != 0 {
					t.Fatalf("outcome %+v, %d dead letters; want delivered with warning %s", got[0], len(dl), tt.warn)
				}
				return
			}
			if got[0].DeadReason != retryqueue.DeadReasonPermanent || !deliver.IsPermanent(got[0].Err) || len(dl) != 1 {
				t.Fatalf("outcome %+v, %d dead letters; want one permanent dead letter", got[0], len(dl))
			}
			checkDead(t, dl[0], "order-1", retryqueue.DeadReasonPermanent)
		})
	}
}

func checkDead(t *testing.T, m *message.Message, id, reason string) {
	t.Helper()
	if m.UUID != id || string(m.Payload) != payload || m.Metadata.Get("order") != id ||
		m.Metadata.Get(retryqueue.MetaDeadReason) != reason ||
		m.Metadata.Get(asyncmdn.MetaMessageID) != as2.MessageID(id, as2.DefaultMessageIDDomain) {
		t.Fatalf("dead letter %s %q %v; want %s with the original payload, metadata and reason %s", m.UUID, m.Payload, m.Metadata, id, reason)
	}
	if k, ok := retryqueue.PartnerKey(m); !ok || k != "partner-key" {
		t.Fatalf("dead letter partner key %q, %v; want partner-key", k, ok)
	}
}

// An MDN whose signature does not verify, or that answers no pending
// receipt, gets a clear answer and resolves nothing.
func TestForgedOrUnknownMDNResolvesNothing(t *testing.T) {
	t.Run("bad signature", func(t *testing.T) {
		e := newEnv(t, nil)
		// The endpoint's sender expects MDNs signed by another certificate.
		r := e.replica("", func(c *as2.Config) { c.MDNCert = e.pki.Sender.Cert })
		e.sendAsync(r, "order-1")
		n, err := e.partner.PostReceipts(testCtx(t))
		if n != 0 || err == nil || !strings.Contains(err.Error(), "HTTP 403") {
			t.Fatalf("PostReceipts = %d, %v; want the post refused with 403", n, err)
		}
		if !e.pending(e.store(e.js, e.bucket), "order-1") || len(r.got()) != 0 || len(e.deadLetters()) != 0 {
			t.Fatal("a forged MDN resolved the receipt")
		}
	})
	t.Run("unknown Message-ID", func(t *testing.T) {
		e := newEnv(t, nil)
		r := e.replica("", nil)
		// Another bucket holds the record, and the Message-ID's domain is
		// not the endpoint's Senders': not ours.
		other := e.store(e.js, natstest.Name(t, "other"))
		cfg := r.sender.Config()
		cfg.Receipts, cfg.MessageIDDomain = other, "elsewhere.example"
		s, err := as2.NewSender(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Send(testCtx(t), "order-2", []byte(payload)); err != nil {
			t.Fatal(err)
		}
		n, err := e.partner.PostReceipts(testCtx(t))
		if n != 0 || err == nil || !strings.Contains(err.Error(), "HTTP 404") {
			t.Fatalf("PostReceipts = %d, %v; want 404", n, err)
		}
		if len(r.got()) != 0 || len(e.deadLetters()) != 0 {
			t.Fatal("an unknown MDN resolved something")
		}
	})
	t.Run("not an MDN", func(t *testing.T) {
		e := newEnv(t, nil)
		r := e.replica("", nil)
		resp, err := http.Post(r.srv.URL, "text/plain", strings.NewReader("hello"))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("HTTP %d, want 400", resp.StatusCode)
		}
	})
}

// No MDN by the deadline: one dead letter "mdn-timeout" with the original
// message, however many replicas sweep at once; never a resend.
func TestDeadlineSweepDeadLettersOnce(t *testing.T) {
	e := newEnv(t, nil)
	rs := []*replica{e.replica("", nil), e.replica("", nil), e.replica("", nil)}
	start := time.Now()
	e.sendAsync(rs[0], "order-1")
	e.sendAsync(rs[0], "order-2")
	if n, err := rs[1].resolver.SweepAt(testCtx(t), start); n != 0 || err != nil {
		t.Fatalf("sweep before the deadline = %d, %v; want 0", n, err)
	}
	late := start.Add(2 * time.Hour) // AsyncMDNTimeout is 1h
	var total atomic.Int64
	var wg sync.WaitGroup
	for _, r := range rs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n, err := r.resolver.SweepAt(testCtx(t), late)
			if err != nil {
				t.Error(err)
			}
			total.Add(int64(n))
		}()
	}
	wg.Wait()
	dl := e.deadLetters()
	if total.Load() != 2 || len(dl) != 2 {
		t.Fatalf("swept %d, %d dead letters; want 2 and 2 (one per receipt)", total.Load(), len(dl))
	}
	for _, m := range dl {
		checkDead(t, m, m.UUID, retryqueue.DeadReasonMDNTimeout)
	}
	if got := e.partner.Received()[as2.MessageID("order-1", as2.DefaultMessageIDDomain)]; got != 1 {
		t.Fatalf("partner received order-1 %d times; want 1 (no resend)", got)
	}
	// A late MDN finds its record resolved: answered 200 (so the partner
	// stops posting it), resolving nothing again.
	outcomes := func() (n int) {
		for _, r := range rs {
			n += len(r.got())
		}
		return n
	}
	before := outcomes()
	if n, err := e.partner.PostReceipts(testCtx(t)); n != 2 || err != nil {
		t.Fatalf("late MDNs: PostReceipts = %d, %v; want both answered 200", n, err)
	}
	if after := outcomes(); after != before || len(e.deadLetters()) != 2 {
		t.Fatalf("late MDNs made %d more outcomes, %d dead letters; want none more", after-before, len(e.deadLetters()))
	}
	if n, _ := rs[2].resolver.SweepAt(testCtx(t), late.Add(time.Hour)); n != 0 || len(e.deadLetters()) != 2 {
		t.Fatal("a second sweep dead-lettered again")
	}
}

// A claim left by a replica that died mid-resolution expires, and the
// record is swept again.
func TestSweepTakesOverExpiredClaim(t *testing.T) {
	e := newEnv(t, nil)
	r := e.replica("", nil)
	e.sendAsync(r, "order-1")
	// Claim it as a dying replica would, by hand: the record's own fields.
	s := e.store(e.js, e.bucket)
	rec, _, err := s.Get(testCtx(t), as2.MessageID("order-1", as2.DefaultMessageIDDomain))
	if err != nil {
		t.Fatal(err)
	}
	late := rec.Deadline.Add(time.Second)
	rec.ClaimedUntil = late.Add(asyncmdn.DefaultClaimLease)
	if err := s.PutPending(testCtx(t), rec); err != nil {
		t.Fatal(err)
	}
	if n, err := r.resolver.SweepAt(testCtx(t), late); n != 0 || err != nil {
		t.Fatalf("sweep during the claim = %d, %v; want 0", n, err)
	}
	if n, err := r.resolver.SweepAt(testCtx(t), rec.ClaimedUntil); n != 1 || err != nil {
		t.Fatalf("sweep after the claim expired = %d, %v; want 1", n, err)
	}
}

// The pending record is written before Send reports success: with the
// store's connection closed while the partner handles the POST, Send
// fails, retryable, so the source message is not acked.
func TestSendFailsWhenRecordNotStored(t *testing.T) {
	e := newEnv(t, nil)
	nc := natstest.Conn(t, e.url)
	store := e.store(natstest.JetStream(t, nc), e.bucket)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		nc.Close() // mid-flight: the partner takes the message, the store is gone
		e.partner.ServeHTTP(w, req)
	}))
	t.Cleanup(srv.Close)
	cfg := e.pki.SenderConfig(srv.URL)
	cfg.MDNMode, cfg.AsyncMDNURL, cfg.Receipts = as2.MDNAsync, "http://127.0.0.1:1/mdn", store
	cfg.Timeout = 5 * time.Second
	s, err := as2.NewSender(cfg)
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Send(testCtx(t), "order-1", []byte(payload))
	if !errors.Is(err, as2.ErrPendingStore) || !deliver.IsRetryable(err) || deliver.IsWarning(err) {
		t.Fatalf("Send = %v; want a retryable ErrPendingStore", err)
	}
	if e.pending(e.store(e.js, e.bucket), "order-1") {
		t.Fatal("record stored although the store was closed")
	}
}

// A payload the record could not carry is refused before it is sent.
func TestAsyncPayloadTooLarge(t *testing.T) {
	e := newEnv(t, nil)
	r := e.replica("", nil)
	big := make([]byte, e.store(e.js, e.bucket).MaxPayload()+1)
	for i := range big {
		big[i] = 'x'
	}
	_, err := r.sender.Send(testCtx(t), "big-1", big)
	if !errors.Is(err, as2.ErrPendingTooLarge) || !deliver.IsPermanent(err) {
		t.Fatalf("Send = %v; want permanent ErrPendingTooLarge", err)
	}
	if e.partner.Stats().Requests != 0 {
		t.Fatal("the partner got the message")
	}
}

func TestKeyIsSubjectSafe(t *testing.T) {
	for _, id := range []string{"<a@b>", "a.b.*.>", "<x y\r\nz@evil>", strings.Repeat("é", 300)} {
		k := asyncmdn.Key(id)
		if !strings.HasPrefix(k, "r.") || len(k) != 66 || strings.ContainsAny(k[2:], ".*> \r\n") {
			t.Fatalf("Key(%q) = %q", id, k)
		}
	}
	if asyncmdn.Key("<a@b>") != asyncmdn.Key("a@b") {
		t.Fatal("Key depends on angle brackets")
	}
}

func TestConfigValidation(t *testing.T) {
	if _, err := asyncmdn.New(asyncmdn.Config{}); !errors.Is(err, asyncmdn.ErrInvalidConfig) || !strings.Contains(err.Error(), "Config.Store") {
		t.Fatalf("New(zero) = %v", err)
	}
	js := natstest.JetStream(t, natstest.Conn(t, natstest.URL(t)))
	for _, c := range []asyncmdn.StoreConfig{{Bucket: "a.b"}, {TTL: -1}, {MaxValueSize: 1000}} {
		if _, err := asyncmdn.NewStore(testCtx(t), js, c); !errors.Is(err, asyncmdn.ErrInvalidConfig) {
			t.Fatalf("NewStore(%+v) = %v", c, err)
		}
	}
}
