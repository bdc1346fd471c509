package asyncmdn_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/floodgate-go/floodgate/deliver/as2/as2partner"
	"github.com/floodgate-go/floodgate/deliver/as2/asyncmdn"
	"github.com/floodgate-go/floodgate/internal/tlstest"
)

// The receipt endpoint served over TLS with a private CA, requiring client
// certificates (mTLS): the partner, given the CA and its client
// certificate (as2partner.AsyncConfig.TLS), posts its receipt over HTTPS
// and it resolves the pending record; a client without a certificate
// cannot post.
func TestReceiptEndpointOverTLS(t *testing.T) {
	pki := tlstest.New(t, "receipt endpoint CA")
	e := newEnv(t, func(c *as2partner.Config) {
		c.Async.AllowURLs = []string{"https://127.0.0.1"}
		c.Async.TLS = pki.ClientConfig(true)
	})
	var res atomic.Pointer[asyncmdn.Resolver]
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { res.Load().ServeHTTP(w, r) }))
	srv.TLS = pki.ServerConfig(true)
	srv.StartTLS()
	defer srv.Close()
	r := e.replica(srv.URL+"/mdn", nil)
	res.Store(r.resolver)
	e.sendAsync(r, "order-1")

	// Without a client certificate the handshake fails: nothing is read.
	anon := &http.Client{Transport: &http.Transport{TLSClientConfig: pki.ClientConfig(false)}}
	if resp, err := anon.Post(srv.URL+"/mdn", "text/plain", strings.NewReader("x")); err == nil {
		resp.Body.Close()
		t.Fatalf("a client without a certificate got HTTP %d, want a failed handshake", resp.StatusCode)
	}
	if n, err := e.partner.PostReceipts(testCtx(t)); n != 1 || err != nil {
		t.Fatalf("PostReceipts over HTTPS = %d, %v; want the receipt accepted", n, err)
	}
	if e.pending(e.store(e.js, e.bucket), "order-1") || len(r.got()) != 1 || r.got()[0].Err != nil {
		t.Fatalf("the receipt posted over TLS did not resolve the record: outcomes %+v", r.got())
	}
}
