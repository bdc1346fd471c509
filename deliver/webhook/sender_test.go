package webhook_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/deliver"
	"github.com/floodgate-go/floodgate/deliver/webhook"
	"github.com/floodgate-go/floodgate/internal/configtest"
)

const id = "0195a0c2-7e1b-7c3a-9d41-5b2f8e6a1c07"

func newSender(t *testing.T, url string, mod func(*webhook.Config)) *webhook.Sender {
	t.Helper()
	cfg := webhook.Config{URL: url, Secret: secret, Timeout: 5 * time.Second, Now: func() time.Time { return t0 }}
	if mod != nil {
		mod(&cfg)
	}
	s, err := webhook.NewSender(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSendHeadersAndBody(t *testing.T) {
	var got *http.Request
	var gotBody []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Clone(context.Background())
		gotBody, _ = io.ReadAll(r.Body)
		w.WriteHeader(http.StatusAccepted)
	}))
	defer srv.Close()
	s := newSender(t, srv.URL+"/hooks/geofence", func(c *webhook.Config) {
		c.Header = http.Header{"X-Tenant": {"fleet-12"}}
	})
	if err := s.Send(context.Background(), id, body); err != nil {
		t.Fatalf("Send: %v", err)
	}
	if got.Method != http.MethodPost || got.URL.Path != "/hooks/geofence" || string(gotBody) != string(body) {
		t.Errorf("%s %s with %q", got.Method, got.URL.Path, gotBody)
	}
	for name, want := range map[string]string{
		"Content-Type":      "application/json",
		"Idempotency-Key":   id,
		"webhook-id":        id,
		"webhook-timestamp": "1741944600",
		// python3: base64(hmac.new(secret, f"{id}.1741944600.{body}", sha256))
		"webhook-signature":     "v1,AmrbwKkAFBSBe8R/J79obCTqG6MMe1pq4fiiOKiB8rg=",
		"X-Floodgate-Timestamp": "",
		"X-Floodgate-Signature": "",
		"X-Tenant":              "fleet-12",
		"User-Agent":            "floodgate-webhook",
	} {
		if v := got.Header.Get(name); v != want {
			t.Errorf("%s = %q, want %q", name, v, want)
		}
	}
	v, _ := webhook.NewVerifier(webhook.VerifierConfig{Secret: secret})
	if err := v.VerifyAt(got.Header, gotBody, t0.Add(time.Second)); err != nil {
		t.Errorf("Verify: %v", err)
	}
}

// TestSendSchemes: each Scheme sends its headers, signed with the one
// secret, and a Verifier of each scheme accepts what it should.
func TestSendSchemes(t *testing.T) {
	for _, tt := range []struct {
		scheme              webhook.Scheme
		standard, floodgate bool
	}{
		{webhook.SchemeStandardWebhooks, true, false},
		{webhook.SchemeFloodgate, false, true},
		{webhook.SchemeBoth, true, true},
	} {
		t.Run(tt.scheme.String(), func(t *testing.T) {
			req, err := newSender(t, "https://hooks.example.com/x", func(c *webhook.Config) { c.Scheme = tt.scheme }).NewRequest(context.Background(), id, body)
			if err != nil {
				t.Fatal(err)
			}
			h := req.Header
			if got := h.Get(webhook.HeaderWebhookSignature) != ""; got != tt.standard {
				t.Errorf("webhook-signature sent: %v", got)
			}
			if got := h.Get(webhook.HeaderSignature) == "v1=a1c96f335709aca2c9c351ee302d33a54e1b63b8d9bba8b5d982354f7fd28088"; got != tt.floodgate {
				t.Errorf("X-Floodgate-Signature %q", h.Get(webhook.HeaderSignature))
			}
			for _, vs := range []webhook.Scheme{webhook.SchemeStandardWebhooks, webhook.SchemeFloodgate, webhook.SchemeBoth} {
				v, _ := webhook.NewVerifier(webhook.VerifierConfig{Secret: secret, Scheme: vs})
				err := v.VerifyAt(h, body, t0)
				want := vs == webhook.SchemeBoth || vs == webhook.SchemeStandardWebhooks && tt.standard || vs == webhook.SchemeFloodgate && tt.floodgate
				if (err == nil) != want {
					t.Errorf("a %v verifier: %v", vs, err)
				}
			}
		})
	}
}

func TestSendRawAndUnsigned(t *testing.T) {
	var h http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h = r.Header.Clone() }))
	defer srv.Close()
	s := newSender(t, srv.URL, func(c *webhook.Config) {
		c.BodyFormat, c.ContentType, c.Secret = webhook.FormatRaw, "text/csv; charset=utf-8", nil
	})
	if err := s.Send(context.Background(), id, []byte("a,b\n1,2\n")); err != nil {
		t.Fatal(err)
	}
	if h.Get("Content-Type") != "text/csv; charset=utf-8" || h.Get(webhook.HeaderSignature) != "" || h.Get(webhook.HeaderTimestamp) != "" {
		t.Errorf("headers = %v", h)
	}
}

