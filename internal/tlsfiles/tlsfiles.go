// Package tlsfiles loads the PEM files of a TLS setup (a CA bundle, a
// certificate and its key) with errors naming the file, for the exported
// helpers of deliver (HTTPS client) and metrics (HTTPS server).
package tlsfiles

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
)

// MinVersion is the lowest TLS version floodgate speaks or accepts.
const MinVersion = tls.VersionTLS12

// CAPool returns a pool of the PEM certificates in file (one or more). It
// returns an error naming file when it cannot be read or holds no
// certificate.
func CAPool(file string) (*x509.CertPool, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("CA file: %w", err)
	}
	p := x509.NewCertPool()
	if !p.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("CA file %s: no PEM certificate in it", file)
	}
	return p, nil
}

// KeyPair loads a certificate (chain) and its private key from PEM files.
// Both or neither must be given: ok is false for neither. The error names
// the files, never the key's contents.
func KeyPair(certFile, keyFile string) (c tls.Certificate, ok bool, err error) {
	switch {
	case certFile == "" && keyFile == "":
		return c, false, nil
	case certFile == "" || keyFile == "":
		return c, false, errors.New("certificate and key files go together: give both or neither")
	}
	c, err = tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		// The error of crypto/tls quotes no key material.
		return c, false, fmt.Errorf("certificate %s and key %s: %w", certFile, keyFile, err)
	}
	return c, true, nil
}
