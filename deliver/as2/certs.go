package as2

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"time"
)

// certName names a certificate in error messages: its subject and serial.
func certName(c *x509.Certificate) string {
	return fmt.Sprintf("%q (serial %s)", c.Subject.String(), c.SerialNumber.Text(16))
}

// checkValidity reports whether now is within the certificate's validity
// period, with an error wrapping ErrCertExpired or ErrCertNotYetValid.
func checkValidity(c *x509.Certificate, now time.Time) error {
	if now.After(c.NotAfter) {
		return fmt.Errorf("%w: %s expired at %s", ErrCertExpired, certName(c), c.NotAfter.UTC().Format(time.RFC3339))
	}
	if now.Before(c.NotBefore) {
		return fmt.Errorf("%w: %s is valid from %s", ErrCertNotYetValid, certName(c), c.NotBefore.UTC().Format(time.RFC3339))
	}
	return nil
}

// publicKeyEqual is implemented by every public key of the standard library.
type publicKeyEqual interface {
	Equal(crypto.PublicKey) bool
}

// checkSigningKey reports whether key is an RSA or ECDSA key whose public key
// is the certificate's.
func checkSigningKey(c *x509.Certificate, key crypto.Signer) error {
	switch key.Public().(type) {
	case *rsa.PublicKey, *ecdsa.PublicKey:
	default:
		return fmt.Errorf("%w: signing key is %T, want RSA or ECDSA", ErrKeyType, key.Public())
	}
	pub, ok := key.Public().(publicKeyEqual)
	if !ok || !pub.Equal(c.PublicKey) {
		return fmt.Errorf("%w: the key is not the private key of %s", ErrKeyMismatch, certName(c))
	}
	return nil
}

// checkEncryptionCert reports whether the certificate can receive an RSA
// key-transport envelope.
func checkEncryptionCert(c *x509.Certificate) error {
	if _, ok := c.PublicKey.(*rsa.PublicKey); !ok {
		return fmt.Errorf("%w: %s has a %T public key; encryption needs RSA", ErrKeyType, certName(c), c.PublicKey)
	}
	return nil
}

// ProfileFiles names the PEM files of a partner profile. Each path is
// optional; an empty one leaves the matching [Config] field as it is.
type ProfileFiles struct {
	// SigningCert is our certificate (PEM "CERTIFICATE"; the first one is
	// used). Sets Config.SigningCert.
	SigningCert string
	// SigningKey is our private key: PEM "PRIVATE KEY" (PKCS #8),
	// "RSA PRIVATE KEY" (PKCS #1) or "EC PRIVATE KEY" (SEC 1), unencrypted.
	// Sets Config.SigningKey.
	SigningKey string
	// EncryptionCert is the partner's certificate we encrypt to. Sets
	// Config.EncryptionCert.
	EncryptionCert string
	// MDNCert is the partner's MDN-signing certificate. Sets Config.MDNCert.
	MDNCert string
	// NextMDNCert and NextEncryptionCert are the partner's next
	// certificates during a rollover. Set Config.NextMDNCert and
	// Config.NextEncryptionCert (Config.NextEncryptionFrom comes with cfg).
	NextMDNCert, NextEncryptionCert string
	// TrustRoots holds the CA certificates of the CA model (every
	// "CERTIFICATE" block of the file). Sets Config.TrustRoots.
	TrustRoots string
}