func TestSendStatusClassification(t *testing.T) {
	httpDate := t0.Add(time.Hour).Format(http.TimeFormat) // in the past for the real clock
	tests := []struct {
		status     int
		retryAfter string
		kind       error // nil: success
		after      time.Duration
	}{
		{200, "", nil, 0},
		{204, "", nil, 0},
		{500, "", deliver.ErrRetryable, 0},
		{502, "", deliver.ErrRetryable, 0},
		{503, "7", deliver.ErrRetryable, 7 * time.Second},
		{429, "120", deliver.ErrRetryable, 120 * time.Second},
		{429, httpDate, deliver.ErrRetryable, 0},
		{408, "", deliver.ErrRetryable, 0},
		{400, "", deliver.ErrPermanent, 0},
		{401, "", deliver.ErrPermanent, 0},
		{404, "", deliver.ErrPermanent, 0},
		{409, "", deliver.ErrPermanent, 0},
		{422, "30", deliver.ErrPermanent, 0},
		{302, "", deliver.ErrPermanent, 0},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.status, tt.retryAfter), func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tt.retryAfter != "" {
					w.Header().Set("Retry-After", tt.retryAfter)
				}
				if tt.status == 302 {
					w.Header().Set("Location", "/elsewhere")
				}
				w.WriteHeader(tt.status)
				io.WriteString(w, "consumer says no\n")
			}))
			defer srv.Close()
			err := newSender(t, srv.URL, nil).Send(context.Background(), id, body)
			if tt.kind == nil {
				if err != nil {
					t.Fatalf("Send = %v", err)
				}
				return
			}
			var de *deliver.Error
			if !errors.Is(err, tt.kind) || !errors.As(err, &de) || de.StatusCode != tt.status || de.RetryAfter != tt.after || de.Op != "webhook send" {
				t.Fatalf("Send = %#v, want %v with RetryAfter %v", err, tt.kind, tt.after)
			}
			if !strings.Contains(err.Error(), "consumer says no") {
				t.Errorf("error %q does not quote the response", err)
			}
		})
	}
}

func TestSendTimeoutIsRetryable(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer srv.Close()
	defer close(release)
	s := newSender(t, srv.URL, func(c *webhook.Config) { c.Timeout = 100 * time.Millisecond })
	// The server answers only when released, and the context has no
	// deadline: only the sender's Timeout can end the call, so a deadline
	// error proves it applied (without it, Send would hang).
	err := s.Send(context.Background(), id, body)
	if !errors.Is(err, deliver.ErrRetryable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Send = %v, want retryable deadline exceeded", err)
	}
}

func TestSendConnectionRefusedIsRetryable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + l.Addr().String()
	l.Close()
	err = newSender(t, url, nil).Send(context.Background(), id, body)
	var opErr *net.OpError
	if !errors.Is(err, deliver.ErrRetryable) || !errors.As(err, &opErr) {
		t.Fatalf("Send = %v, want retryable *net.OpError", err)
	}
}

func TestSendInvalidMessagesArePermanent(t *testing.T) {
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { requests.Add(1) }))
	defer srv.Close()
	s := newSender(t, srv.URL, nil)
	for _, tt := range []struct {
		id      string
		payload []byte
		want    error
	}{
		{"", body, webhook.ErrIdempotencyKey},
		{"has space", body, webhook.ErrIdempotencyKey},
		{"order.42", body, webhook.ErrIdempotencyKey}, // ambiguous in "id.timestamp.body"
		{strings.Repeat("k", 256), body, webhook.ErrIdempotencyKey},
		{id, []byte(`{"open":`), webhook.ErrInvalidJSON},
		{id, nil, webhook.ErrInvalidJSON},
	} {
		if err := s.Send(context.Background(), tt.id, tt.payload); !errors.Is(err, tt.want) || !deliver.IsPermanent(err) {
			t.Errorf("Send(%.20q, %q) = %v, want permanent %v", tt.id, tt.payload, err, tt.want)
		}
	}
	if err := s.SendJSON(context.Background(), id, map[string]any{"bad": make(chan int)}); !errors.Is(err, webhook.ErrInvalidJSON) || !deliver.IsPermanent(err) {
		t.Errorf("SendJSON(chan) = %v", err)
	}
	if n := requests.Load(); n != 0 {
		t.Errorf("%d requests sent for messages that cannot be sent", n)
	}
	// SendJSON of a good value is sent.
	if err := s.SendJSON(context.Background(), id, map[string]string{"fence": "depot-7"}); err != nil || requests.Load() != 1 {
		t.Errorf("SendJSON = %v, %d requests", err, requests.Load())
	}
}

