package as2

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/smallstep/pkcs7"

	"github.com/floodgate-go/floodgate/deliver"
)

// The trust model of a partner's certificates (Config.TrustRoots):
//
//   - pinned (TrustRoots nil, the usual case): the partner's certificates
//     are exchanged out of band, often self-signed, and only they are
//     trusted: an MDN must be signed by exactly Config.MDNCert or, during
//     a rollover, Config.NextMDNCert;
//   - CA: every configured partner certificate must chain to TrustRoots,
//     and an MDN may be signed by any certificate that does (carried in
//     its signature).
//
// Either way a certificate is used only within its validity period, by
// Config.Now: checked when the Sender is created ([NewSender],
// [LoadProfile]) and at every MDN. A failure is a [*TrustError]; [Sender.Send]
// returns it inside a [*deliver.ParkError], so the floodgate middleware
// parks the partner (its breaker forced open, the messages kept in the
// retry stream) until an operator fixes the profile.

// TrustError reports a partner certificate that is not trusted: expired,
// not yet valid, not the pinned one, or not chained to the configured CA.
// Err is the sentinel: [ErrCertExpired], [ErrCertNotYetValid],
// [ErrCertNotPinned] or [ErrCertUntrusted]; errors.Is reaches it, and
// errors.As(err, new(*TrustError)) the details.
type TrustError struct {
	// Role names the certificate: a Config field ("Config.MDNCert") or
	// "MDN signer".
	Role string
	// Cert is the certificate judged, or nil when it is not known (a
	// signature whose signing time is outside its signer's validity).
	Cert *x509.Certificate
	// At is the time it was judged at (Config.Now).
	At time.Time
	// Err is the sentinel saying what is wrong.
	Err error
	// Detail says more: the validity period, the pinned certificates, the
	// chain error.
	Detail string
}

// Error returns "<role> <subject> (serial <hex>): <sentinel>: <detail>".
func (e *TrustError) Error() string {
	var b strings.Builder
	b.WriteString(e.Role)
	if e.Cert != nil {
		b.WriteString(" ")
		b.WriteString(certName(e.Cert))
	}
	b.WriteString(": ")
	b.WriteString(e.Err.Error())
	if e.Detail != "" {
		b.WriteString(": ")
		b.WriteString(e.Detail)
	}
	return b.String()
}

// Unwrap returns Err.
func (e *TrustError) Unwrap() error { return e.Err }

