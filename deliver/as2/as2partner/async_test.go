package as2partner_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/deliver/as2"
	"github.com/floodgate-go/floodgate/deliver/as2/as2partner"
)

// receiver counts the posts it gets and keeps the last body.
type receiver struct {
	srv  *httptest.Server
	hits atomic.Int64
	last atomic.Value // string: "<content-type>\n<body>"
}

func newReceiver(t *testing.T, h http.HandlerFunc) *receiver {
	r := &receiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.hits.Add(1)
		b, _ := io.ReadAll(req.Body)
		r.last.Store(req.Header.Get("Content-Type") + "\n" + string(b))
		if h != nil {
			h(w, req)
		}
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func asyncPartner(t *testing.T, ac as2partner.AsyncConfig) (*as2partner.Partner, *httptest.Server) {
	t.Helper()
	p, err := as2partner.New(as2partner.Config{AS2ID: "BLUEWATERHG", Async: ac})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	t.Cleanup(p.Close) // runs first: no post outlives the test
	return p, srv
}

// The partner answers 200 without a body and posts the MDN to the
// allowed receipt URL when told to.
func TestAsyncReceiptPosted(t *testing.T) {
	rcv := newReceiver(t, nil)
	p, srv := asyncPartner(t, as2partner.AsyncConfig{AllowURLs: []string{rcv.srv.URL + "/mdn"}, Hold: true})
	h := validHeaders()
	h.Set("Receipt-Delivery-Option", rcv.srv.URL+"/mdn/in")
	code, resp := post(t, srv.URL, h, "payload")
	if b, _ := io.ReadAll(resp.Body); code != http.StatusOK || len(b) != 0 {
		t.Fatalf("HTTP %d with %d bytes; want 200 without an MDN", code, len(b))
	}
	if rcv.hits.Load() != 0 || p.AsyncStats().Queued != 1 {
		t.Fatalf("before PostReceipts: %d posts, %+v", rcv.hits.Load(), p.AsyncStats())
	}
	if n, err := p.PostReceipts(context.Background()); n != 1 || err != nil {
		t.Fatalf("PostReceipts = %d, %v", n, err)
	}
	ct, body, _ := strings.Cut(rcv.last.Load().(string), "\n")
	mdn, err := as2.ParseMDN(ct, []byte(body))
	if err != nil || !mdn.Processed() || mdn.OriginalMessageID != "<m1@floodgate>" {
		t.Fatalf("posted MDN %+v, %v", mdn, err)
	}
	if st := p.AsyncStats(); st.Posted != 1 || st.Queued != 0 {
		t.Fatalf("AsyncStats %+v", st)
	}
}

// Without Hold the MDN goes out after Delay on its own.
func TestAsyncReceiptPostedAfterDelay(t *testing.T) {
	rcv := newReceiver(t, nil)
	p, srv := asyncPartner(t, as2partner.AsyncConfig{AllowURLs: []string{rcv.srv.URL}})
	h := validHeaders()
	h.Set("Receipt-Delivery-Option", rcv.srv.URL)
	if code, _ := post(t, srv.URL, h, "payload"); code != http.StatusOK {
		t.Fatalf("HTTP %d", code)
	}
	deadline := time.Now().Add(10 * time.Second)
	for p.AsyncStats().Posted != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("MDN not posted: %+v", p.AsyncStats())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// SSRF: a receipt URL outside AllowURLs is refused (403, the message not
// processed, nothing posted); the default allows none; a redirect is not
// followed.
func TestAsyncReceiptURLRestricted(t *testing.T) {
	victim := newReceiver(t, nil)
	allowed := newReceiver(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, victim.srv.URL+"/internal", http.StatusFound)
	})
	for _, tt := range []struct {
		name  string
		allow []string
		url   string
	}{
		{"default refuses all", nil, victim.srv.URL},
		{"other host", []string{"http://partner.example"}, victim.srv.URL},
		{"other port", []string{allowed.srv.URL}, victim.srv.URL},
		{"path outside prefix", []string{victim.srv.URL + "/mdn"}, victim.srv.URL + "/admin"},
		{"dot segments", []string{victim.srv.URL + "/mdn"}, victim.srv.URL + "/mdn/../admin"},
		{"longer segment", []string{victim.srv.URL + "/mdn"}, victim.srv.URL + "/mdnx"},
		{"userinfo", []string{"http://127.0.0.1"}, "http://127.0.0.1@" + strings.TrimPrefix(victim.srv.URL, "http://")},
		{"other scheme", []string{"http://127.0.0.1"}, "mailto:ops@example.com"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p, srv := asyncPartner(t, as2partner.AsyncConfig{AllowURLs: tt.allow, Hold: true})
			h := validHeaders()
			h.Set("Receipt-Delivery-Option", tt.url)
			if code, _ := post(t, srv.URL, h, "payload"); code != http.StatusForbidden {
				t.Fatalf("HTTP %d, want 403", code)
			}
			if len(p.Received()) != 0 || p.AsyncStats().Refused != 1 || p.AsyncStats().Queued != 0 {
				t.Fatalf("refused request processed or queued: %v, %+v", p.Received(), p.AsyncStats())
			}
		})
	}
	t.Run("redirect not followed", func(t *testing.T) {
		p, srv := asyncPartner(t, as2partner.AsyncConfig{AllowURLs: []string{allowed.srv.URL}, Hold: true})
		h := validHeaders()
		h.Set("Receipt-Delivery-Option", allowed.srv.URL+"/mdn")
		post(t, srv.URL, h, "payload")
		n, err := p.PostReceipts(context.Background())
		if n != 0 || err == nil || !strings.Contains(err.Error(), "HTTP 302") {
			t.Fatalf("PostReceipts = %d, %v; want the 302 a failure", n, err)
		}
		if allowed.hits.Load() != 1 || victim.hits.Load() != 0 || p.AsyncStats().Queued != 1 {
			t.Fatalf("allowed %d hits, victim %d, %+v", allowed.hits.Load(), victim.hits.Load(), p.AsyncStats())
		}
	})
}

func TestAsyncConfigValidation(t *testing.T) {
	for _, ac := range []as2partner.AsyncConfig{
		{AllowURLs: []string{"127.0.0.1"}},
		{AllowURLs: []string{"ftp://127.0.0.1"}},
		{AllowURLs: []string{"http://u@127.0.0.1"}},
		{Delay: -1},
	} {
		_, err := as2partner.New(as2partner.Config{Async: ac})
		if !errors.Is(err, as2partner.ErrAsyncURL) || !strings.Contains(err.Error(), "Config.Async") {
			t.Fatalf("New(%+v) = %v", ac, err)
		}
	}
}
