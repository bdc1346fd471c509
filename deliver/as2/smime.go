package as2

import (
	"bytes"
	"crypto"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"fmt"
	"math/big"
	"mime"
	"net/textproto"
	"slices"
	"strings"
	"sync"

	"github.com/smallstep/pkcs7"
)

// Media types of S/MIME (RFC 5751 §3.2).
const (
	mediaSigned    = "multipart/signed"
	mediaPKCS7Sig  = "application/pkcs7-signature"
	mediaPKCS7MIME = "application/pkcs7-mime"
)

// SignEntity signs a MIME entity and returns the multipart/signed entity
// that carries it (RFC 5751 §3.5.3, RFC 1847): the Content-Type header value
// (with protocol, micalg and boundary parameters) and the body, whose first
// part is content byte for byte and whose second part is a detached CMS
// SignedData (RFC 5652) over it, base64, with cert included.
//
// content must be a canonical MIME entity: header lines ending in CRLF, an
// empty line, and the body (see RFC 5751 §3.1.1; a binary body is signed as
// it is). alg is a [Config.SignAlgorithm] value. key must be cert's private
// key (RSA or ECDSA). The error wraps [ErrAlgorithm] for an unknown alg.
// SignEntity is safe for concurrent use.
func SignEntity(content []byte, cert *x509.Certificate, key crypto.Signer, alg string) (contentType string, body []byte, err error) {
	a, err := lookupSignAlg(alg)
	if err != nil {
		return "", nil, err
	}
	e, err := signEntity(content, cert, key, a)
	if err != nil {
		return "", nil, err
	}
	return e.Header.Get("Content-Type"), e.Body, nil
}

func signEntity(content []byte, cert *x509.Certificate, key crypto.Signer, a signAlg) (entity, error) {
	sd, err := pkcs7.NewSignedData(content)
	if err != nil {
		return entity{}, fmt.Errorf("as2: signing: %w", err)
	}
	sd.SetDigestAlgorithm(a.oid)
	if err := sd.AddSigner(cert, key, pkcs7.SignerInfoConfig{}); err != nil {
		return entity{}, fmt.Errorf("as2: signing: %w", err)
	}
	sd.Detach()
	sig, err := sd.Finish()
	if err != nil {
		return entity{}, fmt.Errorf("as2: signing: %w", err)
	}
	boundary, err := newBoundary(content)
	if err != nil {
		return entity{}, err
	}
	var b bytes.Buffer
	b.WriteString("--" + boundary + "\r\n")
	b.Write(content)
	b.WriteString("\r\n--" + boundary + "\r\n")
	b.WriteString("Content-Type: application/pkcs7-signature; name=\"smime.p7s\"\r\n")
	b.WriteString("Content-Transfer-Encoding: base64\r\n")
	b.WriteString("Content-Disposition: attachment; filename=\"smime.p7s\"\r\n\r\n")
	b.Write(base64Lines(sig))
	b.WriteString("--" + boundary + "--\r\n")
	h := textproto.MIMEHeader{}
	h.Set("Content-Type", mime.FormatMediaType(mediaSigned, map[string]string{
		"protocol": mediaPKCS7Sig,
		"micalg":   a.micalg,
		"boundary": boundary,
	}))
	return entity{Header: h, Body: b.Bytes()}, nil
}

// EncryptEntity encrypts a MIME entity to the holder of cert and returns the
// application/pkcs7-mime entity (RFC 5751 §3.3): the Content-Type header
// value (smime-type=enveloped-data) and the body, a DER CMS EnvelopedData
// (RFC 5652 §6) with the content key transported by RSA PKCS #1 v1.5.
// content is a canonical MIME entity, e.g. the multipart/signed one of
// [SignEntity]. alg is a [Config.EncryptAlgorithm] value. The error wraps
// [ErrAlgorithm] for an unknown alg, [ErrKeyType] if cert has no RSA key.
// EncryptEntity is safe for concurrent use.
func EncryptEntity(content []byte, cert *x509.Certificate, alg string) (contentType string, body []byte, err error) {
	a, err := lookupEncryptAlg(alg)
	if err != nil {
		return "", nil, err
	}
	if err := checkEncryptionCert(cert); err != nil {
		return "", nil, err
	}
	e, err := encryptEntity(content, cert, a, nil)
	if err != nil {
		return "", nil, err
	}
	return e.Header.Get("Content-Type"), e.Body, nil
}

