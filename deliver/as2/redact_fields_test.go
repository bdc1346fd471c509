package as2_test

import (
	"crypto/x509"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/deliver/as2"
	"github.com/floodgate-go/floodgate/deliver/as2/as2test"
	"github.com/floodgate-go/floodgate/internal/redact/leaktest"
)

// TestConfigPrintsEveryPolicyField: the printed form of a Config shows the
// receipt, asynchronous-MDN, compression and compatibility fields, the
// rollover certificates and trust roots by subject, and redacts the
// receipt URL's secrets, in every printed form, with no key form leaking.
func TestConfigPrintsEveryPolicyField(t *testing.T) {
	pki, err := as2test.New("CANARYSENDER", "CANARYPARTNER")
	if err != nil {
		t.Fatal(err)
	}
	forms := slices.Concat(leaktest.KeyForms(t, pki.Sender.Key), leaktest.KeyForms(t, pki.Partner.Key))
	next, err := pki.Issue("CANARYNEXT", time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	cfg := pki.SenderConfig("https://as2.example.com/in")
	roots := x509.NewCertPool()
	roots.AddCert(pki.CA)
	cfg.NextMDNCert, cfg.NextEncryptionCert, cfg.TrustRoots = next.Cert, next.Cert, roots
	cfg.NextEncryptionFrom = time.Date(2031, 2, 3, 4, 5, 6, 0, time.UTC)
	cfg.MDNMode, cfg.AsyncMDNURL, cfg.AsyncMDNTimeout = as2.MDNAsync, "https://user:pw@mdn.example.com/receipts?token=QUERYSECRET", 90*time.Minute
	cfg.RequireSignedMDN, cfg.RequireMIC, cfg.WarnOnMICMismatch = true, true, true
	cfg.Compression, cfg.KeyTransport, cfg.Filename = as2.CompressBeforeSign, as2.KeyTransportOAEPSHA256, "order.edi"
	cfg.LegacyMICAlg, cfg.TransferBase64 = true, true
	secrets := append(forms, "QUERYSECRET", "user:pw")
	for _, want := range []string{"async", "mdn.example.com/receipts", "compress-sign", "rsa-oaep-sha256", "order.edi",
		"CANARYNEXT", pki.CA.Subject.CommonName} {
		leaktest.CheckPrinted(t, cfg, want, secrets)
	}
	plus := fmt.Sprintf("%+v", cfg)
	for _, want := range []string{"MDNMode:async", "AsyncMDNTimeout:1h30m0s", "RequireSignedMDN:true", "RequireMIC:true",
		"WarnOnMICMismatch:true", "Compression:compress-sign", "KeyTransport:rsa-oaep-sha256", "Filename:order.edi",
		"LegacyMICAlg:true", "TransferBase64:true", "NextMDNCert:CN=CANARYNEXT", "NextEncryptionCert:CN=CANARYNEXT",
		"NextEncryptionFrom:2031-02-03", "TrustRoots:[CN=" + pki.CA.Subject.CommonName, "AsyncMDNURL:https://"} {
		if !strings.Contains(plus, want) {
			t.Errorf("%%+v does not show %q: %s", want, plus)
		}
	}
	if got := fmt.Sprint(as2.Config{}); strings.Contains(got, "TrustRoots") || strings.Contains(got, "AsyncMDNURL") {
		t.Errorf("a zero Config prints unset fields: %s", got)
	}
}
