package as2test_test

import (
	"crypto/x509"
	"testing"

	"github.com/floodgate-go/floodgate/deliver/as2"
	"github.com/floodgate-go/floodgate/deliver/as2/as2partner"
	"github.com/floodgate-go/floodgate/deliver/as2/as2test"
)

func TestNewMatchedConfigs(t *testing.T) {
	pki, err := as2test.New("NORTHWINDRTL", "BLUEWATERHG")
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(pki.CA)
	for _, id := range []as2test.Identity{pki.Sender, pki.Partner} {
		if _, err := id.Cert.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageEmailProtection}}); err != nil {
			t.Errorf("%s: %v", id.AS2ID, err)
		}
		if !id.Key.PublicKey.Equal(id.Cert.PublicKey) || id.Cert.Subject.CommonName != id.AS2ID {
			t.Errorf("%s: key or name does not match", id.AS2ID)
		}
	}
	if _, err := as2.NewSender(pki.SenderConfig("http://127.0.0.1:1/as2")); err != nil {
		t.Errorf("SenderConfig: %v", err)
	}
	if _, err := as2partner.New(pki.PartnerConfig()); err != nil {
		t.Errorf("PartnerConfig: %v", err)
	}
	files, err := pki.WriteFiles(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := as2.LoadProfile(as2.Config{URL: "http://127.0.0.1:1/as2", From: "NORTHWINDRTL", To: "BLUEWATERHG"}, files.Profile())
	if err != nil || !cfg.SigningCert.Equal(pki.Sender.Cert) || !cfg.MDNCert.Equal(pki.Partner.Cert) {
		t.Errorf("LoadProfile(WriteFiles) = %v", err)
	}
	ca, err := as2.LoadCertificate(files.CA)
	if err != nil || !ca.Equal(pki.CA) {
		t.Errorf("CA file: %v", err)
	}
}