// LoadProfile reads the PEM files named by files into a copy of cfg (which
// holds the AS2 IDs, URL, algorithms and timeouts), validates the result with
// [Config.Validate] and returns it. Errors name the file and the field: a
// file that cannot be read or parsed wraps [ErrPEM]; the validation errors
// are those of Config.Validate (an expired certificate, a key that does not
// match its certificate, a missing key, an unknown algorithm, a certificate
// not chained to TrustRoots, ...), checked at cfg.Now.
func LoadProfile(cfg Config, files ProfileFiles) (Config, error) {
	var err error
	if files.SigningCert != "" {
		if cfg.SigningCert, err = LoadCertificate(files.SigningCert); err != nil {
			return Config{}, fmt.Errorf("ProfileFiles.SigningCert: %w", err)
		}
	}
	if files.SigningKey != "" {
		if cfg.SigningKey, err = LoadPrivateKey(files.SigningKey); err != nil {
			return Config{}, fmt.Errorf("ProfileFiles.SigningKey: %w", err)
		}
	}
	if files.EncryptionCert != "" {
		if cfg.EncryptionCert, err = LoadCertificate(files.EncryptionCert); err != nil {
			return Config{}, fmt.Errorf("ProfileFiles.EncryptionCert: %w", err)
		}
	}
	if files.MDNCert != "" {
		if cfg.MDNCert, err = LoadCertificate(files.MDNCert); err != nil {
			return Config{}, fmt.Errorf("ProfileFiles.MDNCert: %w", err)
		}
	}
	for _, f := range []struct {
		name, path string
		dst        **x509.Certificate
	}{{"NextMDNCert", files.NextMDNCert, &cfg.NextMDNCert}, {"NextEncryptionCert", files.NextEncryptionCert, &cfg.NextEncryptionCert}} {
		if f.path == "" {
			continue
		}
		if *f.dst, err = LoadCertificate(f.path); err != nil {
			return Config{}, fmt.Errorf("ProfileFiles.%s: %w", f.name, err)
		}
	}
	if files.TrustRoots != "" {
		if cfg.TrustRoots, err = LoadCertPool(files.TrustRoots); err != nil {
			return Config{}, fmt.Errorf("ProfileFiles.TrustRoots: %w", err)
		}
	}
	if err := cfg.Validate(); err != nil {
		return Config{}, fmt.Errorf("invalid profile: %w", err)
	}
	return cfg, nil
}

// LoadCertificate reads the first PEM "CERTIFICATE" block of the file at
// path. The error wraps [ErrPEM] when the file holds none or it does not
// parse, or the error of os.ReadFile.
func LoadCertificate(path string) (*x509.Certificate, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseCertificatePEM(b)
}

// ParseCertificatePEM parses the first PEM "CERTIFICATE" block of b, with an
// error wrapping [ErrPEM].
func ParseCertificatePEM(b []byte) (*x509.Certificate, error) {
	for {
		var block *pem.Block
		block, b = pem.Decode(b)
		if block == nil {
			return nil, fmt.Errorf("%w: no CERTIFICATE block", ErrPEM)
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrPEM, err)
		}
		return c, nil
	}
}

// LoadPrivateKey reads the first private key block of the PEM file at path:
// "PRIVATE KEY" (PKCS #8), "RSA PRIVATE KEY" (PKCS #1) or "EC PRIVATE KEY".
// Encrypted PEM is not supported. The error wraps [ErrPEM] when the file
// holds no such block or it does not parse, [ErrKeyType] when the key cannot
// sign, or the error of os.ReadFile.
func LoadPrivateKey(path string) (crypto.Signer, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParsePrivateKeyPEM(b)
}

// ParsePrivateKeyPEM parses the first private key block of b, like
// [LoadPrivateKey].
func ParsePrivateKeyPEM(b []byte) (crypto.Signer, error) {
	for {
		var block *pem.Block
		block, b = pem.Decode(b)
		if block == nil {
			return nil, fmt.Errorf("%w: no PRIVATE KEY, RSA PRIVATE KEY or EC PRIVATE KEY block", ErrPEM)
		}
		var key any
		var err error
		switch block.Type {
		case "PRIVATE KEY":
			key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
		case "RSA PRIVATE KEY":
			key, err = x509.ParsePKCS1PrivateKey(block.Bytes)
		case "EC PRIVATE KEY":
			key, err = x509.ParseECPrivateKey(block.Bytes)
		case "ENCRYPTED PRIVATE KEY":
			return nil, fmt.Errorf("%w: encrypted private keys are not supported; decrypt it first (openssl pkey)", ErrPEM)
		default:
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrPEM, block.Type, err)
		}
		signer, ok := key.(crypto.Signer)
		if !ok {
			return nil, fmt.Errorf("%w: %T", ErrKeyType, key)
		}
		return signer, nil
	}
}

// decrypterOf returns key as a crypto.Decrypter holding an RSA key, the only
// kind that can open an RSA key-transport envelope.
func decrypterOf(key crypto.Signer) (crypto.Decrypter, error) {
	d, ok := key.(crypto.Decrypter)
	if !ok {
		return nil, errors.New("key cannot decrypt")
	}
	if _, ok := d.Public().(*rsa.PublicKey); !ok {
		return nil, fmt.Errorf("%w: %T cannot open an RSA key-transport envelope", ErrKeyType, d.Public())
	}
	return d, nil
}
