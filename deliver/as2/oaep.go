package as2

import (
	"bytes"
	"crypto"
	"crypto/aes"
	"crypto/cipher"
	"crypto/des"
	"crypto/rand"
	"crypto/rsa"
	_ "crypto/sha1" // OAEP with SHA-1
	_ "crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"

	"github.com/smallstep/pkcs7"
)

// oaepParams are the RSAES-OAEP parameters of one [Config.KeyTransport]:
// the hash of OAEP and of MGF1, and the AlgorithmIdentifier parameters
// that name them (RFC 4055 §4.1).
type oaepParams struct {
	hash   crypto.Hash
	params asn1.RawValue
}

// oidMGF1 is id-mgf1 (RFC 4055 §2.2, PKCS #1).
var oidMGF1 = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 1, 8}

var (
	// oaepSHA1 is rSAES-OAEP-Default-Identifier: the parameters are an
	// empty SEQUENCE, meaning SHA-1 and MGF1 with SHA-1 (RFC 4055 §4.1).
	oaepSHA1 = oaepParams{hash: crypto.SHA1, params: asn1.RawValue{FullBytes: []byte{0x30, 0x00}}}
	// oaepSHA256 names SHA-256 and MGF1 with SHA-256 explicitly
	// (RFC 4055 §4.1 rSAES-OAEP-SHA256-Identifier with MGF1-SHA256).
	oaepSHA256 = oaepParams{hash: crypto.SHA256, params: mustOAEPParams(pkcs7.OIDDigestAlgorithmSHA256)}
)

// mustOAEPParams returns the DER RSAES-OAEP-params naming hash for both
// OAEP and MGF1, with the default (empty) label.
func mustOAEPParams(hash asn1.ObjectIdentifier) asn1.RawValue {
	hashID := pkix.AlgorithmIdentifier{Algorithm: hash} // parameters absent, RFC 4055 §2.1
	hashDER, err := asn1.Marshal(hashID)
	if err != nil {
		panic(err)
	}
	der, err := asn1.Marshal(struct {
		Hash pkix.AlgorithmIdentifier `asn1:"explicit,tag:0"`
		MGF  pkix.AlgorithmIdentifier `asn1:"explicit,tag:1"`
	}{
		Hash: hashID,
		MGF:  pkix.AlgorithmIdentifier{Algorithm: oidMGF1, Parameters: asn1.RawValue{FullBytes: hashDER}},
	})
	if err != nil {
		panic(err)
	}
	return asn1.RawValue{FullBytes: der}
}

// envelopeOAEP encrypts content with a's cipher in CBC mode under a random
// key, and transports the key to cert's RSA key with RSAES-OAEP (RFC 3560).
// github.com/smallstep/pkcs7 v0.2.3 can encrypt with OAEP, but it names
// SHA-256 without naming MGF1-SHA-256, so its parameters say MGF1 with
// SHA-1 while its key uses MGF1 with SHA-256 and OpenSSL cannot decrypt
// it; this builds the EnvelopedData itself.
func envelopeOAEP(content []byte, cert *x509.Certificate, a encryptAlg, p oaepParams) ([]byte, error) {
	return envelopeCBC(content, cert, a, func(pub *rsa.PublicKey, key []byte) ([]byte, pkix.AlgorithmIdentifier, error) {
		enc, err := rsa.EncryptOAEP(p.hash.New(), rand.Reader, pub, key, nil)
		return enc, pkix.AlgorithmIdentifier{Algorithm: pkcs7.OIDEncryptionAlgorithmRSAESOAEP, Parameters: p.params}, err
	})
}

// keyWrap encrypts a content-encryption key to pub and names how (the
// RecipientInfo's keyEncryptionAlgorithm).
type keyWrap func(pub *rsa.PublicKey, key []byte) ([]byte, pkix.AlgorithmIdentifier, error)

// wrapPKCS1v15 is RSA key transport with PKCS #1 v1.5 (RFC 3370 §4.2.1).
func wrapPKCS1v15(pub *rsa.PublicKey, key []byte) ([]byte, pkix.AlgorithmIdentifier, error) {
	enc, err := rsa.EncryptPKCS1v15(rand.Reader, pub, key)
	return enc, pkix.AlgorithmIdentifier{Algorithm: pkcs7.OIDEncryptionAlgorithmRSA, Parameters: asn1.NullRawValue}, err
}

