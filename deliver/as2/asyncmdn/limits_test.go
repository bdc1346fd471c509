package asyncmdn_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/floodgate-go/floodgate/deliver"
	"github.com/floodgate-go/floodgate/deliver/as2"
	"github.com/floodgate-go/floodgate/deliver/as2/as2partner"
	"github.com/floodgate-go/floodgate/deliver/as2/asyncmdn"
	"github.com/floodgate-go/floodgate/internal/natstest"
	"github.com/floodgate-go/floodgate/retryqueue"
)

// Untrusted metadata that JSON escapes 6-fold (<) makes a record larger
// than the store keeps, with a payload the store's MaxPayload allows: Send
// refuses it permanently before sending anything, every time (no resend
// loop after the partner's 2xx).
func TestLargeRecordRefusedBeforeSending(t *testing.T) {
	e := newEnv(t, nil)
	r := e.replica("", nil)
	md := map[string]string{"note": strings.Repeat("<", 12<<10)}
	pl := []byte(strings.Repeat("x", e.store(e.js, e.bucket).MaxPayload()))
	ctx := as2.WithOriginal(testCtx(t), "partner-key", md)
	for range 2 {
		_, err := r.sender.Send(ctx, "meta-1", pl)
		if !errors.Is(err, as2.ErrPendingTooLarge) || !deliver.IsPermanent(err) {
			t.Fatalf("Send = %v; want a permanent ErrPendingTooLarge", err)
		}
	}
	if n := e.partner.Stats().Requests; n != 0 {
		t.Fatalf("the partner got %d requests; want 0", n)
	}
}

// lyingStore claims to keep any record, so the check before sending
// passes and the real store refuses the record after the partner's 2xx.
type lyingStore struct{ *asyncmdn.Store }

func (lyingStore) MaxRecordSize() int { return 1 << 30 }