// rfc3339 formats t for error messages.
func rfc3339(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// checkTrustTime reports whether cert is valid at now, as a *TrustError.
func checkTrustTime(role string, cert *x509.Certificate, now time.Time) error {
	switch {
	case now.After(cert.NotAfter):
		return &TrustError{Role: role, Cert: cert, At: now, Err: ErrCertExpired,
			Detail: fmt.Sprintf("valid until %s, checked at %s", rfc3339(cert.NotAfter), rfc3339(now))}
	case now.Before(cert.NotBefore):
		return &TrustError{Role: role, Cert: cert, At: now, Err: ErrCertNotYetValid,
			Detail: fmt.Sprintf("valid from %s, checked at %s", rfc3339(cert.NotBefore), rfc3339(now))}
	}
	return nil
}

// checkChain reports whether cert chains to roots at t, as a *TrustError
// wrapping ErrCertUntrusted. Any extended key usage is accepted: AS2
// certificates carry emailProtection, or none.
func checkChain(role string, cert *x509.Certificate, roots *x509.CertPool, t time.Time) error {
	_, err := cert.Verify(x509.VerifyOptions{Roots: roots, CurrentTime: t, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
	if err != nil {
		return &TrustError{Role: role, Cert: cert, At: t, Err: ErrCertUntrusted, Detail: err.Error()}
	}
	return nil
}

// now returns Config.Now(), or the current time.
func (c Config) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

// rolledOver reports whether NextEncryptionCert has replaced
// EncryptionCert at now.
func (c Config) rolledOver(now time.Time) bool {
	return c.NextEncryptionCert != nil && !now.Before(c.NextEncryptionFrom)
}

// signedMDN reports whether a signed MDN is asked for: MDNCert or
// TrustRoots set, and an MDN asked for at all.
func (c Config) signedMDN() bool {
	return c.MDNMode != MDNNone && (c.MDNCert != nil || c.TrustRoots != nil)
}

// validateTrust checks the rollover fields, and in the CA model that every
// configured partner certificate chains to TrustRoots (a Next one at the
// later of now and its NotBefore).
func (c Config) validateTrust(now time.Time) error {
	if c.NextMDNCert != nil {
		if c.MDNCert == nil && c.TrustRoots == nil {
			return fmt.Errorf("Config.NextMDNCert: %w: set MDNCert, the current certificate, too", ErrRollover)
		}
		if now.After(c.NextMDNCert.NotAfter) {
			return fmt.Errorf("Config.NextMDNCert: %w", checkTrustTime("Config.NextMDNCert", c.NextMDNCert, now))
		}
	}
	if n := c.NextEncryptionCert; n != nil {
		switch {
		case c.EncryptionCert == nil:
			return fmt.Errorf("Config.NextEncryptionCert: %w: set EncryptionCert, the current certificate, too", ErrRollover)
		case c.NextEncryptionFrom.IsZero():
			return fmt.Errorf("Config.NextEncryptionFrom: %w: it is required with NextEncryptionCert", ErrRollover)
		case c.NextEncryptionFrom.Before(n.NotBefore) || c.NextEncryptionFrom.After(n.NotAfter):
			return fmt.Errorf("Config.NextEncryptionFrom %s: %w: NextEncryptionCert %s is valid from %s to %s",
				rfc3339(c.NextEncryptionFrom), ErrRollover, certName(n), rfc3339(n.NotBefore), rfc3339(n.NotAfter))
		case now.After(n.NotAfter):
			return fmt.Errorf("Config.NextEncryptionCert: %w", checkTrustTime("Config.NextEncryptionCert", n, now))
		}
		if err := checkEncryptionCert(n); err != nil {
			return fmt.Errorf("Config.NextEncryptionCert: %w", err)
		}
	}
	if c.TrustRoots == nil {
		return nil
	}
	for _, f := range []struct {
		name string
		cert *x509.Certificate
	}{
		{"Config.EncryptionCert", c.EncryptionCert}, {"Config.NextEncryptionCert", c.NextEncryptionCert},
		{"Config.MDNCert", c.MDNCert}, {"Config.NextMDNCert", c.NextMDNCert},
	} {
		if f.cert == nil {
			continue
		}
		t := now
		if t.Before(f.cert.NotBefore) {
			t = f.cert.NotBefore
		}
		if f.cert.NotAfter.Before(t) {
			t = f.cert.NotAfter // an old certificate already replaced: judge its chain while it was valid
		}
		if err := checkChain(f.name, f.cert, c.TrustRoots, t); err != nil {
			return fmt.Errorf("%s: %w", f.name, err)
		}
	}
	return nil
}

// EncryptionCertAt returns the certificate messages are encrypted to at t:
// Config.NextEncryptionCert from Config.NextEncryptionFrom on, else
// Config.EncryptionCert (nil when messages are not encrypted). Safe for
// concurrent use.
func (s *Sender) EncryptionCertAt(t time.Time) *x509.Certificate {
	if s.cfg.rolledOver(t) {
		return s.cfg.NextEncryptionCert
	}
	return s.cfg.EncryptionCert
}

// VerifyMDNAt verifies a signed MDN (the Content-Type header value and the
// body of the answer) against the partner's trust model at now, and parses
// it as [VerifyMDN] does. The signer must be Config.MDNCert or
// Config.NextMDNCert (tried in this order) or, with Config.TrustRoots, a
// certificate carried in the signature that chains to it; and it must be
// valid at now. [Sender.Send] calls it at Config.Now for every MDN when a
// signed MDN is asked for.
//
// Errors: those of [VerifyMDN] (no MDN, malformed, [ErrMDNUnsigned] with
// the MDN, [ErrMDNSignature] for a signature that does not verify), and a
// [*TrustError] (with the MDN as parsed) for a signer that is expired or
// not yet valid ([ErrCertExpired], [ErrCertNotYetValid]: at now, or at the
// signing time the signature carries), not pinned ([ErrCertNotPinned]) or
// not chained to TrustRoots ([ErrCertUntrusted]). Safe for concurrent use.
func (s *Sender) VerifyMDNAt(contentType string, body []byte, now time.Time) (*MDN, error) {
	var (
		mdn      *MDN
		firstErr error
	)
	for _, c := range []*x509.Certificate{s.cfg.MDNCert, s.cfg.NextMDNCert} {
		if c == nil {
			continue
		}
		m, err := VerifyMDN(contentType, body, c)
		switch {
		case err == nil:
			if err := checkTrustTime("MDN signer", c, now); err != nil {
				m.Verified = false // a signature by an untrusted certificate proves nothing
				return m, err
			}
			return m, nil
		case !errors.Is(err, ErrMDNSignature):
			return m, err // no MDN, malformed or unsigned: the same with any certificate
		}
		if te := signingTimeError(c, err, now); te != nil {
			return m, te
		}
		if firstErr == nil {
			mdn, firstErr = m, err
		}
	}
	// Not signed by a pinned certificate: who signed it?
	m, err := VerifyMDN(contentType, body, nil)
	if err != nil {
		if te := signingTimeError(nil, err, now); te != nil {
			if s.cfg.TrustRoots == nil {
				return m, &TrustError{Role: "MDN signer", At: now, Err: ErrCertNotPinned,
					Detail: "pinned: " + s.pinnedNames() + "; the signer's own certificate is not valid either (" + te.(*TrustError).Detail + ")"}
			}
			return m, te
		}
		if firstErr != nil {
			return mdn, firstErr // does not verify with the pinned certificates
		}
		return m, err
	}
	if s.cfg.TrustRoots == nil {
		m.Verified = false
		return m, &TrustError{Role: "MDN signer", Cert: m.Signer, At: now, Err: ErrCertNotPinned,
			Detail: "pinned: " + s.pinnedNames()}
	}
	if err := checkTrustTime("MDN signer", m.Signer, now); err != nil {
		m.Verified = false
		return m, err
	}
	if err := checkChain("MDN signer", m.Signer, s.cfg.TrustRoots, now); err != nil {
		m.Verified = false
		return m, err
	}
	return m, nil
}

// signingTimeError returns the *TrustError of a signature whose signing
// time falls outside its signer's validity (pkcs7 checks it before the
// signature), or nil when err is another error.
func signingTimeError(cert *x509.Certificate, err error, now time.Time) error {
	var st *pkcs7.SigningTimeNotValidError
	if !errors.As(err, &st) {
		return nil
	}
	sentinel := ErrCertExpired
	if st.SigningTime.Before(st.NotBefore) {
		sentinel = ErrCertNotYetValid
	}
	return &TrustError{Role: "MDN signer", Cert: cert, At: now, Err: sentinel,
		Detail: fmt.Sprintf("signed at %s, valid from %s to %s", rfc3339(st.SigningTime), rfc3339(st.NotBefore), rfc3339(st.NotAfter))}
}

// pinnedNames names the pinned MDN certificates, for error messages.
func (s *Sender) pinnedNames() string {
	var names []string
	for _, c := range []*x509.Certificate{s.cfg.MDNCert, s.cfg.NextMDNCert} {
		if c != nil {
			names = append(names, certName(c))
		}
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// park wraps a trust failure of an MDN: the partner has the message, but
// its receipt cannot be trusted until the profile is fixed, so the partner
// is parked and the message kept (retryable).
func park(status int, mdn *MDN, cause error) error {
	de := &deliver.Error{Kind: deliver.ErrRetryable, Op: opSend, StatusCode: status, Cause: cause}
	if mdn != nil {
		de.Disposition = mdn.DispositionField
	}
	return &deliver.ParkError{Op: opSend, Reason: deliver.ParkAS2Trust, Cause: de}
}

// LoadCertPool reads every PEM "CERTIFICATE" block of the file at path into
// a new pool, for Config.TrustRoots. The error wraps [ErrPEM] when the
// file holds none or one does not parse, or is the error of os.ReadFile.
func LoadCertPool(path string) (*x509.CertPool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseCertPoolPEM(b)
}

// ParseCertPoolPEM parses every PEM "CERTIFICATE" block of b into a new
// pool, like [LoadCertPool].
func ParseCertPoolPEM(b []byte) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	n := 0
	for {
		var block *pem.Block
		if block, b = pem.Decode(b); block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%w: certificate %d: %v", ErrPEM, n+1, err)
		}
		pool.AddCert(c)
		n++
	}
	if n == 0 {
		return nil, fmt.Errorf("%w: no CERTIFICATE block", ErrPEM)
	}
	return pool, nil
}
