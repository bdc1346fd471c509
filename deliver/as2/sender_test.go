package as2_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/deliver"
	"github.com/floodgate-go/floodgate/deliver/as2"
	"github.com/floodgate-go/floodgate/deliver/as2/as2partner"
)

const (
	buyerID    = "NORTHWINDRTL"
	supplierID = "BLUEWATERHG"
	testID     = "5f0c1a7e-2b7d-4c51-9a57-6f2f3d1e9b10"
)

func payload(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile("../../examples/edi-as2/testdata/po-1001-dc-replenishment.x12")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// sha256MIC computes the expected MIC independently of the package.
func sha256MIC(b []byte) string {
	sum := sha256.Sum256(b)
	return base64.StdEncoding.EncodeToString(sum[:]) + ", sha-256"
}

// fakeClock is a settable clock for the partner's fault script and rate limit.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{t: time.Date(2025, 3, 14, 9, 30, 0, 0, time.UTC)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func startPartner(t *testing.T, cfg as2partner.Config) (*as2partner.Partner, *httptest.Server) {
	t.Helper()
	if cfg.AS2ID == "" {
		cfg.AS2ID = supplierID
	}
	p, err := as2partner.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	return p, srv
}

func newSender(t *testing.T, url string, mod func(*as2.Config)) *as2.Sender {
	t.Helper()
	cfg := as2.Config{URL: url, From: buyerID, To: supplierID, Subject: "Purchase order", Timeout: 5 * time.Second}
	if mod != nil {
		mod(&cfg)
	}
	s, err := as2.NewSender(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSendHappyPath(t *testing.T) {
	partner, srv := startPartner(t, as2partner.Config{})
	// Capture the request as the partner saw it.
	var got *http.Request
	var gotBody []byte
	capture := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotBody, _ = io.ReadAll(r.Body)
		got = r.Clone(context.Background())
		r.Body = io.NopCloser(strings.NewReader(string(gotBody)))
		partner.ServeHTTP(w, r)
	}))
	defer capture.Close()
	_ = srv

	s := newSender(t, capture.URL, nil)
	body := payload(t)
	mdn, err := s.Send(context.Background(), testID, body)
	if err != nil {
		t.Fatalf("Send: %v", err)
	}
	wantID := "<" + testID + "@floodgate>"
	if mdn.OriginalMessageID != wantID {
		t.Errorf("OriginalMessageID = %q, want %q", mdn.OriginalMessageID, wantID)
	}
	if mdn.Disposition != "processed" || mdn.Modifier != "" || !mdn.Processed() {
		t.Errorf("Disposition = %q / %q", mdn.Disposition, mdn.Modifier)
	}
	if mdn.ActionMode != "automatic-action/MDN-sent-automatically" {
		t.Errorf("ActionMode = %q", mdn.ActionMode)
	}
	if want := sha256MIC(body); mdn.ReceivedContentMIC != want {
		t.Errorf("ReceivedContentMIC = %q, want %q", mdn.ReceivedContentMIC, want)
	}
	if mdn.FinalRecipient != "rfc822; "+supplierID || mdn.Text == "" || len(mdn.Raw) == 0 || mdn.Signed {
		t.Errorf("MDN = %+v", mdn)
	}

	// The request on the wire.
	h := got.Header
	for name, want := range map[string]string{
		"AS2-Version":                 "1.2",
		"AS2-From":                    buyerID,
		"AS2-To":                      supplierID,
		"Message-ID":                  wantID,
		"Subject":                     "Purchase order",
		"Disposition-Notification-To": buyerID,
		"Content-Type":                "application/EDI-X12",
		"MIME-Version":                "1.0",
	} {
		if v := h.Get(name); v != want {
			t.Errorf("header %s = %q, want %q", name, v, want)
		}
	}
	if v := h.Get("Disposition-Notification-Options"); v != "" {
		t.Errorf("Disposition-Notification-Options = %q, want none (unsigned MDN)", v)
	}
	if _, err := time.Parse(time.RFC1123Z, h.Get("Date")); err != nil {
		t.Errorf("Date %q: %v", h.Get("Date"), err)
	}
	if got.Method != http.MethodPost || string(gotBody) != string(body) {
		t.Errorf("%s with body of %d bytes, want POST of the payload (%d bytes)", got.Method, len(gotBody), len(body))
	}

	if r := partner.Received(); len(r) != 1 || r[wantID] != 1 {
		t.Errorf("Received = %v", r)
	}
	if cn := partner.ControlNumbers(); cn["000001001"] != 1 {
		t.Errorf("ControlNumbers = %v", cn)
	}
	st := partner.Stats()
	if st.Requests != 1 || st.Processed != 1 || st.UniqueProcessed != 1 || st.Duplicates != 0 || st.Errors != 0 {
		t.Errorf("Stats = %+v", st)
	}
}

