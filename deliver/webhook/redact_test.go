package webhook_test

import (
	"net/http"
	"slices"
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
