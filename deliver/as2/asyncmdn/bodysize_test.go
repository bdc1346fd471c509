package asyncmdn_test

import (
	"bytes"
	"net/http"
	"testing"

	"github.com/floodgate-go/floodgate/deliver/as2/asyncmdn"
)

// The receipt endpoint is open to anyone: it reads at most
// Config.MaxBodySize bytes (default 1 MiB) of a post. One byte more is
// answered 413 and resolves nothing; a body of exactly the bound is read
// whole (and refused as not an MDN, 400); the partner's genuine receipt
// then still resolves its pending record.
func TestReceiptEndpointBoundsBody(t *testing.T) {
	e := newEnv(t, nil)
	r := e.replica("", nil)
	e.sendAsync(r, "order-1")
	post := func(n int) int {
		t.Helper()
		resp, err := http.Post(r.srv.URL+"/mdn", `multipart/signed; protocol="application/pkcs7-signature"; boundary=x`,
			bytes.NewReader(bytes.Repeat([]byte("x"), n)))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := post(asyncmdn.DefaultMaxBodySize + 1); got != http.StatusRequestEntityTooLarge {
		t.Errorf("a body of MaxBodySize+1 bytes: HTTP %d, want 413", got)
	}
	if got := post(asyncmdn.DefaultMaxBodySize); got != http.StatusBadRequest {
		t.Errorf("a body of MaxBodySize bytes: HTTP %d, want 400 (read whole, not an MDN)", got)
	}
	if !e.pending(e.store(e.js, e.bucket), "order-1") || len(r.got()) != 0 || len(e.deadLetters()) != 0 {
		t.Fatal("a refused post resolved the pending receipt")
	}
	if n, err := e.partner.PostReceipts(testCtx(t)); n != 1 || err != nil {
		t.Fatalf("PostReceipts = %d, %v; want the genuine receipt accepted", n, err)
	}
	if e.pending(e.store(e.js, e.bucket), "order-1") || len(r.got()) != 1 {
		t.Fatalf("the genuine receipt did not resolve the record: outcomes %+v", r.got())
	}
}