func TestSendPartnerDownIsRetryable(t *testing.T) {
	partner, srv := startPartner(t, as2partner.Config{Script: []as2partner.Phase{{Mode: as2partner.Down}}})
	s := newSender(t, srv.URL, nil)
	mdn, err := s.Send(context.Background(), testID, payload(t))
	if mdn != nil || !errors.Is(err, deliver.ErrRetryable) || !deliver.IsRetryable(err) || deliver.IsPermanent(err) {
		t.Fatalf("Send = %v, %v; want retryable", mdn, err)
	}
	var de *deliver.Error
	if !errors.As(err, &de) || de.StatusCode != http.StatusServiceUnavailable || de.Op != "as2 send" {
		t.Fatalf("error = %#v", err)
	}
	if !strings.Contains(err.Error(), "AS2 service unavailable") {
		t.Errorf("error %q does not quote the response", err)
	}
	if st := partner.Stats(); st.Errors != 1 || st.Processed != 0 || len(partner.Received()) != 0 {
		t.Errorf("Stats = %+v", st)
	}
}

func TestSendHTTPStatusClassification(t *testing.T) {
	tests := []struct {
		status     int
		retryAfter string
		kind       error
		after      time.Duration
	}{
		{http.StatusBadRequest, "", deliver.ErrPermanent, 0},
		{http.StatusUnauthorized, "", deliver.ErrPermanent, 0},
		{http.StatusNotFound, "", deliver.ErrPermanent, 0},
		{http.StatusFound, "", deliver.ErrPermanent, 0}, // redirects are not followed
		{http.StatusRequestTimeout, "", deliver.ErrRetryable, 0},
		{http.StatusTooManyRequests, "3", deliver.ErrRetryable, 3 * time.Second},
		{http.StatusInternalServerError, "", deliver.ErrRetryable, 0},
		{http.StatusBadGateway, "", deliver.ErrRetryable, 0},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.status), func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tt.retryAfter != "" {
					w.Header().Set("Retry-After", tt.retryAfter)
				}
				if tt.status == http.StatusFound {
					w.Header().Set("Location", "/elsewhere")
				}
				http.Error(w, "rejected by test server", tt.status)
			}))
			defer srv.Close()
			_, err := newSender(t, srv.URL, nil).Send(context.Background(), testID, payload(t))
			if !errors.Is(err, tt.kind) {
				t.Fatalf("Send = %v, want Is %v", err, tt.kind)
			}
			var de *deliver.Error
			if !errors.As(err, &de) || de.StatusCode != tt.status || de.RetryAfter != tt.after {
				t.Fatalf("error = %#v", err)
			}
		})
	}
}

func TestSendErrorMDNIsPermanent(t *testing.T) {
	partner, srv := startPartner(t, as2partner.Config{})
	s := newSender(t, srv.URL, func(c *as2.Config) { c.To = "SOMEONE ELSE" })
	mdn, err := s.Send(context.Background(), testID, payload(t))
	if !errors.Is(err, deliver.ErrPermanent) || !errors.Is(err, as2.ErrNotProcessed) || !deliver.IsPermanent(err) {
		t.Fatalf("Send = %v, want permanent ErrNotProcessed", err)
	}
	if mdn == nil || mdn.Disposition != "processed" || mdn.Modifier != "error: authentication-failed" || mdn.Processed() {
		t.Fatalf("MDN = %+v", mdn)
	}
	var de *deliver.Error
	if !errors.As(err, &de) || de.Disposition != "automatic-action/MDN-sent-automatically; processed/error: authentication-failed" {
		t.Errorf("error = %#v", err)
	}
	if st := partner.Stats(); st.ErrorMDNs != 1 || st.Processed != 0 || len(partner.Received()) != 0 {
		t.Errorf("Stats = %+v, Received = %v", st, partner.Received())
	}
}

