package floodgate_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
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
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"

	"github.com/floodgate-go/floodgate"
	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/breaker/natskv"
	"github.com/floodgate-go/floodgate/deliver/as2"
	"github.com/floodgate-go/floodgate/deliver/as2/as2partner"
	"github.com/floodgate-go/floodgate/deliver/as2/as2test"
	"github.com/floodgate-go/floodgate/deliver/as2/asyncmdn"
	"github.com/floodgate-go/floodgate/deliver/webhook"
	"github.com/floodgate-go/floodgate/internal/natsconn"
	"github.com/floodgate-go/floodgate/internal/natsserver"
	"github.com/floodgate-go/floodgate/internal/natstest"
	"github.com/floodgate-go/floodgate/internal/redact/leaktest"
	"github.com/floodgate-go/floodgate/jsq"
	"github.com/floodgate-go/floodgate/middleware"
	"github.com/floodgate-go/floodgate/partner"
	"github.com/floodgate-go/floodgate/retryqueue"
)

// syncBuffer is a bytes.Buffer safe for the concurrent writes of loggers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// echo answers status with the request's credential headers in the body,
// as a careless partner's error page does.
func echo(status int) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(status)
		// Authorization and the signatures first, the rest sorted: the
		// senders quote only the first 200 bytes of an answer, and a map's
		// random order would sometimes leave the secrets out of the quote.
		keys := slices.SortedFunc(maps.Keys(r.Header), func(a, b string) int {
			return cmp.Or(cmp.Compare(echoRank(a), echoRank(b)), strings.Compare(a, b))
		})
		for _, k := range keys {
			fmt.Fprintf(w, "%s: %s\n", k, strings.Join(r.Header[k], ", "))
		}
	}))
}

// echoRank orders the echoed header fields: the secret-bearing ones first.
func echoRank(k string) int {
	switch {
	case k == "Authorization":
		return 0
	case strings.HasSuffix(strings.ToLower(k), "signature"):
		return 1
	}
	return 2
}

