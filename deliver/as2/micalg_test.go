package as2_test

import (
	"testing"

	"github.com/floodgate-go/floodgate/deliver/as2"
)

// TestOpenMessageMICInSignatureDigest: without a MIC algorithm asked for
// (an unsigned receipt requested), the MIC of a signed message is in the
// digest it was signed with (RFC 4130 §7.3.1), as the sender computed it;
// pyas2lib reads any other as an integrity failure. An algorithm asked
// for still wins, and an unsigned message stays at sha-256.
func TestOpenMessageMICInSignatureDigest(t *testing.T) {
	pki := testPKI(t)
	for _, tt := range []struct {
		sign, encrypt bool
		signAlg       string
		asked         string
		wantAlg       string
	}{
		{true, true, as2.SignSHA1, "", "sha-1"},
		{true, false, as2.SignSHA384, "", "sha-384"},
		{true, true, as2.SignSHA512, "sha-256", "sha-256"},
		{false, true, as2.SignSHA1, "", "sha-256"},
	} {
		cfg := pki.SenderConfig("https://as2.example.com/as2")
		cfg.SignAlgorithm = tt.signAlg
		if !tt.sign {
			cfg.SigningCert, cfg.SigningKey = nil, nil
		}
		if !tt.encrypt {
			cfg.EncryptionCert = nil
		}
		s, err := as2.NewSender(cfg)
		if err != nil {
			t.Fatal(err)
		}
		out, err := s.Build(testID, payload(t))
		if err != nil {
			t.Fatal(err)
		}
		o, err := as2.OpenMessage(out.Header.Get("Content-Type"), out.Body, as2.OpenOptions{
			Cert: pki.Partner.Cert, Key: pki.Partner.Key, SignerCert: pki.Sender.Cert, MICAlgorithm: tt.asked,
		})
		if err != nil {
			t.Fatal(err)
		}
		_, alg, err := as2.ParseMIC(o.MIC)
		if err != nil || alg != tt.wantAlg {
			t.Errorf("signed %v %s, asked %q: MIC %q; want it in %s", tt.sign, tt.signAlg, tt.asked, o.MIC, tt.wantAlg)
		}
		if tt.sign && tt.asked == "" && o.MIC != out.MIC {
			t.Errorf("signed %s: MIC %q, the sender's %q", tt.signAlg, o.MIC, out.MIC)
		}
	}
}