func TestSendTimeoutIsRetryable(t *testing.T) {
	partner, srv := startPartner(t, as2partner.Config{Script: []as2partner.Phase{{Latency: 10 * time.Second}}})
	s := newSender(t, srv.URL, func(c *as2.Config) { c.Timeout = 100 * time.Millisecond })
	// The partner answers after 10s and the context has no deadline: only
	// the sender's Timeout can make the call fail with a deadline error.
	_, err := s.Send(context.Background(), testID, payload(t))
	if !errors.Is(err, deliver.ErrRetryable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Send = %v, want retryable deadline exceeded", err)
	}
	// The partner sees the client go away and does not record the message.
	waitFor(t, func() bool { return partner.Stats().Abandoned == 1 })
	if len(partner.Received()) != 0 {
		t.Errorf("Received = %v", partner.Received())
	}

	// A cancelled caller context is retryable too.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Send(ctx, testID, payload(t)); !errors.Is(err, deliver.ErrRetryable) || !errors.Is(err, context.Canceled) {
		t.Errorf("Send(cancelled) = %v", err)
	}
}

func TestSendConnectionRefusedIsRetryable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + l.Addr().String()
	l.Close()
	_, err = newSender(t, url, nil).Send(context.Background(), testID, payload(t))
	var opErr *net.OpError
	if !errors.Is(err, deliver.ErrRetryable) || !errors.As(err, &opErr) {
		t.Fatalf("Send = %v, want retryable *net.OpError", err)
	}
}

func TestCapacityLimitDrives503s(t *testing.T) {
	clock := newFakeClock()
	partner, srv := startPartner(t, as2partner.Config{
		Clock:  clock,
		Script: []as2partner.Phase{{Name: "fragile", Mode: as2partner.Fragile, Capacity: 2, Burst: 3}},
	})
	s := newSender(t, srv.URL, nil)

	send := func(n int) (ok, retryable int) {
		var mu sync.Mutex
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				_, err := s.Send(context.Background(), fmt.Sprintf("msg-%d-%d", clock.Now().Unix(), i), payload(t))
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					ok++
				case deliver.IsRetryable(err):
					retryable++
				default:
					t.Errorf("Send: %v", err)
				}
			})
		}
		wg.Wait()
		return ok, retryable
	}
	// The clock stands still: the bucket holds Burst tokens.
	if ok, retr := send(10); ok != 3 || retr != 7 {
		t.Fatalf("burst: %d processed, %d retryable; want 3 and 7", ok, retr)
	}
	// One second refills Capacity tokens.
	clock.Advance(time.Second)
	if ok, retr := send(10); ok != 2 || retr != 8 {
		t.Fatalf("after 1s: %d processed, %d retryable; want 2 and 8", ok, retr)
	}
	st := partner.Stats()
	if st.Requests != 20 || st.Processed != 5 || st.Errors != 15 || len(partner.Received()) != 5 {
		t.Errorf("Stats = %+v", st)
	}
	if st.MaxConcurrent < 1 || st.MaxConcurrent > 10 {
		t.Errorf("MaxConcurrent = %d", st.MaxConcurrent)
	}
}

func TestCapacityLimitSlowExcess(t *testing.T) {
	clock := newFakeClock()
	partner, srv := startPartner(t, as2partner.Config{
		Clock: clock,
		Script: []as2partner.Phase{{Mode: as2partner.Fragile, Capacity: 1, Burst: 1,
			Excess: as2partner.Slow, SlowLatency: 150 * time.Millisecond}},
	})
	s := newSender(t, srv.URL, nil)
	start := time.Now()
	for i := range 3 {
		if _, err := s.Send(context.Background(), fmt.Sprintf("slow-%d", i), payload(t)); err != nil {
			t.Fatalf("Send %d: %v", i, err)
		}
	}
	if elapsed := time.Since(start); elapsed < 300*time.Millisecond {
		t.Errorf("3 sends took %v, want >= 2 x SlowLatency", elapsed)
	}
	if st := partner.Stats(); st.Slow != 2 || st.Processed != 3 || st.Errors != 0 {
		t.Errorf("Stats = %+v", st)
	}
}

