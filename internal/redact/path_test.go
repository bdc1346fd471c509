package redact

import (
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestHTTPURLPathSecrets: secrets in a URL path (Slack-, Discord-style and
// the like) are replaced; word-like segments, scheme, host and port stay.
func TestHTTPURLPathSecrets(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"https://hooks.example/T0001/B0002/XXXXSECRET", "https://hooks.example/REDACTED/REDACTED/REDACTED"},
		{"https://hooks.slack.com/services/T024BE7LD/B01ABCDEF/q8Zx3kPl0aB9vC7dE6fG5hJ4", "https://hooks.slack.com/services/REDACTED/REDACTED/REDACTED"},
		{"https://discord.com/api/webhooks/123456789012345678/abcDEF-ghi_JKL", "https://discord.com/api/webhooks/REDACTED/REDACTED"},
		{"https://partner.example:8443/as2/edi-inbound", "https://partner.example:8443/as2/edi-inbound"},
		{"https://partner.example/api/v1/orders/", "https://partner.example/api/v1/orders/"},
		{"https://partner.example/hook/a%2Fb%20secret", "https://partner.example/hook/REDACTED"},
		{"https://partner.example/" + strings.Repeat("a", 40), "https://partner.example/REDACTED"},
		{"https://u:pw@partner.example/ok?token=abc#frag", "https://REDACTED@partner.example/ok?token=REDACTED"},
		{"https://partner.example", "https://partner.example"},
		{"mailto:SeCrEt123", "mailto:REDACTED"},
	} {
		if got := HTTPURL(c.in); got != c.want {
			t.Errorf("HTTPURL(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// TestURLError: the URL a transport error quotes is redacted, the cause
// still reachable.
func TestURLError(t *testing.T) {
	secretURL := "http://127.0.0.1:1/T0001/B0002/XXXXSECRET"
	_, err := http.Post(secretURL, "text/plain", nil)
	if err == nil || !strings.Contains(err.Error(), "XXXXSECRET") {
		t.Fatalf("precondition: the transport error quotes the URL: %v", err)
	}
	red := URLError(err)
	if strings.Contains(red.Error(), "XXXXSECRET") || !strings.Contains(red.Error(), "127.0.0.1:1") {
		t.Errorf("URLError: %v", red)
	}
	var ue *url.Error
	if !errors.As(red, &ue) || !errors.Is(red, ue.Err) {
		t.Error("cause lost")
	}
	plain := errors.New("x")
	if URLError(plain) != plain || URLError(nil) != nil {
		t.Error("other errors must be returned as they are")
	}
}
