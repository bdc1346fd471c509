package as2partner_test

import (
	"net/http"
	"testing"

	"github.com/floodgate-go/floodgate/deliver/as2/as2partner"
)

// TestAsyncReceiptURLServerNormalization: Receipt-Delivery-Option URLs
// that are under the allowed path for Go's path.Clean but leave it on
// servers that normalise more: Java servlet containers (Tomcat, Jetty:
// many AS2 products) drop ";parameters" from a segment before removing
// dot segments, so "/mdn/..;/admin" is "/admin" there; and some servers
// cut a path at a NUL. Each is refused 403 and nothing is queued, while a
// path parameter on an ordinary segment below the prefix stays allowed.
func TestAsyncReceiptURLServerNormalization(t *testing.T) {
	victim := newReceiver(t, nil)
	allow := []string{victim.srv.URL + "/as2/mdn"}
	for _, tt := range []struct {
		name string
		url  string
		ok   bool
	}{
		{"path parameter on ..", victim.srv.URL + "/as2/mdn/..;/..;/admin", false},
		{"path parameter on .. with a value", victim.srv.URL + "/as2/mdn/..;x=1/..;/admin", false},
		{"path parameter on .", victim.srv.URL + "/as2/mdn/.;/../..;/admin", false},
		{"encoded NUL", victim.srv.URL + "/as2/mdn/..%00/admin", false},
		{"path parameter below the prefix", victim.srv.URL + "/as2/mdn/in;jsessionid=1", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p, srv := asyncPartner(t, as2partner.AsyncConfig{AllowURLs: allow, Hold: true})
			h := validHeaders()
			h.Set("Receipt-Delivery-Option", tt.url)
			code, _ := post(t, srv.URL, h, "payload")
			st := p.AsyncStats()
			switch {
			case tt.ok && (code != http.StatusOK || st.Queued != 1):
				t.Fatalf("HTTP %d, %+v; want 200 and the receipt queued", code, st)
			case !tt.ok && (code != http.StatusForbidden || st.Refused != 1 || st.Queued != 0 || len(p.Received()) != 0):
				t.Fatalf("HTTP %d, %+v; want 403, refused, nothing queued or processed", code, st)
			}
		})
	}
}
