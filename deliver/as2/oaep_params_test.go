package as2_test

import (
	"bytes"
	"testing"

	"github.com/floodgate-go/floodgate/deliver/as2"
)

// TestDecryptOAEPWithoutParameters: an RSAES-OAEP key transport whose
// AlgorithmIdentifier has no parameters, as pyas2lib 1.4.4 (oscrypto)
// writes it, means SHA-1 and MGF1 with SHA-1 and decrypts, in Decrypt
// and so in OpenMessage and as2partner (found by
// TestInteropPyas2libSends, "OAEP: ...").
func TestDecryptOAEPWithoutParameters(t *testing.T) {
	pki := testPKI(t)
	content := []byte("Content-Type: application/EDI-X12\r\n\r\nISA*00~")
	der, err := as2.EnvelopeOAEPNoParamsForTest(content, pki.Partner.Cert)
	if err != nil {
		t.Fatal(err)
	}
	// id-RSAES-OAEP then the OCTET STRING of the key: no parameters.
	if !bytes.Contains(der, append(bytes.Clone(oidRSAESOAEP), 0x04)) {
		t.Fatal("the test envelope has OAEP parameters")
	}
	got, err := as2.Decrypt(der, pki.Partner.Cert, pki.Partner.Key)
	if err != nil {
		t.Fatalf("Decrypt: %v", err)
	}
	if !bytes.Equal(got, content) {
		t.Errorf("Decrypt = %q, want %q", got, content)
	}
	// Parameters present are kept as they are: the SHA-256 form still
	// decrypts (TestSendOAEP), and a wrong key still fails.
	if _, err := as2.Decrypt(der, pki.Sender.Cert, pki.Sender.Key); err == nil {
		t.Error("Decrypt with another certificate and key succeeded")
	}
}
