package webhook_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/floodgate-go/floodgate/deliver/webhook"
	"github.com/floodgate-go/floodgate/internal/redact/leaktest"
)

func TestConfigsRedactSecrets(t *testing.T) {
	secret := []byte("canary-webhook-secret-0123456789")
	apiKey := "canary-api-key-42"
	urlPass, urlToken := "canary-url-pass", "canary-url-token"
	forms := slices.Concat(leaktest.Forms(secret), leaktest.Forms([]byte(apiKey)),
		leaktest.Forms([]byte(urlPass)), leaktest.Forms([]byte(urlToken)))
	cfg := webhook.Config{URL: "https://bob:" + urlPass + "@hooks.example.com/x?token=" + urlToken, Secret: secret,
		Header: http.Header{"X-Api-Key": {apiKey}}}
	s, err := webhook.NewSender(cfg)
	if err != nil {
		t.Fatal(err)
	}
	v, err := webhook.NewVerifier(webhook.VerifierConfig{Secret: secret})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		v    any
		want string
	}{
		{"Config", cfg, "hooks.example.com"},
		{"Config with defaults", s.Config(), "hooks.example.com"},
		{"Sender", s, "hooks.example.com"},
		{"VerifierConfig", webhook.VerifierConfig{Secret: secret}, "REDACTED"},
		{"Verifier", v, "REDACTED"},
	} {
		t.Run(c.name, func(t *testing.T) { leaktest.CheckPrinted(t, c.v, c.want, forms) })
	}
}

// TestSendErrorRedactsEchoedHeaders: a partner that echoes the request's
// credentials in its error response does not put them in the error.
func TestSendErrorRedactsEchoedHeaders(t *testing.T) {
	const apiKey = "canary-echoed-api-key"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadRequest)
		for _, k := range []string{"Authorization", webhook.HeaderWebhookSignature} {
			fmt.Fprintf(w, "%s: %s\n", k, r.Header.Get(k))
		}
	}))
	defer srv.Close()
	s, err := webhook.NewSender(webhook.Config{URL: srv.URL, Secret: []byte("canary-webhook-secret-0123456789"),
		Header: http.Header{"Authorization": {"Bearer " + apiKey}}})
	if err != nil {
		t.Fatal(err)
	}
	err = s.Send(context.Background(), "id-1", []byte(`{}`))
	if err == nil || !strings.Contains(err.Error(), "Authorization: REDACTED") || strings.Contains(err.Error(), apiKey) ||
		strings.Contains(err.Error(), "v1,") {
		t.Fatalf("error %v: want the echoed Authorization and signature redacted", err)
	}
}
