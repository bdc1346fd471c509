package asyncmdn_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/deliver/as2"
	"github.com/floodgate-go/floodgate/internal/natstest"
	"github.com/floodgate-go/floodgate/middleware"
	"github.com/floodgate-go/floodgate/retryqueue"
)

// The breaker judges the HTTP exchange only: the partner answers 2xx, then
// the pending record cannot be stored (the KV connection closed
// mid-flight). Through the middleware each message is diverted to the
// retry stream (not acked as delivered, not lost), and the breaker, which
// trips at 50% of 4 calls, stays closed with no failure counted.
func TestPendingStoreFailureIsNotThePartnersFault(t *testing.T) {
	e := newEnv(t, nil)
	nc := natstest.Conn(t, e.url)
	store := e.store(natstest.JetStream(t, nc), e.bucket)
	posts := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		posts++
		nc.Close() // the partner takes the message; our store is gone
		e.partner.ServeHTTP(w, req)
	}))
	t.Cleanup(srv.Close)
	cfg := e.pki.SenderConfig(srv.URL)
	cfg.MDNMode, cfg.AsyncMDNURL, cfg.Receipts, cfg.Timeout = as2.MDNAsync, "http://127.0.0.1:1/mdn", store, 5*time.Second
	s, err := as2.NewSender(cfg)
	if err != nil {
		t.Fatal(err)
	}
	b, err := breaker.New(breaker.Config{WindowSize: 4, MinimumCalls: 4, FailureRateThreshold: 0.5,
		BaseOpenWindow: time.Minute, ProbeConcurrency: 1, SuccessesToClose: 1})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var events []middleware.Event
	mw, err := middleware.New(middleware.Config{Breaker: b, Queue: e.q, Timeout: 10 * time.Second,
		OnEvent: func(ev middleware.Event) { mu.Lock(); events = append(events, ev); mu.Unlock() }})
	if err != nil {
		t.Fatal(err)
	}
	var sendErrs []error
	h := mw(func(m *message.Message) ([]*message.Message, error) {
		_, err := s.Send(as2.WithOriginal(m.Context(), "partner-key", m.Metadata), m.UUID, m.Payload)
		sendErrs = append(sendErrs, err)
		return nil, err
	})
	const n = 4
	for i := range n {
		m := message.NewMessage("order-"+string(rune('a'+i)), []byte(payload))
		if _, err := h(m); err != nil {
			t.Fatalf("message %d: middleware returned %v; want nil (the diversion is durable)", i, err)
		}
	}
	for i, err := range sendErrs {
		if !errors.Is(err, as2.ErrPendingStore) {
			t.Fatalf("Send %d = %v; want ErrPendingStore", i, err)
		}
	}
	if posts != n {
		t.Fatalf("partner got %d posts, want %d", posts, n)
	}
	if st := b.Snapshot(); st.State != breaker.StateClosed || st.Failures != 0 || st.Trips != 0 {
		t.Fatalf("breaker %s, %d failures, %d trips; want closed, none: the partner answered 2xx", st.State, st.Failures, st.Trips)
	}
	retried := natstest.StreamMsgs(t, e.js, e.retry)
	if len(retried) != n {
		t.Fatalf("%d messages in the retry stream, want %d: a message whose receipt record was not stored was lost", len(retried), n)
	}
	for _, m := range retried {
		if m.Metadata.Get(retryqueue.MetaReason) != string(retryqueue.ReasonFailure) {
			t.Errorf("retry copy of %s: reason %q, want %q", m.UUID, m.Metadata.Get(retryqueue.MetaReason), retryqueue.ReasonFailure)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, ev := range events {
		if ev.Action != middleware.Diverted || ev.Outcome != breaker.OutcomeNeutral {
			t.Errorf("event %+v; want diverted, outcome neutral", ev)
		}
	}
	if len(e.deadLetters()) != 0 {
		t.Fatal("a message was dead-lettered")
	}
}
