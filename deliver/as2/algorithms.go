package as2

import (
	"crypto"
	"encoding/asn1"
	"fmt"
	"strings"

	"github.com/smallstep/pkcs7"
)

// Signing (digest) algorithms for [Config.SignAlgorithm]. The MIC of a
// signed message and the micalg parameter use the same digest, in the
// spelling of RFC 5751 §3.4.3.2 ("sha-256").
const (
	// SignSHA256 is SHA-256, the default and what RFC 4130 §7.3.1 partners
	// expect today.
	SignSHA256 = "sha256"
	// SignSHA384 is SHA-384.
	SignSHA384 = "sha384"
	// SignSHA512 is SHA-512.
	SignSHA512 = "sha512"
	// SignSHA1 is SHA-1, for old partners only: SHA-1 signatures are no
	// longer collision resistant.
	SignSHA1 = "sha1"
)

// Content encryption algorithms for [Config.EncryptAlgorithm]. The content
// key is transported as [Config.KeyTransport] says: by default with RSA
// PKCS #1 v1.5 (RFC 5652 §6.2.1, rsaEncryption), which every AS2
// implementation reads.
const (
	// EncryptAES256CBC is AES-256 in CBC mode (RFC 3565), the default.
	EncryptAES256CBC = "aes256-cbc"
	// EncryptAES128CBC is AES-128 in CBC mode (RFC 3565).
	EncryptAES128CBC = "aes128-cbc"
	// Encrypt3DES is Triple DES (DES-EDE3-CBC, RFC 3370 §5.1), for old
	// partners only.
	Encrypt3DES = "3des"
)

// Defaults of the algorithm fields of [Config].
const (
	DefaultSignAlgorithm    = SignSHA256
	DefaultEncryptAlgorithm = EncryptAES256CBC
)

// signAlg describes one signing digest.
type signAlg struct {
	name   string // canonical Config spelling, "sha256"
	micalg string // RFC 5751 spelling, "sha-256"
	hash   crypto.Hash
	oid    asn1.ObjectIdentifier
}

var signAlgs = []signAlg{
	{SignSHA256, "sha-256", crypto.SHA256, pkcs7.OIDDigestAlgorithmSHA256},
	{SignSHA384, "sha-384", crypto.SHA384, pkcs7.OIDDigestAlgorithmSHA384},
	{SignSHA512, "sha-512", crypto.SHA512, pkcs7.OIDDigestAlgorithmSHA512},
	{SignSHA1, "sha-1", crypto.SHA1, pkcs7.OIDDigestAlgorithmSHA1},
}

// lookupSignAlg finds a signing digest by name, case-insensitively, in
// either spelling ("sha256" or "sha-256").
func lookupSignAlg(name string) (signAlg, error) {
	n := strings.ToLower(strings.TrimSpace(name))
	for _, a := range signAlgs {
		if n == a.name || n == a.micalg {
			return a, nil
		}
	}
	return signAlg{}, fmt.Errorf("%w: signing algorithm %q (want one of sha256, sha384, sha512, sha1)", ErrAlgorithm, name)
}

// encryptAlg describes one content encryption algorithm.
type encryptAlg struct {
	name  string
	pkcs7 int // pkcs7.EncryptionAlgorithm* constant, or -1 for 3DES
}

var encryptAlgs = []encryptAlg{
	{EncryptAES256CBC, pkcs7.EncryptionAlgorithmAES256CBC},
	{EncryptAES128CBC, pkcs7.EncryptionAlgorithmAES128CBC},
	{Encrypt3DES, -1},
}

// lookupEncryptAlg finds a content encryption algorithm by name,
// case-insensitively; "des-ede3-cbc" and "3des-cbc" name 3DES,
// "aes-256-cbc" and "aes-128-cbc" (OpenSSL spelling) the AES ones.
func lookupEncryptAlg(name string) (encryptAlg, error) {
	n := strings.ToLower(strings.TrimSpace(name))
	switch n {
	case "des-ede3-cbc", "3des-cbc", "tripledes":
		n = Encrypt3DES
	case "aes-256-cbc":
		n = EncryptAES256CBC
	case "aes-128-cbc":
		n = EncryptAES128CBC
	}
	for _, a := range encryptAlgs {
		if n == a.name {
			return a, nil
		}
	}
	return encryptAlg{}, fmt.Errorf("%w: encryption algorithm %q (want one of aes256-cbc, aes128-cbc, 3des)", ErrAlgorithm, name)
}
