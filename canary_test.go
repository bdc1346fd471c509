package floodgate_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"

	"github.com/floodgate-go/floodgate"
	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/deliver/as2"
	"github.com/floodgate-go/floodgate/deliver/as2/as2partner"
	"github.com/floodgate-go/floodgate/deliver/as2/as2test"
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
		for k, v := range r.Header {
			fmt.Fprintf(w, "%s: %s\n", k, strings.Join(v, ", "))
		}
	}))
}

// TestCanarySecretsNeverLeak sets every secret to a distinct canary (the
// webhook signing secret, an API key header and a secret in a webhook
// URL's path, the NATS password, the AS2 sender's and partner's private
// keys), runs webhook and AS2 deliveries
// through failures, MDN errors, a panicking handler and dead letters with
// everything logged, and asserts that no form of a canary appears in the
// logs (slog and Watermill), the events, the metrics, or the retry and
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
	forms := slices.Concat(leaktest.Forms(hookSecret), leaktest.Forms([]byte(apiKey)), leaktest.Forms([]byte(natsPass)), leaktest.Forms([]byte(pathSecret)),
		leaktest.KeyForms(t, pki.Sender.Key), leaktest.KeyForms(t, pki.Partner.Key))

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
	as2s := map[string]*as2.Sender{}
	for key, url := range map[string]string{"as2-down": as2Down.URL, "as2-mdn": as2MDN.URL} {
		cfg := pki.SenderConfig(url)
		slogger.Info("as2 partner", "key", key, "config", cfg, "partner", pcfg, "nats", opts)
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
			_, err := s.Send(msg.Context(), msg.UUID, msg.Payload)
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
	fg, err := floodgate.New(context.Background(), router, floodgate.Config{
		Name: "canary", Topic: topic, Subscriber: sub, JetStream: js, Logger: wlog, Metrics: reg,
		Deliver:    deliverTo,
		PartnerKey: func(m *message.Message) string { return m.Metadata.Get("partner") },
		Partner: partner.PartnerConfig{Breaker: breaker.Config{ConsecutiveFailures: 1000, BaseOpenWindow: 100 * time.Millisecond,
			MaxOpenWindow: 200 * time.Millisecond, SuccessesToClose: 1, ProbeConcurrency: 1}},
		Timeout: 10 * time.Second,
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
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	runDone := startRouter(ctx, router)

	pub, err := jsq.NewPublisher(jsq.PublisherConfig{Conn: nc})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	keys := []string{"hook-down", "hook-bad", "hook-refused", "as2-down", "as2-mdn", "panic"}
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
	// Every message fails for good: all are dead letters in the end.
	natstest.Eventually(t, 25*time.Second, func() bool { return len(natstest.StreamMsgs(t, js, dead)) >= per*len(keys) },
		"all %d messages dead-lettered (now %d)", per*len(keys), natstest.Now(func() any { return len(natstest.StreamMsgs(t, js, dead)) }))
	cancel()
	natstest.Finishes(t, 30*time.Second, func() { <-runDone }, "router.Run returns")

	captured := map[string]string{"logs": logs.String()}
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
	for what, text := range captured {
		leaktest.Check(t, what, text, forms)
	}
}
