package deliver

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"

	"github.com/floodgate-go/floodgate/internal/tlsfiles"
)

// ErrTLSConfig is wrapped by [TLSFiles.Config] and [NewTLSClient] for PEM
// files that do not load or go together wrongly.
var ErrTLSConfig = errors.New("deliver: invalid TLS config")

// TLSFiles names the PEM files of HTTPS to one partner: a private CA that
// verifies the partner's server certificate and a client certificate that
// floodgate presents (mTLS). The zero value is valid: the system roots
// and no client certificate. It is a plain value, safe to copy; it holds
// paths, no secret, so it prints as it is.
type TLSFiles struct {
	// CA is a PEM bundle of the CA certificate(s) that verify the
	// partner's server certificate; when set, they replace the system
	// roots for this partner. Optional. Default "": the system roots.
	CA string
	// Cert and Key are the client certificate (chain) and its private key,
	// presented when the partner asks for one. Optional, both or neither.
	// Default "": no client certificate.
	Cert, Key string
	// ServerName overrides the name verified in the partner's certificate.
	// Optional. Default "": the host of the URL.
	ServerName string
}

// Config returns the client TLS config (TLS 1.2 or later) for f, or an
// error wrapping [ErrTLSConfig] naming the file; it never quotes a key.
func (f TLSFiles) Config() (*tls.Config, error) {
	c := &tls.Config{MinVersion: tlsfiles.MinVersion, ServerName: f.ServerName}
	var err error
	if f.CA != "" {
		if c.RootCAs, err = tlsfiles.CAPool(f.CA); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrTLSConfig, err)
		}
	}
	cert, ok, err := tlsfiles.KeyPair(f.Cert, f.Key)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrTLSConfig, err)
	}
	if ok {
		c.Certificates = []tls.Certificate{cert}
	}
	return c, nil
}

// NewTLSClient returns an HTTP client for one partner's
// webhook.Config.HTTPClient or as2.Config.HTTPClient: the senders' default
// transport (idle connections kept per host, redirects not followed, as
// a redirect of a POST is a misconfigured URL) with f's TLS config. Build
// one per partner and share it among that partner's senders; it is safe
// for concurrent use. Timeouts stay the senders' Config.Timeout. The error
// wraps [ErrTLSConfig].
func NewTLSClient(f TLSFiles) (*http.Client, error) {
	c, err := f.Config()
	if err != nil {
		return nil, err
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 32 // as the senders' default client
	t.TLSClientConfig = c
	return &http.Client{
		Transport:     t,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}, nil
}

// IsTLS reports whether err (a delivery error or any error wrapping one)
// is a TLS failure rather than a partner outage: the partner's certificate
// does not verify (unknown authority, expired or not yet valid, wrong
// name), the partner refused the handshake with a TLS alert (no, an
// unknown or a bad client certificate), or the URL speaks plain HTTP to
// an HTTPS peer.
//
// Such an error is classified retryable all the same, on purpose: the
// message is not at fault and would succeed once the configuration or
// the partner's certificate is fixed, so it must not be dead-lettered by
// the thousand while the breaker stays closed. Retryable, it counts as a
// failure: the partner's breaker trips, its messages wait in the retry
// queue, and the error (and [IsTLS]) tells the operator that a
// certificate, not the partner's uptime, needs attention. Alert on it.
//
// Under TLS 1.3 the client finishes its handshake before the server has
// checked the client certificate, so a server refusing a missing one may
// reach the client as a broken connection (a reset, or a broken pipe
// while the request body is written) rather than as its alert; IsTLS
// then reports false, and the error is retryable as any outage.
func IsTLS(err error) bool {
	var (
		unknownAuthority x509.UnknownAuthorityError
		invalid          x509.CertificateInvalidError
		hostname         x509.HostnameError
		verify           *tls.CertificateVerificationError
		record           tls.RecordHeaderError
		op               *net.OpError
	)
	return errors.As(err, &unknownAuthority) || errors.As(err, &invalid) || errors.As(err, &hostname) ||
		errors.As(err, &verify) || errors.As(err, &record) ||
		// crypto/tls reports an alert received from the peer as a
		// *net.OpError with Op "remote error" (its alert type is unexported).
		errors.As(err, &op) && op.Op == "remote error"
}
