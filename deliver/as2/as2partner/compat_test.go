package as2partner_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/floodgate-go/floodgate/deliver/as2"
	"github.com/floodgate-go/floodgate/deliver/as2/as2partner"
)

// Be liberal in what you accept: AS2 names with spaces sent unquoted (as
// some products do, against RFC 4130 §6.2) get a processed receipt, not
// HTTP 400; the MDN names them quoted. Values that are no AS2 ID at all
// are still refused.
func TestUnquotedAS2NamesWithSpaces(t *testing.T) {
	const to = "Bluewater Home Goods"
	p, err := as2partner.New(as2partner.Config{AS2ID: to})
	if err != nil {
		t.Fatal(err)
	}
	post := func(from, to string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodPost, "/as2", strings.NewReader("ISA*00*payload~"))
		r.Header.Set("AS2-From", from)
		r.Header.Set("AS2-To", to)
		r.Header.Set("Message-ID", "<unquoted-1@test>")
		r.Header.Set("Content-Type", "application/EDI-X12")
		r.Header.Set("Disposition-Notification-To", "mdn@example.com")
		w := httptest.NewRecorder()
		p.ServeHTTP(w, r)
		return w
	}
	w := post("Northwind Retail", " "+to+" ")
	if w.Code != http.StatusOK {
		t.Fatalf("unquoted names: HTTP %d %s, want 200 with an MDN", w.Code, w.Body)
	}
	mdn, err := as2.ParseMDN(w.Header().Get("Content-Type"), w.Body.Bytes())
	if err != nil || !mdn.Processed() {
		t.Fatalf("unquoted names: MDN %+v, %v; want processed", mdn, err)
	}
	// The MDN's headers are spelled as RFC 4130 does, not canonicalised.
	if f, tt := strings.Join(w.Header()["AS2-From"], ","), strings.Join(w.Header()["AS2-To"], ","); f != `"`+to+`"` || tt != `"Northwind Retail"` {
		t.Errorf("MDN AS2-From %s, AS2-To %s; want both quoted", f, tt)
	}
	for _, bad := range []string{"", `"unterminated`, strings.Repeat("x", 129), "caf\u00e9"} {
		if w := post(bad, to); w.Code != http.StatusBadRequest {
			t.Errorf("AS2-From %q: HTTP %d, want 400", bad, w.Code)
		}
	}
	if st := p.Stats(); st.Processed != 1 || st.BadRequests != 4 {
		t.Errorf("stats %+v, want 1 processed, 4 bad requests", st)
	}
}
