package as2_test

import (
	"testing"

	"github.com/floodgate-go/floodgate/deliver/as2"
	"github.com/floodgate-go/floodgate/deliver/as2/as2test"
	"github.com/floodgate-go/floodgate/internal/redact/leaktest"
)

// TestOpenOptionsRedactKey: OpenOptions holds the receiver's private key
// (as as2partner.Config does); every printed form of it (fmt verbs, JSON,
// slog) hides the key and shows the certificate by its subject. Without
// redaction, encoding/json and slog's JSON handler print the RSA private
// exponent.
func TestOpenOptionsRedactKey(t *testing.T) {
	pki, err := as2test.New("OpenSender", "OpenPartner")
	if err != nil {
		t.Fatal(err)
	}
	o := as2.OpenOptions{Cert: pki.Partner.Cert, Key: pki.Partner.Key, SignerCert: pki.Sender.Cert, MICAlgorithm: "sha-256"}
	leaktest.CheckPrinted(t, o, "OpenPartner", leaktest.KeyForms(t, pki.Partner.Key))
}
