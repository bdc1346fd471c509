package asyncmdn_test

import (
	"bytes"
	"mime"
	"net/http"
	"testing"

	"github.com/floodgate-go/floodgate/deliver/as2"
)

// rewrap takes a genuine signed MDN (the content signed, report, and the
// multipart/signed entity made of it) and returns a multipart/signed post
// that still verifies, by the signature over report, yet reads, to a
// MIME parser that takes only CRLF delimiters after a CRLF first one (as
// Go's mime/multipart does, which the lookup used before the package had
// one splitter), as a failure for victim:
//
//   - report's inner delimiters before the notification and the closing one
//     lose their CR (a bare LF): the signature still verifies over the
//     CRLF form, while such a parser does not see them, so the text part
//     swallows the genuine notification;
//   - the outer closing delimiter also follows a bare LF, and after it, in
//     the epilogue a verifier ignores, comes a notification for victim
//     between CRLF delimiters of the inner boundary, then a CRLF closing.
func rewrap(t *testing.T, report []byte, signedType string, signed []byte, victim string) (string, []byte) {
	t.Helper()
	_, params, err := mime.ParseMediaType(signedType)
	if err != nil {
		t.Fatal(err)
	}
	delim := []byte("\r\n--" + params["boundary"] + "\r\n")
	i := bytes.Index(signed, delim)
	end := bytes.LastIndex(signed, []byte("\r\n--"+params["boundary"]+"--"))
	if i < 0 || end < 0 {
		t.Fatalf("no second part in %q", signed)
	}
	sig := signed[i+len(delim) : end]
	const inner = "forged-report-boundary"
	g := bytes.Replace(report, []byte("\r\n--"+inner+"\r\nContent-Type: message/disposition-notification"),
		[]byte("\n--"+inner+"\r\nContent-Type: message/disposition-notification"), 1)
	g = bytes.Replace(g, []byte("\r\n--"+inner+"--"), []byte("\n--"+inner+"--"), 1)
	const b = "rewrapped"
	var body bytes.Buffer
	body.WriteString("--" + b + "\r\n")
	body.Write(g)
	body.WriteString("\n--" + b + "\r\n")
	body.Write(sig)
	body.WriteString("\n--" + b + "--\r\n")
	body.WriteString("\r\n--" + inner + "\r\nContent-Type: message/disposition-notification\r\n\r\n" +
		"Original-Message-ID: " + victim + "\r\nDisposition: automatic-action/MDN-sent-automatically; failed/failure: forged\r\n\r\n--" + inner + "--")
	body.WriteString("\r\n--" + b + "--\r\n")
	return `multipart/signed; protocol="application/pkcs7-signature"; micalg=sha-256; boundary="` + b + `"`, body.Bytes()
}

// TestRewrappedGenuineMDNResolvesNothingElse: an attacker holding any one
// genuine signed MDN of the partner (for order-2, captured on the way)
// rewraps it (bare-LF delimiters, a forged notification for order-1 in the
// epilogue after an LF-only close delimiter) so that a lookup splitting the
// body differently from the verifier would look the record up under
// order-1 (the victim) while the signature verifies over order-2's report.
// The lookup and the verification split the body alike, so both read
// order-2's genuine report: it resolves order-2 (which the partner did
// process), and order-1 is never touched: no dead letter (which an
// operator would resend: a duplicate order); its own MDN resolves it.
func TestRewrappedGenuineMDNResolvesNothingElse(t *testing.T) {
	e := newEnv(t, nil)
	r := e.replica("", nil)
	e.sendAsync(r, "order-1")
	e.sendAsync(r, "order-2")
	victim := as2.MessageID("order-1", as2.DefaultMessageIDDomain)
	genuine := as2.MessageID("order-2", as2.DefaultMessageIDDomain)
	report := report(genuine, "processed")
	ct, signed, err := as2.SignEntity(report, e.pki.Partner.Cert, e.pki.Partner.Key, "sha256")
	if err != nil {
		t.Fatal(err)
	}
	fct, forged := rewrap(t, report, ct, signed, victim)
	if m, err := as2.ParseMDN(fct, forged); err != nil || m.OriginalMessageID != genuine {
		t.Fatalf("the lookup (ParseMDN) of the rewrapped MDN: %v; want the genuine report for %s", err, genuine)
	}
	if m, err := as2.VerifyMDN(fct, forged, e.pki.Partner.Cert); err != nil || m.OriginalMessageID != genuine {
		t.Fatalf("VerifyMDN of the rewrapped MDN: %v; want the genuine report for %s", err, genuine)
	}
	resp, err := http.Post(r.srv.URL, fct, bytes.NewReader(forged))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	store := e.store(e.js, e.bucket)
	if dead := e.deadLetters(); len(dead) != 0 || !e.pending(store, "order-1") || e.pending(store, "order-2") {
		t.Fatalf("rewrapped MDN answered %d: order-1 pending %v, order-2 pending %v, %d dead letters; want order-2 resolved, order-1 untouched",
			resp.StatusCode, e.pending(store, "order-1"), e.pending(store, "order-2"), len(dead))
	}
	if resp.StatusCode != http.StatusOK {
		t.Errorf("rewrapped MDN answered %d, want 200 (order-2's genuine receipt)", resp.StatusCode)
	}
	if n, err := e.partner.PostReceipts(testCtx(t)); n != 2 || err != nil {
		t.Fatalf("the partner's own MDNs: %d, %v", n, err)
	}
	if e.pending(store, "order-1") || e.pending(store, "order-2") || len(e.deadLetters()) != 0 {
		t.Fatal("the partner's own MDNs did not resolve both receipts")
	}
}
