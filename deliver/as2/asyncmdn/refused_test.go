package asyncmdn_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/floodgate-go/floodgate/deliver/as2"
	"github.com/floodgate-go/floodgate/deliver/as2/asyncmdn"
)

// unsignedMDN is an unsigned "processed" MDN for originalID, its
// human-readable part padded with pad bytes; with originalID "" it has no
// Original-Message-ID field.
func unsignedMDN(originalID string, pad int) (contentType, body string) {
	const boundary = "----=_Part_1_refused"
	var b strings.Builder
	b.WriteString("--" + boundary + "\r\nContent-Type: text/plain\r\n\r\nprocessed\r\n")
	b.WriteString(strings.Repeat("x", pad))
	b.WriteString("\r\n--" + boundary + "\r\nContent-Type: message/disposition-notification\r\n\r\n")
	b.WriteString("Reporting-UA: refused-test\r\nFinal-Recipient: rfc822; partner\r\n")
	if originalID != "" {
		b.WriteString("Original-Message-ID: " + originalID + "\r\n")
	}
	b.WriteString("Disposition: automatic-action/MDN-sent-automatically; processed\r\n\r\n--" + boundary + "--\r\n")
	return `multipart/report; report-type=disposition-notification; boundary="` + boundary + `"`, b.String()
}

// The endpoint's refusals before any record is looked at: a body over
// Config.MaxBodySize (413), an MDN without Original-Message-ID (400), a
// method other than POST (405, Allow: POST). Each leaves the pending
// receipt pending and resolves nothing.
func TestResolverRefusesOversizeAndMalformed(t *testing.T) {
	e := newEnv(t, nil)
	r := e.replica("", nil)
	e.sendAsync(r, "order-1")
	bigCT, big := unsignedMDN(as2.MessageID("order-1", as2.DefaultMessageIDDomain), asyncmdn.DefaultMaxBodySize)
	noIDCT, noID := unsignedMDN("", 0)
	for _, tt := range []struct {
		name, method string
		ct, body     string
		want         int
	}{
		{"body over MaxBodySize", http.MethodPost, bigCT, big, http.StatusRequestEntityTooLarge},
		{"no Original-Message-ID", http.MethodPost, noIDCT, noID, http.StatusBadRequest},
		{"not a POST", http.MethodGet, "", "", http.StatusMethodNotAllowed},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequest(tt.method, r.srv.URL+"/mdn", strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", tt.ct)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tt.want {
				t.Fatalf("HTTP %d, want %d", resp.StatusCode, tt.want)
			}
			if tt.want == http.StatusMethodNotAllowed && resp.Header.Get("Allow") != http.MethodPost {
				t.Errorf("Allow %q, want POST", resp.Header.Get("Allow"))
			}
			if !e.pending(e.store(e.js, e.bucket), "order-1") || len(r.got()) != 0 || len(e.deadLetters()) != 0 {
				t.Fatal("a refused post resolved the pending receipt")
			}
		})
	}
}
