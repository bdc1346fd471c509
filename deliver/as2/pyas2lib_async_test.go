package as2_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/floodgate-go/floodgate/deliver"
	"github.com/floodgate-go/floodgate/deliver/as2"
	"github.com/floodgate-go/floodgate/deliver/as2/as2test"
	"github.com/floodgate-go/floodgate/deliver/as2/asyncmdn"
	"github.com/floodgate-go/floodgate/internal/natstest"
	"github.com/floodgate-go/floodgate/jsq"
	"github.com/floodgate-go/floodgate/retryqueue"
)

// pyPosted is what receiver.py reports after posting a held asynchronous
// MDN.
type pyPosted struct {
	Status int    `json:"post_status"`
	Body   string `json:"post_body"`
}

// testAsyncToPyas2lib: floodgate's Sender under [as2.MDNAsync] → the
// pyas2lib receiver rx (on port), which builds the asynchronous MDN
// (Mdn().build with Receipt-Delivery-Option) and POSTs it, when told, to
// our asyncmdn Resolver on an embedded NATS KV store: the pending receipt
// is resolved with the Sender's policy (signature verified, MIC matched).
func testAsyncToPyas2lib(t *testing.T, rx *pyHelper, pki *as2test.PKI, port int) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second) // hang guard
	defer cancel()
	url := natstest.URL(t)
	js := natstest.JetStream(t, natstest.Conn(t, url))
	store, err := asyncmdn.NewStore(ctx, js, asyncmdn.StoreConfig{
		Bucket: natstest.Name(t, "receipts"), Storage: jetstream.MemoryStorage})
	if err != nil {
		t.Fatal(err)
	}
	pub, err := jsq.NewPublisher(jsq.PublisherConfig{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pub.Close() })
	qcfg := retryqueue.Config{Publisher: pub, Service: "svc", RetryTopic: natstest.Name(t, "retry"),
		DeadLetterTopic: natstest.Name(t, "dead"), PublishTimeout: 5 * time.Second}
	natstest.DeleteStreams(t, js, qcfg.RetryTopic, qcfg.DeadLetterTopic, "OBJ_"+qcfg.DeadLetterTopic+"_payloads")
	if err := retryqueue.Provision(ctx, js, qcfg); err != nil {
		t.Fatal(err)
	}
	queue, err := retryqueue.New(qcfg)
	if err != nil {
		t.Fatal(err)
	}

	// The receipt endpoint: each case installs its own Resolver, whose one
	// Sender has that case's receipt policy.
	var resolver atomic.Pointer[asyncmdn.Resolver]
	endpoint := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		resolver.Load().ServeHTTP(w, r)
	}))
	defer endpoint.Close()
	x12, utf8Text, binary := interopPayloads(t)

	tests := []struct {
		name          string
		path          string // receiver.py: "/unsigned-mdn" has no signing key
		sign, encrypt string
		compress      string
		signedMDN     bool
		contentType   string
		body          []byte
		wantWarn      string
		refused       bool // the endpoint answers 403: unsigned while a signed MDN was asked for
	}{
		{name: "sign sha256 + encrypt aes256-cbc, signed MDN, X12", path: "/as2", sign: as2.SignSHA256,
			encrypt: as2.EncryptAES256CBC, signedMDN: true, body: x12},
		{name: "compress-sign, sign sha384, unsigned MDN, UTF-8", path: "/as2", sign: as2.SignSHA384,
			compress: as2.CompressBeforeSign, contentType: "text/plain; charset=utf-8", body: utf8Text},
		{name: "sign sha512 + encrypt aes128-cbc, unsigned MDN to an optional request: refused, binary",
			path: "/unsigned-mdn", sign: as2.SignSHA512, encrypt: as2.EncryptAES128CBC, signedMDN: true,
			contentType: "application/octet-stream", body: binary, refused: true},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := pki.SenderConfig("http://127.0.0.1:" + strconv.Itoa(port) + tt.path)
			cfg.SigningCert, cfg.SigningKey, cfg.EncryptionCert, cfg.MDNCert = nil, nil, nil, nil
			if tt.sign != "" {
				cfg.SigningCert, cfg.SigningKey, cfg.SignAlgorithm = pki.Sender.Cert, pki.Sender.Key, tt.sign
			}
			if tt.encrypt != "" {
				cfg.EncryptionCert, cfg.EncryptAlgorithm = pki.Partner.Cert, tt.encrypt
			}
			if tt.signedMDN {
				cfg.MDNCert = pki.Partner.Cert
			} else {
				cfg.AllowUnsignedAsyncMDN = true
			}
			cfg.ContentType, cfg.Compression = tt.contentType, tt.compress
			cfg.MDNMode, cfg.AsyncMDNURL, cfg.Receipts = as2.MDNAsync, endpoint.URL+"/mdn", store
			s, err := as2.NewSender(cfg)
			if err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			var outcomes []asyncmdn.Outcome
			res, err := asyncmdn.New(asyncmdn.Config{Store: store, Senders: []*as2.Sender{s}, Queue: queue,
				OnOutcome: func(o asyncmdn.Outcome) { mu.Lock(); outcomes = append(outcomes, o); mu.Unlock() }})
			if err != nil {
				t.Fatal(err)
			}
			resolver.Store(res)

			id := "7c1e6a52-0d7b-4f3e-9a51-3b2c4d5e6f" + strconv.Itoa(70+i)
			out, err := s.Build(id, tt.body) // the MIC the Send below computes
			if err != nil {
				t.Fatal(err)
			}
			mdn, err := s.Send(ctx, id, tt.body)
			if err != nil || mdn != nil {
				t.Fatalf("Send under async = %+v, %v; want nil, nil", mdn, err)
			}
			var got pyReceived
			rx.next(t, &got)
			if got.Status != "processed" || got.Error != "" || got.MDNURL != cfg.AsyncMDNURL {
				t.Fatalf("pyas2lib: status %q, error %s, async MDN to %q", got.Status, got.Error, got.MDNURL)
			}
			if got.Compressed != (tt.compress != "") || !bytes.Equal(got.Payload, tt.body) {
				t.Errorf("pyas2lib read compressed %v and %d bytes; sent %q and %d bytes",
					got.Compressed, len(got.Payload), tt.compress, len(tt.body))
			}
			if _, _, err := store.Get(ctx, out.MessageID); err != nil {
				t.Fatalf("no pending receipt after Send: %v", err)
			}

			// pyas2lib posts its MDN to the receipt endpoint.
			rx.send(t, map[string]string{"post": got.MessageID})
			var posted pyPosted
			rx.next(t, &posted)
			if tt.refused {
				if posted.Status != http.StatusForbidden {
					t.Fatalf("the receipt endpoint answered pyas2lib's unsigned MDN %d: %s; want 403", posted.Status, posted.Body)
				}
				if _, _, err := store.Get(ctx, out.MessageID); err != nil {
					t.Fatalf("the receipt is no longer pending after an unsigned MDN: %v", err)
				}
				return
			}
			if posted.Status != http.StatusOK {
				t.Fatalf("the receipt endpoint answered pyas2lib's MDN %d: %s", posted.Status, posted.Body)
			}
			if _, _, err := store.Get(ctx, out.MessageID); !errors.Is(err, as2.ErrUnknownReceipt) {
				t.Errorf("pending receipt still stored after its MDN: %v", err)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(outcomes) != 1 || !outcomes[0].Delivered() || outcomes[0].MDN == nil {
				t.Fatalf("outcomes %+v; want one delivered with an MDN", outcomes)
			}
			o := outcomes[0]
			if tt.wantWarn != "" {
				var w *deliver.Warning
				if !errors.As(o.Err, &w) || w.Reason != tt.wantWarn {
					t.Fatalf("outcome error %v; want a warning %q", o.Err, tt.wantWarn)
				}
			} else if o.Err != nil {
				t.Fatalf("outcome error %v; want none", o.Err)
			}
			wantSigned := tt.signedMDN && tt.path != "/unsigned-mdn"
			if !o.MDN.Processed() || o.MDN.Signed != wantSigned || o.MDN.Verified != wantSigned {
				t.Errorf("MDN %+v; want processed, signed and verified %v", o.MDN, wantSigned)
			}
			// The MIC pyas2lib returned is the one we computed.
			if digest, _, _ := as2.ParseMIC(out.MIC); got.MIC != digest ||
				!strings.HasPrefix(strings.TrimSpace(o.MDN.ReceivedContentMIC), digest) {
				t.Errorf("pyas2lib's MIC %q, its MDN's %q, ours %q", got.MIC, o.MDN.ReceivedContentMIC, out.MIC)
			}
		})
	}
}

// asyncMDNCatcher is the loopback receipt URL that as2partner posts
// asynchronous MDNs to: it hands each one to the test.
type asyncMDNCatcher struct {
	mdns chan caughtMDN
}

type caughtMDN struct {
	header http.Header
	body   []byte
}

func (c *asyncMDNCatcher) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	select {
	case c.mdns <- caughtMDN{header: r.Header.Clone(), body: body}:
		w.WriteHeader(http.StatusOK)
	default:
		http.Error(w, "an MDN nobody waits for", http.StatusConflict)
	}
}

// next returns the next MDN posted.
func (c *asyncMDNCatcher) next(t *testing.T) caughtMDN {
	t.Helper()
	select {
	case m := <-c.mdns:
		return m
	case <-time.After(30 * time.Second): // hang guard
		t.Fatal("as2partner posted no asynchronous MDN in 30s")
		return caughtMDN{}
	}
}
