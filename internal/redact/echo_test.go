package redact

import (
	"net/http"
	"slices"
	"strings"
	"testing"
)

// TestSnippetHidesEchoedSecrets: the secrets of a request's URL and
// headers are hidden wherever the response echoes them, also when one
// straddles the quote's limit (no prefix of it survives the cut), while
// word-like path segments and short values stay readable.
func TestSnippetHidesEchoedSecrets(t *testing.T) {
	secrets := EchoSecrets("https://u:pw-canary@hooks.example/services/T0001/B0002/PathCanary9?code=QueryCanary8&v=1",
		http.Header{"X-Tenant": {"Bearer TokenCanary7"}})
	for _, want := range []string{"PathCanary9", "T0001", "QueryCanary8", "pw-canary", "TokenCanary7", "Bearer TokenCanary7"} {
		found := false
		for _, s := range secrets {
			found = found || s == want
		}
		if !found {
			t.Errorf("EchoSecrets lacks %q: %q", want, secrets)
		}
	}
	authSecrets := EchoSecrets("https://hooks.example/x", http.Header{"Authorization": {"Bearer correct-horse-battery-staple"}, "X-Key": {"SecretAlpha more"}})
	for _, s := range authSecrets {
		if s == "Bearer" {
			t.Errorf("EchoSecrets lists the authentication scheme %q", s)
		}
	}
	for _, want := range []string{"correct-horse-battery-staple", "SecretAlpha"} {
		if !slices.Contains(authSecrets, want) {
			t.Errorf("EchoSecrets lacks the word %q of a header value: %q", want, authSecrets)
		}
	}
	for _, s := range secrets {
		if s == "services" || s == "1" {
			t.Errorf("EchoSecrets lists the word %q", s)
		}
	}
	const limit = 40
	for cut := 30; cut < 50; cut++ {
		body := strings.Repeat("x", cut) + "TokenCanary7 /services/T0001/B0002/PathCanary9"
		got := Snippet([]byte(body), limit, secrets)
		if len(got) > limit {
			t.Errorf("cut %d: %d bytes, limit %d", cut, len(got), limit)
		}
		for _, part := range []string{"Tok", "TokenCanary", "Path", "T0001"} {
			if strings.Contains(got, part) {
				t.Errorf("cut %d: %q shows %q", cut, got, part)
			}
		}
	}
	if got := Snippet([]byte("Cannot POST /services/T0001/PathCanary9 Authorization: Bearer x\nnext"), 200, secrets); got != "Cannot POST /services/REDACTED/REDACTED Authorization: REDACTED next" {
		t.Errorf("Snippet = %q", got)
	}
}

// Secrets replaced before the cut shorten the text; the cut is still
// chosen in the body's own bytes, so a secret at the limit is not pulled
// inside it partly (an error page quoting a webhook URL three times).
func TestSnippetCutAfterLongSecrets(t *testing.T) {
	const path = "/services/T0001/B0002/ABCDEFGHIJKLMNOPQRSTUVWX"
	secrets := EchoSecrets("https://hooks.example"+path, nil)
	body := "Cannot POST " + path + " " + path + " 404 " + path
	for limit := 40; limit < len(body); limit++ {
		got := Snippet([]byte(body), limit, secrets)
		if len(got) > limit {
			t.Errorf("limit %d: %d bytes", limit, len(got))
		}
		for _, part := range []string{"ABCD", "B000", "T000"} {
			if strings.Contains(got, part) {
				t.Errorf("limit %d: %q shows %q", limit, got, part)
			}
		}
	}
}
