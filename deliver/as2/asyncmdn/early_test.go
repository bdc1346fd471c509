package asyncmdn_test

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/deliver/as2"
	"github.com/floodgate-go/floodgate/deliver/as2/asyncmdn"
	"github.com/floodgate-go/floodgate/internal/natstest"
	"github.com/floodgate-go/floodgate/retryqueue"
)

// An MDN posted before its record is stored (a quick partner: Send stores
// the record after the partner's 2xx) is answered 503 with Retry-After, so
// the partner posts it again; once the record is stored, the same MDN
// resolves it.
func TestEarlyMDNAnsweredRetryLater(t *testing.T) {
	e := newEnv(t, nil)
	r, retryAfter := e.recordingReplica()
	// The record is not in the endpoint's bucket yet: Send wrote it to
	// another, standing in for a PutPending still in flight.
	other := e.store(e.js, natstest.Name(t, "other"))
	cfg := r.sender.Config()
	cfg.Receipts = other
	s, err := as2.NewSender(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Send(as2.WithOriginal(testCtx(t), "partner-key", map[string]string{"order": "order-1"}), "order-1", []byte(payload)); err != nil {
		t.Fatal(err)
	}
	n, err := e.partner.PostReceipts(testCtx(t))
	if n != 0 || err == nil || !strings.Contains(err.Error(), "HTTP 503") {
		t.Fatalf("early PostReceipts = %d, %v; want 503", n, err)
	}
	if ra := retryAfter(); ra != "30" {
		t.Fatalf("Retry-After %q, want 30 (DefaultEarlyRetryAfter)", ra)
	}
	if len(r.got()) != 0 || len(e.deadLetters()) != 0 {
		t.Fatal("an early MDN resolved something")
	}
	// The record lands; the partner posts again.
	rec, _, err := other.Get(testCtx(t), as2.MessageID("order-1", as2.DefaultMessageIDDomain))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.store(e.js, e.bucket).PutPending(testCtx(t), rec); err != nil {
		t.Fatal(err)
	}
	if n, err := e.partner.PostReceipts(testCtx(t)); n != 1 || err != nil {
		t.Fatalf("PostReceipts after the record was stored = %d, %v; want 1", n, err)
	}
	if got := r.got(); len(got) != 1 || !got[0].Delivered() || got[0].Err != nil {
		t.Fatalf("outcomes %+v; want one delivered", got)
	}
}

// recordingReplica is a replica whose receipt endpoint records the
// Retry-After of its last answer (returned by the func).
func (e *env) recordingReplica() (*replica, func() string) {
	var mu sync.Mutex
	var last string
	var r *replica
	wrap := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		rec := httptest.NewRecorder()
		r.resolver.ServeHTTP(rec, req)
		mu.Lock()
		last = rec.Header().Get("Retry-After")
		mu.Unlock()
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
	}))
	e.t.Cleanup(wrap.Close)
	r = e.replica(wrap.URL+"/mdn", nil)
	return r, func() string { mu.Lock(); defer mu.Unlock(); return last }
}

// A late MDN that arrives while a sweeping replica holds its claim (it is
// dead-lettering the record, mdn-timeout) is answered 503 with the claim's
// remaining lease as Retry-After; posted again after the sweep, it finds
// the record resolved and is answered 200, resolving nothing again.
func TestLateMDNDuringClaim(t *testing.T) {
	e := newEnv(t, nil)
	r, retryAfter := e.recordingReplica()
	e.sendAsync(r, "order-1")
	s := e.store(e.js, e.bucket)
	rec, _, err := s.Get(testCtx(t), as2.MessageID("order-1", as2.DefaultMessageIDDomain))
	if err != nil {
		t.Fatal(err)
	}
	rec.ClaimedUntil = time.Now().Add(asyncmdn.DefaultClaimLease)
	if err := s.PutPending(testCtx(t), rec); err != nil {
		t.Fatal(err)
	}
	n, err := e.partner.PostReceipts(testCtx(t))
	if n != 0 || err == nil || !strings.Contains(err.Error(), "HTTP 503") {
		t.Fatalf("PostReceipts during the claim = %d, %v; want 503", n, err)
	}
	if ra, _ := strconv.Atoi(retryAfter()); ra < 1 || ra > 60 {
		t.Fatalf("Retry-After %q; want the claim's remaining lease, 1..60 s", retryAfter())
	}
	if n, err := r.resolver.SweepAt(testCtx(t), rec.Deadline.Add(asyncmdn.DefaultClaimLease)); n != 1 || err != nil {
		t.Fatalf("sweep after the deadline and the claim = %d, %v; want 1", n, err)
	}
	if n, err := e.partner.PostReceipts(testCtx(t)); n != 1 || err != nil {
		t.Fatalf("PostReceipts after the sweep = %d, %v; want 1 answered 200", n, err)
	}
	if got := r.got(); len(got) != 1 || got[0].DeadReason != retryqueue.DeadReasonMDNTimeout || len(e.deadLetters()) != 1 {
		t.Fatalf("outcomes %+v, %d dead letters; want the one mdn-timeout", got, len(e.deadLetters()))
	}
}