// TestCanarySecretsNeverLeak sets every secret to a distinct canary (the
// webhook signing secret, an API key header and a secret in a webhook
// URL's path, the NATS password, the AS2 sender's and partner's private
// keys, an asynchronous-MDN partner's keys, an untrusted MDN signer's
// key), runs webhook and AS2 deliveries through failures, MDN errors, a
// panicking handler and dead letters with everything logged, an
// asynchronous MDN path (a negative receipt and a forged post to the
// receipt endpoint; the negative one ends in a dead letter), and a partner
// parked by an MDN signed with an untrusted certificate, and asserts that
// no form of a canary appears in the logs (slog and Watermill), the
// events, the metrics, the receipt endpoint's answers and outcomes, the
// parked partner's status (its shared breaker state), or the retry and
// dead-letter streams (payloads and metadata).
func TestCanarySecretsNeverLeak(t *testing.T) {
	hookSecret := []byte("canary-hook-secret-5e1f9a0c2b7d4")
	apiKey := "canary-api-key-3b8e"
	natsPass := "canary-nats-pass-91c4"
	pathSecret := "CanaryPathSecret7f3d2a" // Slack-style: the URL path is the secret
	pki, err := as2test.New("CanarySender", "CanaryPartner")
	if err != nil {
		t.Fatal(err)
	}
	// The asynchronous-MDN partner has its own keys; the parked partner
	// signs its MDNs with an untrusted certificate.
	pkiAsync, err := as2test.New("CanaryAsyncSender", "CanaryAsyncPartner")
	if err != nil {
		t.Fatal(err)
	}
	untrusted, err := pki.Issue("CanaryUntrusted", time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	forms := slices.Concat(leaktest.Forms(hookSecret), leaktest.Forms([]byte(apiKey)), leaktest.Forms([]byte(natsPass)), leaktest.Forms([]byte(pathSecret)),
		leaktest.KeyForms(t, pki.Sender.Key), leaktest.KeyForms(t, pki.Partner.Key),
		leaktest.KeyForms(t, pkiAsync.Sender.Key), leaktest.KeyForms(t, pkiAsync.Partner.Key), leaktest.KeyForms(t, untrusted.Key))

	srv, err := natsserver.Start(natsserver.Options{User: "fg", Password: natsPass})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	plainURL := srv.ClientURL()
	credURL := strings.Replace(plainURL, "://", "://fg:"+natsPass+"@", 1)

	var logs syncBuffer
	slogger := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	wlog := watermill.NewSlogLogger(slogger)

	opts := natsconn.Options{Server: credURL}
	nc, err := opts.Connect("canary")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	// A connection refused for a wrong password: its error is logged too.
	_, cerr := natsconn.Options{Server: plainURL, User: "fg", Password: natsPass + "-wrong"}.Connect("canary-bad")
	slogger.Error("connect", "err", cerr)
	js := natstest.JetStream(t, nc)

	// Partners: webhook endpoints that fail (retryable, then permanent)
	// echoing the request's Authorization and signature headers; an AS2
	// partner down the same way; an AS2 partner answering an MDN error
	// (it is not the partner the profile names).
	hookDown, hookBad, as2Down := echo(http.StatusServiceUnavailable), echo(http.StatusBadRequest), echo(http.StatusServiceUnavailable)
	defer hookDown.Close()
	defer hookBad.Close()
	defer as2Down.Close()
	pcfg := pki.PartnerConfig()
	pcfg.AS2ID = "SomeoneElse"
	ap, err := as2partner.New(pcfg)
	if err != nil {
		t.Fatal(err)
	}
	as2MDN := httptest.NewServer(ap)
	defer as2MDN.Close()

	hooks := map[string]*webhook.Sender{}
	// hook-down and hook-refused carry a secret in their URL's path;
	// hook-refused's port is closed, so its transport error quotes the URL.
	for key, url := range map[string]string{"hook-down": hookDown.URL + "/services/T0001/B0002/" + pathSecret, "hook-bad": hookBad.URL,
		"hook-refused": "http://127.0.0.1:1/services/T0001/B0002/" + pathSecret} {
		cfg := webhook.Config{URL: url, Secret: hookSecret, Scheme: webhook.SchemeBoth,
			Header: http.Header{"Authorization": {"Bearer " + apiKey}}}
		slogger.Info("webhook partner", "key", key, "config", cfg)
		if hooks[key], err = webhook.NewSender(cfg); err != nil {
			t.Fatal(err)
		}
	}
	// as2-park: the partner signs its MDNs with the untrusted certificate
	// (not the pinned one): its first message parks it.
	parkCfg := pki.PartnerConfig()
	parkCfg.Cert, parkCfg.Key, parkCfg.RequireEncrypted = untrusted.Cert, untrusted.Key, false
	parkPartner, err := as2partner.New(parkCfg)
	if err != nil {
		t.Fatal(err)
	}
	as2Park := httptest.NewServer(parkPartner)
	defer as2Park.Close()
	// as2-async: the partner answers 2xx and holds a negative receipt
	// (processed/error: not the partner the profile names) for our
	// receipt endpoint, a Resolver on a pending-receipts bucket.
	var resolver atomic.Pointer[asyncmdn.Resolver]
	var answers syncBuffer
	receiptSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := httptest.NewRecorder()
		resolver.Load().ServeHTTP(rec, r)
		fmt.Fprintf(&answers, "%d %s %v\n", rec.Code, rec.Body.String(), rec.Header())
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
	}))
	defer receiptSrv.Close()
	asyncCfg := pkiAsync.PartnerConfig()
	asyncCfg.AS2ID = "SomeoneElse"
	asyncCfg.Async = as2partner.AsyncConfig{AllowURLs: []string{receiptSrv.URL}, Hold: true}
	asyncPartner, err := as2partner.New(asyncCfg)
	if err != nil {
		t.Fatal(err)
	}
	as2Async := httptest.NewServer(asyncPartner)
	defer as2Async.Close()
	receiptBucket := natstest.Name(t, "receipts")
	t.Cleanup(func() { _ = js.DeleteKeyValue(context.Background(), receiptBucket) })
	receipts, err := asyncmdn.NewStore(context.Background(), js, asyncmdn.StoreConfig{Bucket: receiptBucket, Storage: jetstream.MemoryStorage})
	if err != nil {
		t.Fatal(err)
	}

	as2s := map[string]*as2.Sender{}
	for key, url := range map[string]string{"as2-down": as2Down.URL, "as2-mdn": as2MDN.URL, "as2-park": as2Park.URL, "as2-async": as2Async.URL} {
		cfg, pc := pki.SenderConfig(url), pcfg
		switch key {
		case "as2-park":
			cfg.EncryptionCert, pc = nil, parkCfg
		case "as2-async":
			cfg, pc = pkiAsync.SenderConfig(url), asyncCfg
			cfg.MDNMode, cfg.AsyncMDNURL, cfg.Receipts, cfg.AsyncMDNTimeout = as2.MDNAsync, receiptSrv.URL+"/mdn", receipts, time.Hour
		}
		slogger.Info("as2 partner", "key", key, "config", cfg, "partner", pc, "nats", opts)
		if as2s[key], err = as2.NewSender(cfg); err != nil {
			t.Fatal(err)
		}
	}
	deliverTo := func(msg *message.Message) error {
		key := msg.Metadata.Get("partner")
		if s := hooks[key]; s != nil {
			return s.Send(msg.Context(), msg.UUID, msg.Payload)
		}
		if s := as2s[key]; s != nil {
			_, err := s.Send(as2.WithOriginal(msg.Context(), key, msg.Metadata), msg.UUID, msg.Payload)
			return err
		}
		panic("handler panicked for " + key)
	}

	topic := natstest.Name(t, "orders")
	retry, dead := natstest.Name(t, "retry"), natstest.Name(t, "dead")
	sub, err := jsq.NewSubscriber(jsq.SubscriberConfig{URL: credURL, Concurrency: 4, Logger: wlog})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	router, err := message.NewRouter(message.RouterConfig{CloseTimeout: 20 * time.Second}, wlog)
	if err != nil {
		t.Fatal(err)
	}
	var (
		evMu   sync.Mutex
		events []string
	)
	reg := prometheus.NewRegistry()
	fleetBucket := natstest.Name(t, "breakers")
	t.Cleanup(func() { _ = js.DeleteKeyValue(context.Background(), fleetBucket) })
	fleet, err := natskv.New(context.Background(), js, natskv.Config{Bucket: fleetBucket, Storage: jetstream.MemoryStorage})
	if err != nil {
		t.Fatal(err)
	}
	fg, err := floodgate.New(context.Background(), router, floodgate.Config{
		Name: "canary", Topic: topic, Subscriber: sub, JetStream: js, Logger: wlog, Metrics: reg,
		Deliver:    deliverTo,
		PartnerKey: func(m *message.Message) string { return m.Metadata.Get("partner") },
		Partner: partner.PartnerConfig{Breaker: breaker.Config{ConsecutiveFailures: 1000, BaseOpenWindow: 100 * time.Millisecond,
			MaxOpenWindow: 200 * time.Millisecond, SuccessesToClose: 1, ProbeConcurrency: 1}},
		Timeout: 10 * time.Second,
		Fleet:   &breaker.FleetConfig{Store: fleet, Replica: "canary-1"},
		Queue:   retryqueue.Config{RetryTopic: retry, DeadLetterTopic: dead, MaxAttempts: 2, Backoff: func(int) time.Duration { return 10 * time.Millisecond }},
		Drain:   retryqueue.PartnerDrainerConfig{DiscoverInterval: 100 * time.Millisecond, Drainer: retryqueue.DrainerConfig{PollInterval: 20 * time.Millisecond}},
		OnEvent: func(ev middleware.Event) {
			s := fmt.Sprintf("%+v", ev)
			if ev.Err != nil {
				s += " " + ev.Err.Error()
			}
			evMu.Lock()
			events = append(events, s)
			evMu.Unlock()
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer fg.Close()
	res, err := asyncmdn.New(asyncmdn.Config{Store: receipts, Senders: []*as2.Sender{as2s["as2-async"]}, Queue: fg.Queue(),
		OnOutcome: func(o asyncmdn.Outcome) { slogger.Info("receipt", "outcome", fmt.Sprintf("%+v", o), "err", o.Err) }})
	if err != nil {
		t.Fatal(err)
	}
	resolver.Store(res)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	runDone := startRouter(ctx, router)

	pub, err := jsq.NewPublisher(jsq.PublisherConfig{Conn: nc})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	keys := []string{"hook-down", "hook-bad", "hook-refused", "as2-down", "as2-mdn", "panic", "as2-async", "as2-park"}
	const per = 2
	for i := range per {
		for _, k := range keys {
			m := message.NewMessage(fmt.Sprintf("%s-%d", k, i), []byte(`{"order":1}`))
			m.Metadata.Set("partner", k)
			if err := pub.Publish(topic, m); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The asynchronous partner's negative receipts, and a forged post, go
	// to the receipt endpoint.
	posted := 0
	natstest.Eventually(t, 25*time.Second, func() bool {
		n, err := asyncPartner.PostReceipts(ctx)
		posted += n
		slogger.Info("posted receipts", "n", n, "err", err)
		return posted >= per
	}, "the partner posted %d of %d receipts", natstest.Now(func() any { return posted }), per)
	forged, err := http.Post(receiptSrv.URL+"/mdn", `multipart/signed; protocol="application/pkcs7-signature"; boundary=x`,
		strings.NewReader("--x\r\nContent-Type: message/disposition-notification\r\n\r\nDisposition: automatic-action/MDN-sent-automatically; processed\r\n--x--\r\n"))
	if err != nil {
		t.Fatal(err)
	}
	forged.Body.Close()
	slogger.Info("forged receipt", "status", forged.StatusCode)
	// Every message but the parked partner's fails for good: all are dead
	// letters in the end (the asynchronous ones through their negative
	// receipts). The parked partner's wait in the retry stream.
	wantDead := per * (len(keys) - 1)
	natstest.Eventually(t, 25*time.Second, func() bool { return len(natstest.StreamMsgs(t, js, dead)) >= wantDead },
		"all %d messages dead-lettered (now %d)", wantDead, natstest.Now(func() any { return len(natstest.StreamMsgs(t, js, dead)) }))
	parkedName := partner.FleetName(retryqueue.ServiceName(topic, "canary"), "as2-park")
	var status []byte
	natstest.Eventually(t, 25*time.Second, func() bool {
		st, _, err := fleet.Load(context.Background(), parkedName)
		status, _ = json.Marshal(st)
		return err == nil && st.Forced && st.State == breaker.StateOpen
	}, "as2-park parked (its shared state: %s)", natstest.Now(func() any { return string(status) }))
	cancel()
	natstest.Finishes(t, 30*time.Second, func() { <-runDone }, "router.Run returns")

	captured := map[string]string{"logs": logs.String(), "receipt answers": answers.String(), "status": string(status)}
	evMu.Lock()
	captured["events"] = strings.Join(events, "\n")
	evMu.Unlock()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var mb bytes.Buffer
	for _, mf := range mfs {
		_, _ = expfmt.MetricFamilyToText(&mb, mf)
	}
	captured["metrics"] = mb.String()
	for _, stream := range []string{retry, dead} {
		var sb strings.Builder
		for _, m := range natstest.StreamMsgs(t, js, stream) {
			fmt.Fprintf(&sb, "%s %s %v\n", m.UUID, m.Payload, m.Metadata)
		}
		captured[stream] = sb.String()
	}
	// The capture holds what it should: the failures, with the partners'
	// echoes redacted, and the configs that were logged.
	for what, want := range map[string]string{
		"logs": "REDACTED *rsa.PrivateKey", "events": "Authorization: REDACTED", dead: "Authorization: REDACTED",
		"status": "as2-trust", "receipt answers": "400",
	} {
		if c := captured[what]; !strings.Contains(c, want) {
			t.Errorf("%s does not hold %q (the test saw nothing): %.500s", what, want, c)
		}
	}
	if !strings.Contains(captured[dead], "127.0.0.1:1/services/REDACTED/REDACTED/REDACTED") {
		t.Errorf("dead letters lack the refused partner's transport error with its URL redacted: %.1000s", captured[dead])
	}
	if !strings.Contains(captured[dead], "panicked") || !strings.Contains(captured[dead], "authentication-failed") {
		t.Errorf("dead letters lack the panic or the MDN error: %.1000s", captured[dead])
	}
	if !strings.Contains(captured[dead], "as2-async-0") || !strings.Contains(captured[dead], asyncmdn.MetaMessageID) {
		t.Errorf("dead letters lack the negative asynchronous receipt's: %.1000s", captured[dead])
	}
	for what, text := range captured {
		leaktest.Check(t, what, text, forms)
	}
}
