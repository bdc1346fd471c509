package metrics

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/floodgate-go/floodgate/internal/tlsfiles"
)

// ErrTLSConfig is wrapped by [TLSConfig] for files that do not load and by
// [StartTLS] and [ServeTLS] for a config without a certificate.
var ErrTLSConfig = errors.New("metrics: invalid TLS config")

// TLSConfig returns a server TLS config (TLS 1.2 or later) from PEM files:
// certFile and keyFile, both required, are the server's certificate
// (chain) and key; clientCAFile, optional, is a CA bundle, and when given
// every scraper must present a client certificate chained to it (mTLS).
// The error wraps [ErrTLSConfig] and names the file; it never quotes a
// key. Pass the result to [StartTLS] or [ServeTLS].
func TLSConfig(certFile, keyFile, clientCAFile string) (*tls.Config, error) {
	if certFile == "" || keyFile == "" {
		return nil, fmt.Errorf("%w: certificate and key files are required", ErrTLSConfig)
	}
	cert, _, err := tlsfiles.KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrTLSConfig, err)
	}
	c := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tlsfiles.MinVersion}
	if clientCAFile != "" {
		if c.ClientCAs, err = tlsfiles.CAPool(clientCAFile); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrTLSConfig, err)
		}
		c.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return c, nil
}

// ServeTLS is [Serve] over HTTPS with cfg (see [TLSConfig]): it listens on
// addr and serves until ctx is done. It returns an error wrapping
// [ErrTLSConfig] when cfg is nil or has no certificate, or the listen or
// server error.
func ServeTLS(ctx context.Context, addr string, g prometheus.Gatherer, cfg *tls.Config) error {
	ln, err := listenTLS(addr, cfg)
	if err != nil {
		return err
	}
	return ServeListener(ctx, ln, g)
}

// StartTLS is [Start] over HTTPS with cfg (see [TLSConfig]): it listens on
// addr, serves in the background until ctx is done and returns the bound
// address, or an error wrapping [ErrTLSConfig] (nil cfg or no certificate)
// or the listen error. A failed handshake (no or a wrong client
// certificate under mTLS) is refused by the server and not reported.
func StartTLS(ctx context.Context, addr string, g prometheus.Gatherer, cfg *tls.Config) (net.Addr, error) {
	ln, err := listenTLS(addr, cfg)
	if err != nil {
		return nil, err
	}
	go func() { _ = ServeListener(ctx, ln, g) }()
	return ln.Addr(), nil
}

func listenTLS(addr string, cfg *tls.Config) (net.Listener, error) {
	if cfg == nil || (len(cfg.Certificates) == 0 && cfg.GetCertificate == nil && cfg.GetConfigForClient == nil) {
		return nil, fmt.Errorf("%w: no server certificate", ErrTLSConfig)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics: listen on %s: %w", addr, err)
	}
	return tls.NewListener(ln, cfg), nil
}
