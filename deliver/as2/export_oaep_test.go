package as2

import (
	"crypto"
	"crypto/x509"
)

// EnvelopeOAEPNoParamsForTest encrypts content to cert with AES-256-CBC
// and RSAES-OAEP (SHA-1) key transport whose AlgorithmIdentifier has no
// parameters, as pyas2lib writes it.
func EnvelopeOAEPNoParamsForTest(content []byte, cert *x509.Certificate) ([]byte, error) {
	a, err := lookupEncryptAlg(EncryptAES256CBC)
	if err != nil {
		return nil, err
	}
	return envelopeOAEP(content, cert, a, oaepParams{hash: crypto.SHA1})
}