// envelopeCBC builds a CMS EnvelopedData (RFC 5652 §6): content encrypted
// with a's cipher in CBC mode under a random key (AES-256, AES-128 or
// DES-EDE3, RFC 3370 §5.1 / RFC 3565), the key sent to cert's RSA key by
// wrap.
func envelopeCBC(content []byte, cert *x509.Certificate, a encryptAlg, wrap keyWrap) ([]byte, error) {
	pub, ok := cert.PublicKey.(*rsa.PublicKey)
	if !ok {
		return nil, ErrKeyType
	}
	var (
		oid    asn1.ObjectIdentifier
		keyLen int
		newCBC func([]byte) (cipher.Block, error)
	)
	switch a.pkcs7 {
	case pkcs7.EncryptionAlgorithmAES256CBC:
		oid, keyLen, newCBC = pkcs7.OIDEncryptionAlgorithmAES256CBC, 32, aes.NewCipher
	case pkcs7.EncryptionAlgorithmAES128CBC:
		oid, keyLen, newCBC = pkcs7.OIDEncryptionAlgorithmAES128CBC, 16, aes.NewCipher
	default: // 3DES
		oid, keyLen, newCBC = pkcs7.OIDEncryptionAlgorithmDESEDE3CBC, 24, des.NewTripleDESCipher
	}
	key := make([]byte, keyLen)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	block, err := newCBC(key)
	if err != nil {
		return nil, err
	}
	iv := make([]byte, block.BlockSize())
	if _, err := rand.Read(iv); err != nil {
		return nil, err
	}
	padLen := block.BlockSize() - len(content)%block.BlockSize() // RFC 5652 §6.3
	plain := make([]byte, len(content), len(content)+padLen)
	copy(plain, content)
	plain = append(plain, bytes.Repeat([]byte{byte(padLen)}, padLen)...)
	ciphertext := make([]byte, len(plain))
	cipher.NewCBCEncrypter(block, iv).CryptBlocks(ciphertext, plain)
	encKey, keyAlg, err := wrap(pub, key)
	if err != nil {
		return nil, err
	}
	ivParam, err := asn1.Marshal(iv)
	if err != nil {
		return nil, err
	}
	env := cmsEnvelopedData{
		Version: 0,
		RecipientInfos: []cmsKeyTransRecipient{{
			Version:                0,
			IssuerAndSerialNumber:  cmsIssuerAndSerial{Issuer: asn1.RawValue{FullBytes: cert.RawIssuer}, SerialNumber: cert.SerialNumber},
			KeyEncryptionAlgorithm: keyAlg,
			EncryptedKey:           encKey,
		}},
		EncryptedContentInfo: cmsEncryptedContentInfo{
			ContentType: pkcs7.OIDData,
			ContentEncryptionAlgorithm: pkix.AlgorithmIdentifier{
				Algorithm:  oid,
				Parameters: asn1.RawValue{FullBytes: ivParam},
			},
			EncryptedContent: ciphertext,
		},
	}
	inner, err := asn1.Marshal(env)
	if err != nil {
		return nil, err
	}
	return asn1.Marshal(cmsContentInfo{
		ContentType: pkcs7.OIDEnvelopedData,
		Content:     asn1.RawValue{Class: asn1.ClassContextSpecific, Tag: 0, IsCompound: true, Bytes: inner},
	})
}

// oaepDefaultParams returns der, an EnvelopedData ContentInfo, with the
// parameters of its RSAES-OAEP key transport filled in where they are
// absent: pyas2lib (oscrypto) writes id-RSAES-OAEP with no parameters,
// which RFC 4055 §4.1 does not allow in CMS, but whose only reading is
// the default one, SHA-1 and MGF1 with SHA-1 (the empty RSAES-OAEP-params
// SEQUENCE), and github.com/smallstep/pkcs7 v0.2.3 refuses it. Anything
// else, and any structure these types would not re-encode byte for byte,
// is returned unchanged.
func oaepDefaultParams(der []byte) []byte {
	var ci cmsContentInfo
	if rest, err := asn1.Unmarshal(der, &ci); err != nil || len(rest) != 0 || !ci.ContentType.Equal(pkcs7.OIDEnvelopedData) {
		return der
	}
	var env cmsEnvelopedData
	if rest, err := asn1.Unmarshal(ci.Content.Bytes, &env); err != nil || len(rest) != 0 {
		return der
	}
	if same, err := asn1.Marshal(env); err != nil || !bytes.Equal(same, ci.Content.Bytes) {
		return der // fields these types do not hold (originatorInfo, attributes)
	}
	changed := false
	for i, r := range env.RecipientInfos {
		if r.KeyEncryptionAlgorithm.Algorithm.Equal(pkcs7.OIDEncryptionAlgorithmRSAESOAEP) &&
			len(r.KeyEncryptionAlgorithm.Parameters.FullBytes) == 0 {
			env.RecipientInfos[i].KeyEncryptionAlgorithm.Parameters = oaepSHA1.params
			changed = true
		}
	}
	if !changed {
		return der
	}
	inner, err := asn1.Marshal(env)
	if err != nil {
		return der
	}
	out, err := asn1.Marshal(cmsContentInfo{
		ContentType: pkcs7.OIDEnvelopedData,
		Content:     asn1.RawValue{Class: asn1.ClassContextSpecific, Tag: 0, IsCompound: true, Bytes: inner},
	})
	if err != nil {
		return der
	}
	return out
}