// encryptEntity encrypts content to cert with a, the key sent with RSA
// PKCS #1 v1.5, or with OAEP when oaep is not nil.
func encryptEntity(content []byte, cert *x509.Certificate, a encryptAlg, oaep *oaepParams) (entity, error) {
	var der []byte
	var err error
	switch {
	case oaep != nil:
		der, err = envelopeOAEP(content, cert, a, *oaep)
	case a.pkcs7 < 0:
		der, err = envelopeCBC(content, cert, a, wrapPKCS1v15)
	default:
		der, err = envelopePKCS7(content, cert, a.pkcs7)
	}
	if err != nil {
		return entity{}, fmt.Errorf("as2: encrypting: %w", err)
	}
	h := textproto.MIMEHeader{}
	h.Set("Content-Type", `application/pkcs7-mime; smime-type=enveloped-data; name="smime.p7m"`)
	h.Set("Content-Transfer-Encoding", "binary")
	h.Set("Content-Disposition", `attachment; filename="smime.p7m"`)
	return entity{Header: h, Body: der}, nil
}

// pkcs7Encrypt serialises calls to pkcs7.Encrypt, which takes its content
// and key encryption algorithms from package variables. Code outside this
// package that sets those variables while a Sender encrypts races with it.
var pkcs7Encrypt sync.Mutex

// envelopePKCS7 encrypts with github.com/smallstep/pkcs7 (AES-CBC).
func envelopePKCS7(content []byte, cert *x509.Certificate, alg int) ([]byte, error) {
	pkcs7Encrypt.Lock()
	defer pkcs7Encrypt.Unlock()
	oldContent, oldKey := pkcs7.ContentEncryptionAlgorithm, pkcs7.KeyEncryptionAlgorithm
	defer func() { pkcs7.ContentEncryptionAlgorithm, pkcs7.KeyEncryptionAlgorithm = oldContent, oldKey }()
	pkcs7.ContentEncryptionAlgorithm = alg
	pkcs7.KeyEncryptionAlgorithm = pkcs7.OIDEncryptionAlgorithmRSA
	// Clip: pkcs7 pads by appending to the slice it is given.
	return pkcs7.Encrypt(slices.Clip(content), []*x509.Certificate{cert})
}

// The CMS structures of an EnvelopedData with one key-transport recipient
// (RFC 5652 §6.1, §6.2.1), for the algorithm github.com/smallstep/pkcs7
// v0.2.3 decrypts but cannot encrypt: DES-EDE3-CBC.
type (
	cmsContentInfo struct {
		ContentType asn1.ObjectIdentifier
		Content     asn1.RawValue `asn1:"explicit,tag:0"`
	}
	cmsEnvelopedData struct {
		Version              int
		RecipientInfos       []cmsKeyTransRecipient `asn1:"set"`
		EncryptedContentInfo cmsEncryptedContentInfo
	}
	cmsKeyTransRecipient struct {
		Version                int
		IssuerAndSerialNumber  cmsIssuerAndSerial
		KeyEncryptionAlgorithm pkix.AlgorithmIdentifier
		EncryptedKey           []byte
	}
	cmsIssuerAndSerial struct {
		Issuer       asn1.RawValue
		SerialNumber *big.Int
	}
	cmsEncryptedContentInfo struct {
		ContentType                asn1.ObjectIdentifier
		ContentEncryptionAlgorithm pkix.AlgorithmIdentifier
		EncryptedContent           []byte `asn1:"tag:0,optional"`
	}
)

// VerifySigned verifies a multipart/signed entity (RFC 1847, RFC 5751
// §3.5.3) given its Content-Type header value and body, and returns the
// signed content (the first body part, header included, byte for byte as
// verified) and the signer's certificate.
//
// With cert non-nil the signature must be by exactly cert (the partner's
// certificate exchanged out of band): certificates carried in the signature
// are ignored. With cert nil the certificate carried in the signature is
// used, which proves integrity but not who signed. The signing time, when
// present, must fall within the signer certificate's validity.
//
// A signature over the content with bare LF line endings turned into CRLF
// (as mail transports canonicalise text) is accepted too; the content
// returned is then the canonical form. The body is split by the rule of
// RFC 2046 §5.1.1, liberal in line endings (a delimiter line may end in
// CRLF or LF), the same rule [ParseMDN] uses; a line that starts with the
// boundary but is no delimiter makes the entity malformed. The error wraps
// [ErrMalformedMIME] when the entity cannot be read, and [ErrSignature]
// when it is not signed by cert or the signature does not verify.
func VerifySigned(contentType string, body []byte, cert *x509.Certificate) (content []byte, signer *x509.Certificate, err error) {
	mediaType, params, err := mime.ParseMediaType(contentType)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: Content-Type %q: %v", ErrMalformedMIME, contentType, err)
	}
	if mediaType != mediaSigned {
		return nil, nil, fmt.Errorf("%w: %s is not multipart/signed", ErrSignature, mediaType)
	}
	content, sig, err := signedParts(params["boundary"], body)
	if err != nil {
		return nil, nil, err
	}
	return verifySignedParts(content, sig, cert)
}