func TestDuplicatesCounted(t *testing.T) {
	partner, srv := startPartner(t, as2partner.Config{})
	s := newSender(t, srv.URL, nil)
	for range 2 {
		if _, err := s.Send(context.Background(), testID, payload(t)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Send(context.Background(), "other-id", payload(t)); err != nil {
		t.Fatal(err)
	}
	r := partner.Received()
	if r["<"+testID+"@floodgate>"] != 2 || r["<other-id@floodgate>"] != 1 || len(r) != 2 {
		t.Errorf("Received = %v", r)
	}
	// The same payload under three Message-IDs: its control number thrice.
	if cn := partner.ControlNumbers(); cn["000001001"] != 3 {
		t.Errorf("ControlNumbers = %v", cn)
	}
	if st := partner.Stats(); st.Processed != 3 || st.UniqueProcessed != 2 || st.Duplicates != 1 {
		t.Errorf("Stats = %+v", st)
	}
}

func TestSendQuotedAS2IDs(t *testing.T) {
	partner, srv := startPartner(t, as2partner.Config{AS2ID: `Bluewater "Home" Goods`})
	var from, to string
	wrap := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		from, to = r.Header.Get("AS2-From"), r.Header.Get("AS2-To")
		partner.ServeHTTP(w, r)
	}))
	defer wrap.Close()
	_ = srv
	s := newSender(t, wrap.URL, func(c *as2.Config) {
		c.From = "Northwind Retail"
		c.To = `Bluewater "Home" Goods`
	})
	if _, err := s.Send(context.Background(), testID, payload(t)); err != nil {
		t.Fatal(err)
	}
	if from != `"Northwind Retail"` || to != `"Bluewater \"Home\" Goods"` {
		t.Errorf("AS2-From %s, AS2-To %s", from, to)
	}
}

// mdnServer answers every request with an MDN built from tmpl, where %[1]s
// is the request's Message-ID and %[2]s the MIC of its body.
func mdnServer(t *testing.T, contentType, tmpl string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", contentType)
		fmt.Fprintf(w, tmpl, r.Header.Get("Message-ID"), sha256MIC(body))
	}))
	t.Cleanup(srv.Close)
	return srv
}

const reportCT = `multipart/report; report-type=disposition-notification; boundary="b1"`

func report(fields string) string {
	return "--b1\r\nContent-Type: text/plain\r\n\r\nReceipt.\r\n--b1\r\n" +
		"Content-Type: message/disposition-notification\r\n\r\n" + fields + "\r\n--b1--\r\n"
}

func TestSendVerifiesMDN(t *testing.T) {
	tests := []struct {
		name        string
		contentType string
		body        string
		want        error // nil, or a sentinel the error must wrap
		kind        error // deliver kind when want != nil
	}{
		{"processed", reportCT, report("Original-Message-ID: %[1]s\r\nDisposition: automatic-action/MDN-sent-automatically; processed\r\nReceived-Content-MIC: %[2]s"), nil, nil},
		{"processed with warning", reportCT, report("Original-Message-ID: %[1]s\r\nDisposition: automatic-action/MDN-sent-automatically; processed/warning: duplicate-document\r\nReceived-Content-MIC: %[2]s"), as2.ErrMDNWarning, deliver.ErrWarning},
		{"no MIC returned", reportCT, report("Original-Message-ID: %[1]s\r\nDisposition: automatic-action/MDN-sent-automatically; processed"), nil, nil},
		{"MIC in another algorithm we cannot compute", reportCT, report("Original-Message-ID: %[1]s\r\nDisposition: automatic-action/MDN-sent-automatically; processed\r\nReceived-Content-MIC: AAAA, gost-3411%.0[2]s"), nil, nil},
		{"wrong MIC", reportCT, report("Original-Message-ID: %[1]s\r\nDisposition: automatic-action/MDN-sent-automatically; processed\r\nReceived-Content-MIC: 7v7F++fQaNWYUbkMzPh1H4Qgw0bJz0TG5S3RpU6L2QE=, sha-256%.0[2]s"), as2.ErrMICMismatch, deliver.ErrPermanent},
		{"other message", reportCT, report("Original-Message-ID: <someone-else@floodgate>%.0[1]s\r\nDisposition: automatic-action/MDN-sent-automatically; processed\r\nReceived-Content-MIC: %[2]s"), as2.ErrMDNMismatch, deliver.ErrPermanent},
		{"failed", reportCT, report("Original-Message-ID: %[1]s\r\nDisposition: automatic-action/MDN-sent-automatically; failed/Failure: unsupported format%.0[2]s"), as2.ErrNotProcessed, deliver.ErrPermanent},
		{"processed/error", reportCT, report("Original-Message-ID: %[1]s\r\nDisposition: automatic-action/MDN-sent-automatically; processed/Error: decryption-failed%.0[2]s"), as2.ErrNotProcessed, deliver.ErrPermanent},
		{"2xx without MDN", "text/plain", "OK%.0[1]s%.0[2]s", as2.ErrNoMDN, deliver.ErrWarning},
		{"2xx empty", "", "%.0[1]s%.0[2]s", as2.ErrNoMDN, deliver.ErrWarning},
		{"report without notification", reportCT, "--b1\r\nContent-Type: text/plain\r\n\r\nhi %.0[1]s%.0[2]s\r\n--b1--\r\n", as2.ErrMalformedMDN, deliver.ErrWarning},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := mdnServer(t, tt.contentType, tt.body)
			mdn, err := newSender(t, srv.URL, nil).Send(context.Background(), testID, payload(t))
			if tt.want == nil {
				if err != nil || mdn == nil {
					t.Fatalf("Send = %v, %v; want success", mdn, err)
				}
				return
			}
			if !errors.Is(err, tt.want) || !errors.Is(err, tt.kind) {
				t.Fatalf("Send = %v; want Is %v and %v", err, tt.want, tt.kind)
			}
		})
	}
}

