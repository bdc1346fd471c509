package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/floodgate-go/floodgate/deliver/as2"
	"github.com/floodgate-go/floodgate/deliver/as2/as2partner"
	"github.com/floodgate-go/floodgate/deliver/as2/asyncmdn"
	"github.com/floodgate-go/floodgate/retryqueue"
)

// asyncReceipts is the -mdn async wiring: the bucket of pending receipts,
// the receipt endpoint on loopback, and the deadline sweep. The retailers
// answer each order with a bare 200 and post their signed MDN to the
// endpoint a moment later (retrying a 503, as AS2 products do).
type asyncReceipts struct {
	store  *asyncmdn.Store
	bucket string
	srv    *httptest.Server
	res    atomic.Pointer[asyncmdn.Resolver]

	ids      sync.Map     // message UUIDs whose record was stored
	stored   atomic.Int64 // of them, distinct: a resend replaces its record
	resolved atomic.Int64 // delivered by its MDN (with a warning or not)
	dead     atomic.Int64 // dead-lettered: negative MDN or mdn-timeout
}

// newAsyncReceipts creates the bucket, its records naming service (the
// retry queue's service), and starts the endpoint, which answers 503
// until start gives it its resolver.
func newAsyncReceipts(ctx context.Context, js jetstream.JetStream, runID, service string) (*asyncReceipts, error) {
	a := &asyncReceipts{bucket: "floodgate_as2_receipts_" + runID}
	var err error
	if a.store, err = asyncmdn.NewStore(ctx, js, asyncmdn.StoreConfig{Bucket: a.bucket, TTL: time.Hour, Service: service}); err != nil {
		return nil, err
	}
	a.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if res := a.res.Load(); res != nil {
			res.ServeHTTP(w, req)
			return
		}
		w.Header().Set("Retry-After", "1")
		http.Error(w, "starting", http.StatusServiceUnavailable)
	}))
	return a, nil
}

// configure sets a retailer's sender and receiver up for asynchronous MDNs.
func (a *asyncReceipts) configure(scfg *as2.Config, pcfg *as2partner.Config) {
	scfg.MDNMode, scfg.AsyncMDNURL, scfg.Receipts = as2.MDNAsync, a.srv.URL+"/mdn", a.store
	scfg.AsyncMDNTimeout = 10 * time.Minute
	pcfg.Async = as2partner.AsyncConfig{AllowURLs: []string{a.srv.URL + "/mdn"},
		Delay: 100 * time.Millisecond, Retries: 20, RetryDelay: 500 * time.Millisecond}
}

// start builds the resolver for senders, dead-lettering on q, and runs the
// deadline sweep every second until ctx is done.
func (a *asyncReceipts) start(ctx context.Context, senders []*as2.Sender, q *retryqueue.Queue) error {
	res, err := asyncmdn.New(asyncmdn.Config{Store: a.store, Senders: senders, Queue: q, EarlyRetryAfter: time.Second,
		OnOutcome: func(o asyncmdn.Outcome) {
			if o.Delivered() {
				a.resolved.Add(1)
			} else {
				a.dead.Add(1)
			}
		}})
	if err != nil {
		return err
	}
	a.res.Store(res)
	go func() { _ = res.Run(ctx, time.Second, nil) }()
	return nil
}

// sent counts the record of message id, stored by a successful Send.
func (a *asyncReceipts) sent(id string) {
	if _, dup := a.ids.LoadOrStore(id, true); !dup {
		a.stored.Add(1)
	}
}

// settled reports whether every record stored has been resolved.
func (a *asyncReceipts) settled() bool {
	return a == nil || a.stored.Load() == a.resolved.Load()+a.dead.Load()
}