// verifySignedParts verifies the signature part sig (header and body, as
// [signedParts] returns it) over content, as [VerifySigned] documents, and
// returns the content verified (content itself, or its CRLF form) and the
// signer.
func verifySignedParts(content, sig []byte, cert *x509.Certificate) ([]byte, *x509.Certificate, error) {
	sigHeader, sigBody, err := parseEntity(sig)
	if err != nil {
		return nil, nil, err
	}
	sigType, _, _ := mime.ParseMediaType(sigHeader.Get("Content-Type"))
	if sigType != mediaPKCS7Sig && sigType != "application/x-pkcs7-signature" {
		return nil, nil, fmt.Errorf("%w: signature part is %q, want %s", ErrSignature, sigType, mediaPKCS7Sig)
	}
	der, err := decodeBody(sigHeader.Get("Content-Transfer-Encoding"), sigBody)
	if err != nil {
		return nil, nil, err
	}
	if d, err := derOrBase64(der); err == nil {
		der = d
	}
	signer, err := verifyDetached(content, der, cert)
	if err != nil {
		if canon, changed := toCRLF(content); changed {
			if s, err2 := verifyDetached(canon, der, cert); err2 == nil {
				return canon, s, nil
			}
		}
		return nil, nil, err
	}
	return content, signer, nil
}

// verifyDetached verifies a detached CMS SignedData over content, with the
// signer pinned to cert when cert is non-nil.
func verifyDetached(content, der []byte, cert *x509.Certificate) (*x509.Certificate, error) {
	p7, err := pkcs7.Parse(der)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrSignature, err)
	}
	if len(p7.Signers) != 1 {
		return nil, fmt.Errorf("%w: %d signers, want 1", ErrSignature, len(p7.Signers))
	}
	p7.Content = content
	if cert != nil {
		p7.Certificates = []*x509.Certificate{cert}
	}
	signer := p7.GetOnlySigner()
	if signer == nil {
		if cert != nil {
			return nil, fmt.Errorf("%w: not signed by %s", ErrSignature, certName(cert))
		}
		return nil, fmt.Errorf("%w: the signer's certificate is not in the signature", ErrSignature)
	}
	if err := p7.Verify(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrSignature, err)
	}
	return signer, nil
}

// Decrypt opens a CMS EnvelopedData (the body of an application/pkcs7-mime
// entity, DER or base64) addressed to cert with its RSA private key, and
// returns the content: normally a MIME entity. AES-128/192/256-CBC,
// AES-GCM, DES-EDE3-CBC and DES-CBC content encryption and RSA PKCS #1 v1.5
// or OAEP key transport are understood; OAEP without parameters (as
// pyas2lib writes it) is read as the SHA-1 default. The error wraps
// [ErrDecryption].
func Decrypt(body []byte, cert *x509.Certificate, key crypto.Signer) ([]byte, error) {
	if cert == nil || key == nil {
		return nil, fmt.Errorf("%w: no certificate and key to decrypt with", ErrDecryption)
	}
	d, err := decrypterOf(key)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrDecryption, err)
	}
	der, err := derOrBase64(body)
	if err != nil {
		return nil, fmt.Errorf("%w: body is neither DER nor base64 DER", ErrDecryption)
	}
	p7, err := pkcs7.Parse(oaepDefaultParams(der))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrDecryption, err)
	}
	plain, err := p7.Decrypt(cert, d)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrDecryption, err)
	}
	return plain, nil
}