func TestConfigValidate(t *testing.T) {
	valid := webhook.Config{URL: "https://hooks.example.com/geofence"}
	tests := []struct {
		name  string
		mod   func(*webhook.Config)
		want  error
		field string
	}{
		{"no URL", func(c *webhook.Config) { c.URL = "" }, webhook.ErrURL, "Config.URL"},
		{"relative URL", func(c *webhook.Config) { c.URL = "/hook" }, webhook.ErrURL, "Config.URL"},
		{"unknown format", func(c *webhook.Config) { c.BodyFormat = 7 }, webhook.ErrFormat, "Config.BodyFormat"},
		{"bad content type", func(c *webhook.Config) { c.BodyFormat, c.ContentType = webhook.FormatRaw, "text csv" }, webhook.ErrContentType, "Config.ContentType"},
		{"negative timeout", func(c *webhook.Config) { c.Timeout = -1 }, webhook.ErrNegative, "Config.Timeout"},
		{"reserved header", func(c *webhook.Config) { c.Header = http.Header{"Idempotency-Key": {"x"}} }, webhook.ErrHeader, "Config.Header"},
		{"bad header name", func(c *webhook.Config) { c.Header = http.Header{"X Bad": {"x"}} }, webhook.ErrHeader, "Config.Header"},
		{"header value with newline", func(c *webhook.Config) { c.Header = http.Header{"X-Tenant": {"a\nb"}} }, webhook.ErrHeader, "Config.Header"},
		{"reserved standard header", func(c *webhook.Config) { c.Header = http.Header{"Webhook-Id": {"x"}} }, webhook.ErrHeader, "Config.Header"},
		{"unknown scheme", func(c *webhook.Config) { c.Scheme = 3 }, webhook.ErrScheme, "Config.Scheme Scheme(3)"},
		{"secret too short", func(c *webhook.Config) { c.Secret = []byte("canary-23-bytes-secret!") }, webhook.ErrSecret, "Config.Secret: webhook: invalid secret: 23 bytes, want 24 to 64"},
		{"secret too long", func(c *webhook.Config) { c.Secret = make([]byte, 65) }, webhook.ErrSecret, "Config.Secret"},
		{"short secret with both", func(c *webhook.Config) { c.Secret, c.Scheme = []byte("k"), webhook.SchemeBoth }, webhook.ErrSecret, "Config.Secret"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := valid
			tt.mod(&cfg)
			s, err := webhook.NewSender(cfg)
			if s != nil || !errors.Is(err, tt.want) || !strings.HasPrefix(err.Error(), "invalid config: "+tt.field) {
				t.Fatalf("NewSender = %v, %v; want %v naming %s", s, err, tt.want, tt.field)
			}
		})
	}
	s, err := webhook.NewSender(valid)
	if err != nil {
		t.Fatal(err)
	}
	if c := s.Config(); c.Timeout != 10*time.Second || c.ContentType != "application/json" || c.HTTPClient == nil || c.Now == nil {
		t.Errorf("defaults = %+v", c)
	}
	if webhook.FormatJSON.String() != "json" || webhook.FormatRaw.String() != "raw" || webhook.Format(5).String() != "Format(5)" {
		t.Error("Format.String")
	}
}

// Config.Validate checks the config as [webhook.NewSender] uses it,
// defaults applied to its zero fields, and leaves it as it is.
func TestValidateAppliesDefaults(t *testing.T) {
	configtest.Run(t, nil, []configtest.Case[webhook.Config]{
		{Name: "minimal", Cfg: webhook.Config{URL: "https://hooks.example.com/x"}},
		{Name: "raw with header and secret", Cfg: webhook.Config{URL: "https://hooks.example.com/x", BodyFormat: webhook.FormatRaw,
			Header: http.Header{"X-Tenant": {"t1"}}, Secret: secret}},
		{Name: "short secret with the floodgate scheme", Cfg: webhook.Config{URL: "https://hooks.example.com/x", Secret: []byte("k"), Scheme: webhook.SchemeFloodgate}},
		{Name: "negative timeout", Cfg: webhook.Config{URL: "https://hooks.example.com/x", Timeout: -time.Second}, Err: webhook.ErrNegative, Want: "Config.Timeout"},
		// FormatJSON ignores ContentType, but a malformed one is reported.
		{Name: "JSON with bad content type", Cfg: webhook.Config{URL: "https://hooks.example.com/x", ContentType: "text csv"}, Err: webhook.ErrContentType, Want: "Config.ContentType"},
	}, &configtest.Options[webhook.Config]{
		Match: configtest.HasPrefix,
		Snapshot: func(c webhook.Config) any {
			c.Header, c.Secret = c.Header.Clone(), slices.Clone(c.Secret)
			return c
		},
	})
}
