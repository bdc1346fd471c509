package webhooktest_test

import (
	"testing"

	"github.com/floodgate-go/floodgate/deliver/webhook/webhooktest"
	"github.com/floodgate-go/floodgate/internal/redact/leaktest"
)

// TestConfigRedactsSecret: the consumer's verification secret appears in
// no printed form (fmt verbs, JSON, slog) of its Config or of the
// Consumer; without redaction fmt printed its bytes and JSON its base64.
func TestConfigRedactsSecret(t *testing.T) {
	secret := []byte("canary-consumer-secret-0123456789")
	cfg := webhooktest.Config{Secret: secret, Script: []webhooktest.Phase{{Name: "healthy"}}}
	c, err := webhooktest.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	leaktest.CheckPrinted(t, cfg, "healthy", leaktest.Forms(secret))
	leaktest.CheckPrinted(t, c, "REDACTED", leaktest.Forms(secret))
}