// A record the store refuses as too large after the partner's 2xx is a
// permanent failure, not a retryable one: sending it again could never
// store it.
func TestRecordTooLargeAfterPartnerAnsweredIsPermanent(t *testing.T) {
	e := newEnv(t, nil)
	cfg := e.pki.SenderConfig(e.psrv.URL)
	cfg.MDNMode, cfg.AsyncMDNURL, cfg.AsyncMDNTimeout = as2.MDNAsync, "http://127.0.0.1/mdn", time.Hour
	cfg.Receipts = lyingStore{e.store(e.js, e.bucket)}
	s, err := as2.NewSender(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := as2.WithOriginal(testCtx(t), "partner-key", map[string]string{"note": strings.Repeat("<", 200<<10)})
	_, err = s.Send(ctx, "meta-2", []byte(payload))
	if !errors.Is(err, asyncmdn.ErrRecordTooLarge) || !errors.Is(err, as2.ErrPendingTooLarge) || !deliver.IsPermanent(err) {
		t.Fatalf("Send = %v; want a permanent ErrRecordTooLarge", err)
	}
	if n := e.partner.Stats().Requests; n != 1 {
		t.Fatalf("the partner got %d requests; want 1", n)
	}
}

// A MaxValueSize above the server's max_payload could never be written.
func TestStoreMaxValueSizeAboveServerMaxPayload(t *testing.T) {
	nc := natstest.Conn(t, natstest.URL(t))
	js := natstest.JetStream(t, nc)
	bucket := natstest.Name(t, "receipts")
	_, err := asyncmdn.NewStore(testCtx(t), js, asyncmdn.StoreConfig{Bucket: bucket,
		MaxValueSize: int32(nc.MaxPayload()) + 1, Storage: jetstream.MemoryStorage})
	if !errors.Is(err, asyncmdn.ErrInvalidConfig) || !strings.Contains(err.Error(), "StoreConfig.MaxValueSize") ||
		!strings.Contains(err.Error(), "max_payload") {
		t.Fatalf("NewStore = %v; want ErrInvalidConfig naming StoreConfig.MaxValueSize and max_payload", err)
	}
	if _, err := asyncmdn.NewStore(testCtx(t), js, asyncmdn.StoreConfig{Bucket: bucket,
		MaxValueSize: int32(nc.MaxPayload()), Storage: jetstream.MemoryStorage}); err != nil {
		t.Fatalf("NewStore at max_payload = %v", err)
	}
}

// A record would expire (the bucket's TTL) before the sweep dead-letters
// it: New refuses the Sender, Run the sweep interval.
func TestResolverRefusesTimeoutNotBelowTTL(t *testing.T) {
	e := newEnv(t, nil)
	store, err := asyncmdn.NewStore(testCtx(t), e.js, asyncmdn.StoreConfig{Bucket: e.bucket, TTL: time.Hour, Storage: jetstream.MemoryStorage})
	if err != nil {
		t.Fatal(err)
	}
	sender := func(timeout time.Duration) *as2.Sender {
		cfg := e.pki.SenderConfig(e.psrv.URL)
		cfg.MDNMode, cfg.AsyncMDNURL, cfg.Receipts, cfg.AsyncMDNTimeout = as2.MDNAsync, "http://127.0.0.1/mdn", store, timeout
		s, err := as2.NewSender(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	_, err = asyncmdn.New(asyncmdn.Config{Store: store, Queue: e.q, Senders: []*as2.Sender{sender(time.Hour)}})
	if !errors.Is(err, asyncmdn.ErrInvalidConfig) || !strings.Contains(err.Error(), "AsyncMDNTimeout") || !strings.Contains(err.Error(), "TTL") {
		t.Fatalf("New with AsyncMDNTimeout = TTL: %v; want ErrInvalidConfig naming AsyncMDNTimeout and TTL", err)
	}
	res, err := asyncmdn.New(asyncmdn.Config{Store: store, Queue: e.q, Senders: []*as2.Sender{sender(50 * time.Minute)}})
	if err != nil {
		t.Fatal(err)
	}
	done, cancel := context.WithCancel(context.Background())
	cancel()
	if err := res.Run(done, 10*time.Minute, nil); !errors.Is(err, asyncmdn.ErrInvalidConfig) {
		t.Fatalf("Run with timeout + interval = TTL: %v; want ErrInvalidConfig", err)
	}
	if err := res.Run(done, time.Minute, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run with timeout + interval < TTL: %v; want the context's error", err)
	}
}

// cancelClock cancels a context when the resolver reads the time: after it
// found the record, before it dead-letters it (a client that went away).
type cancelClock struct {
	mu     sync.Mutex
	cancel context.CancelFunc
}

func (c *cancelClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cancel != nil {
		c.cancel()
	}
	return time.Now()
}

// A client that goes away while its negative MDN is being dead-lettered
// does not fail the dead letter (which would leave the claim to expire and
// the record to be dead-lettered again).
func TestDeadLetterOutlivesTheRequest(t *testing.T) {
	e := newEnv(t, func(c *as2partner.Config) { c.WrongMIC = true })
	type caught struct{ ct, body string }
	mdns := make(chan caught, 1)
	catcher := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		mdns <- caught{req.Header.Get("Content-Type"), string(b)}
	}))
	t.Cleanup(catcher.Close)
	r := e.replica(catcher.URL+"/mdn", nil)
	e.sendAsync(r, "order-1")
	if n, err := e.partner.PostReceipts(testCtx(t)); n != 1 || err != nil {
		t.Fatalf("PostReceipts = %d, %v", n, err)
	}
	mdn := <-mdns

	clock := &cancelClock{}
	res, err := asyncmdn.New(asyncmdn.Config{Store: e.store(e.js, e.bucket), Queue: e.q, Senders: []*as2.Sender{r.sender}, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(testCtx(t))
	clock.mu.Lock()
	clock.cancel = cancel
	clock.mu.Unlock()
	a := res.Resolve(ctx, mdn.ct, []byte(mdn.body))
	if a.Status != http.StatusOK || a.Reason != retryqueue.DeadReasonPermanent {
		t.Fatalf("Resolve with the client gone = %+v; want 200, dead-lettered", a)
	}
	if ctx.Err() == nil {
		t.Fatal("the request's context was not cancelled: the test proves nothing")
	}
	if e.pending(e.store(e.js, e.bucket), "order-1") {
		t.Fatal("record still pending")
	}
	dl := e.deadLetters()
	if len(dl) != 1 {
		t.Fatalf("%d dead letters; want 1", len(dl))
	}
	checkDead(t, dl[0], "order-1", retryqueue.DeadReasonPermanent)
}