// OpenOptions says how [OpenMessage] opens a message.
type OpenOptions struct {
	// Cert and Key are the receiver's certificate and RSA private key, used
	// to decrypt an application/pkcs7-mime message. Optional: without them
	// an encrypted message fails with [ErrDecryption].
	Cert *x509.Certificate
	Key  crypto.Signer
	// SignerCert is the sender's certificate, exchanged out of band: a
	// signed message must be signed by exactly this certificate. Optional:
	// nil accepts the certificate carried in the signature (integrity only).
	SignerCert *x509.Certificate
	// MICAlgorithm is the algorithm of [Opened.MIC], in either spelling
	// ("sha256", "sha-256"), normally the first one the sender asked for in
	// signed-receipt-micalg. Optional. Default: for a signed message, the
	// digest its micalg parameter names (RFC 4130 §7.3.1: the MIC of a
	// signed message is in the digest it was signed with), else sha-256;
	// an unknown one falls back to sha-256.
	MICAlgorithm string
	// MaxDecompressedSize bounds the content of the compressed-data
	// layers, all together, in bytes: more fails with [ErrDecompression]
	// and [ErrTooLarge] after reading at most this much (a zlib bomb, or
	// compressed-data nested in itself).
	// Optional. Default [DefaultMaxDecompressedSize] (64 MiB).
	MaxDecompressedSize int64
}

// Opened is an AS2 message as received and opened by [OpenMessage].
type Opened struct {
	// Header is the header of the payload entity: the MIME header inside
	// the signature or the encryption, or nil for a plain message.
	Header textproto.MIMEHeader
	// ContentType is the payload's Content-Type, e.g. "application/EDI-X12".
	ContentType string
	// Payload is the content, with its Content-Transfer-Encoding undone.
	Payload []byte
	// Encrypted, Signed and Compressed report the layers that were opened.
	Encrypted, Signed, Compressed bool
	// Bare reports that the innermost entity had no MIME header fields:
	// the payload alone was encrypted, signed or compressed. Header is then
	// nil and ContentType "application/octet-stream".
	Bare bool
	// Signer is the certificate that signed the message, or nil.
	Signer *x509.Certificate
	// MIC is the Received-Content-MIC to return in the MDN, RFC 4130
	// §7.3.1 and RFC 5402 §4: over the signed entity (header and content,
	// canonical, compressed or not) of a signed message; over the innermost
	// entity (decrypted and decompressed, with its MIME header fields) of
	// an encrypted or compressed unsigned one; over the content alone of a
	// plain one.
	MIC string
}

// OpenMessage opens an AS2 message given its Content-Type header value and
// body, layer by layer, and returns the payload and the MIC to put in the
// MDN. This is the receiving side of what a [Sender] sends, for partners,
// simulators and tests. See [openMessage] in envelope.go for the layers
// understood: enveloped-data (decrypted), compressed-data (decompressed,
// RFC 5402, at most OpenOptions.MaxDecompressedSize bytes), multipart/signed
// and opaque signed-data (verified), nested in any order, and inner entities
// without MIME header fields (bare payloads).
//
// The error wraps [ErrDecryption], [ErrDecompression], [ErrSignature] or
// [ErrMalformedMIME]; the message is then not processed and the MDN should
// say "processed/error: decryption-failed", "decompression-failed"
// (RFC 5402 §5) or "authentication-failed" (RFC 4130 §7.4.3).
func OpenMessage(contentType string, body []byte, opts OpenOptions) (*Opened, error) {
	return openMessage(contentType, body, opts)
}

// signedReceiptMICAlg returns the first MIC algorithm of a
// Disposition-Notification-Options header (RFC 4130 §7.3) this package can
// compute, or "" if the header asks for none.
func signedReceiptMICAlg(options string) string {
	for _, param := range strings.Split(options, ";") {
		name, value, ok := strings.Cut(param, "=")
		if !ok || !strings.EqualFold(strings.TrimSpace(name), "signed-receipt-micalg") {
			continue
		}
		values := strings.Split(value, ",")
		for _, v := range values[1:] { // values[0] is the importance
			if a, err := lookupSignAlg(v); err == nil {
				return a.micalg
			}
		}
	}
	return ""
}

// SignedReceiptRequest parses a Disposition-Notification-Options header
// value (RFC 4130 §7.3) and reports whether it asks for a signed receipt
// (signed-receipt-protocol with pkcs7-signature) and with which MIC
// algorithm: the first of signed-receipt-micalg this package can compute,
// in RFC 5751 spelling, or "" if none is named or known.
func SignedReceiptRequest(options string) (signed bool, micalg string) {
	for _, param := range strings.Split(options, ";") {
		name, value, ok := strings.Cut(param, "=")
		if ok && strings.EqualFold(strings.TrimSpace(name), "signed-receipt-protocol") {
			signed = strings.Contains(strings.ToLower(value), "pkcs7-signature")
		}
	}
	return signed, signedReceiptMICAlg(options)
}