func TestSendInvalidMessage(t *testing.T) {
	partner, srv := startPartner(t, as2partner.Config{})
	s := newSender(t, srv.URL, nil)
	for _, tt := range []struct {
		id      string
		payload []byte
		want    error
	}{
		{"", []byte("x"), as2.ErrMessageID},
		{"has space", []byte("x"), as2.ErrMessageID},
		{"a@b", []byte("x"), as2.ErrMessageID},
		{"<id>", []byte("x"), as2.ErrMessageID},
		{testID, nil, as2.ErrEmptyPayload},
	} {
		_, err := s.Send(context.Background(), tt.id, tt.payload)
		if !errors.Is(err, tt.want) || !deliver.IsPermanent(err) {
			t.Errorf("Send(%q) = %v, want permanent %v", tt.id, err, tt.want)
		}
	}
	if n := partner.Stats().Requests; n != 0 {
		t.Errorf("partner got %d requests for messages that cannot be built", n)
	}
}

func TestBuild(t *testing.T) {
	s := newSender(t, "https://as2.example.com/receive", func(c *as2.Config) {
		c.Subject = "Bestellung Nr. 4500018231 – Ü"
		c.MessageIDDomain = "as2.northwind.example"
		c.ContentType = "application/EDIFACT"
		c.MDNTo = "edi@northwind.example"
	})
	out, err := s.Build(testID, []byte("abc"))
	if err != nil {
		t.Fatal(err)
	}
	if out.MessageID != "<"+testID+"@as2.northwind.example>" || out.Header.Get("Message-ID") != out.MessageID {
		t.Errorf("MessageID = %q", out.MessageID)
	}
	if out.MIC != "ungWv48Bz+pBQUDeXa4iI7ADYaOWF3qctBD/YfIAFa0=, sha-256" {
		t.Errorf("MIC = %q", out.MIC)
	}
	subj, err := new(mime.WordDecoder).DecodeHeader(out.Header.Get("Subject"))
	if err != nil || subj != "Bestellung Nr. 4500018231 – Ü" || out.Header.Get("Subject") == subj {
		t.Errorf("Subject %q decodes to %q, %v", out.Header.Get("Subject"), subj, err)
	}
	if out.Header.Get("Content-Type") != "application/EDIFACT" || out.Header.Get("Disposition-Notification-To") != "edi@northwind.example" {
		t.Errorf("Header = %v", out.Header)
	}
	if string(out.Body) != "abc" {
		t.Errorf("Body = %q", out.Body)
	}
}

func TestMessageID(t *testing.T) {
	if got := as2.MessageID("abc-123", "floodgate"); got != "<abc-123@floodgate>" {
		t.Errorf("MessageID = %q", got)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 30s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
