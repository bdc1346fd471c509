package as2

import (
	"crypto/ecdsa"
	"fmt"
	"mime"
	"net/textproto"
	"strings"
)

// Key transports for [Config.KeyTransport]: how the content key of an
// encrypted message is encrypted to the partner's RSA key (RFC 5652
// §6.2.1).
const (
	// KeyTransportPKCS1v15 is RSA PKCS #1 v1.5 (rsaEncryption, RFC 3370
	// §4.2.1), the default, which every AS2 product reads.
	KeyTransportPKCS1v15 = "rsa-pkcs1v15"
	// KeyTransportOAEPSHA256 is RSAES-OAEP (RFC 3560) with SHA-256 and
	// MGF1 with SHA-256, both named in the parameters (RFC 4055 §4.1), for
	// peers that refuse PKCS #1 v1.5 (Node 20 by default). OpenSSL reads it;
	// pyas2lib 1.4.4 does not (it decrypts OAEP with SHA-1 only, whatever
	// the parameters say).
	KeyTransportOAEPSHA256 = "rsa-oaep-sha256"
	// KeyTransportOAEPSHA1 is RSAES-OAEP with its default parameters, SHA-1
	// and MGF1 with SHA-1 (RFC 3560 §2.2): what pyas2lib 1.4.4 and other
	// oscrypto-based peers decrypt. SHA-1 in OAEP is not a known weakness
	// (it needs no collision resistance).
	KeyTransportOAEPSHA1 = "rsa-oaep-sha1"
)

// DefaultKeyTransport is the default of [Config.KeyTransport].
const DefaultKeyTransport = KeyTransportPKCS1v15

// validateCompat checks the compatibility switches of Config.
func (c Config) validateCompat() error {
	switch strings.ToLower(strings.TrimSpace(c.KeyTransport)) {
	case "", KeyTransportPKCS1v15, KeyTransportOAEPSHA256, KeyTransportOAEPSHA1:
	default:
		return fmt.Errorf("Config.KeyTransport: %w: key transport %q (want one of %s, %s, %s)",
			ErrAlgorithm, c.KeyTransport, KeyTransportPKCS1v15, KeyTransportOAEPSHA256, KeyTransportOAEPSHA1)
	}
	if c.Filename != "" && SanitizeFilename(c.Filename) != c.Filename {
		return fmt.Errorf("Config.Filename %q: %w", c.Filename, ErrFilename)
	}
	return nil
}

// Warnings returns what about the sender's configuration is valid but
// likely to trouble a partner, fixed at [NewSender]: today an error
// wrapping [ErrECDSASigningKey] when Config.SigningKey is ECDSA. Empty when
// there is nothing to report. Log it at start-up; it never stops a send.
// Safe for concurrent use.
func (s *Sender) Warnings() []error {
	var ws []error
	if s.cfg.SigningKey != nil {
		if _, ok := s.cfg.SigningKey.Public().(*ecdsa.PublicKey); ok {
			ws = append(ws, fmt.Errorf("Config.SigningKey: %w; use an RSA key for partners that reject ECDSA (pyas2lib does)", ErrECDSASigningKey))
		}
	}
	return ws
}

// micalgName is the spelling of our digest in micalg parameters: RFC 5751
// ("sha-256"), or RFC 3851 ("sha256") with Config.LegacyMICAlg.
func (s *Sender) micalgName() string {
	if s.cfg.LegacyMICAlg {
		return strings.ReplaceAll(s.sign.micalg, "-", "")
	}
	return s.sign.micalg
}

// spellMicalg rewrites the micalg parameter of a multipart/signed entity's
// Content-Type as Config.LegacyMICAlg says.
func (s *Sender) spellMicalg(e entity) entity {
	if !s.cfg.LegacyMICAlg {
		return e
	}
	mt, params, err := mime.ParseMediaType(e.Header.Get("Content-Type"))
	if err != nil {
		return e // signEntity wrote it: unreachable
	}
	params["micalg"] = s.micalgName()
	h := textproto.MIMEHeader{}
	for k, v := range e.Header {
		h[k] = v
	}
	h.Set("Content-Type", mime.FormatMediaType(mt, params))
	return entity{Header: h, Body: e.Body}
}

// encodePayload sets the Content-Transfer-Encoding of the payload entity
// that a signature or an encryption wraps: binary, or base64 with
// Config.TransferBase64 (the body then encoded).
func (s *Sender) encodePayload(e entity) entity {
	e.Header.Set("Content-Transfer-Encoding", "binary")
	if s.cfg.TransferBase64 {
		e.Header.Set("Content-Transfer-Encoding", "base64")
		e.Body = base64Lines(e.Body)
	}
	return e
}

// encrypt encrypts a canonical entity to the partner with Config's key
// transport, and base64-encodes the result with Config.TransferBase64.
func (s *Sender) encrypt(content []byte) (entity, error) {
	var oaep *oaepParams
	switch strings.ToLower(strings.TrimSpace(s.cfg.KeyTransport)) {
	case KeyTransportOAEPSHA256:
		oaep = &oaepSHA256
	case KeyTransportOAEPSHA1:
		oaep = &oaepSHA1
	}
	e, err := encryptEntity(content, s.EncryptionCertAt(s.cfg.now()), s.enc, oaep)
	if err != nil || !s.cfg.TransferBase64 {
		return e, err
	}
	e.Header.Set("Content-Transfer-Encoding", "base64")
	e.Body = base64Lines(e.Body)
	return e, nil
}
