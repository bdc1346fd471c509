// Package tlstest makes a private PKI for tests: a CA, a server
// certificate for the loopback addresses and client certificates, all
// ECDSA P-256, valid from an hour ago for a day, so no fixture expires.
// It also writes them as PEM files, as a deployment holds them.
package tlstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// PKI is a CA with one server and one client certificate it issued.
// Its fields are read-only after [New].
type PKI struct {
	// CA is the CA certificate; Pool holds it alone.
	CA   *x509.Certificate
	Pool *x509.CertPool
	// Server is valid for 127.0.0.1, ::1 and "localhost".
	Server tls.Certificate
	// Client is a client-authentication certificate, CN "client".
	Client tls.Certificate
	// Files are the PEM files of the above, in a test temporary folder.
	Files Files

	caKey *ecdsa.PrivateKey
}

// Files are the paths of PEM files written by [New].
type Files struct {
	CA, ServerCert, ServerKey, ClientCert, ClientKey string
}

// New makes a CA named cn, a server and a client certificate, writes them
// to t.TempDir(), and fails t on any error.
func New(t testing.TB, cn string) *PKI {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := template(cn)
	tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
	tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	p := &PKI{CA: ca, Pool: x509.NewCertPool(), caKey: caKey}
	p.Pool.AddCert(ca)
	p.Server = p.Issue(t, "localhost", x509.ExtKeyUsageServerAuth)
	p.Client = p.Issue(t, "client", x509.ExtKeyUsageClientAuth)
	dir := t.TempDir()
	p.Files = Files{CA: filepath.Join(dir, "ca.pem"), ServerCert: filepath.Join(dir, "server.pem"),
		ServerKey: filepath.Join(dir, "server-key.pem"), ClientCert: filepath.Join(dir, "client.pem"),
		ClientKey: filepath.Join(dir, "client-key.pem")}
	write(t, p.Files.CA, "CERTIFICATE", ca.Raw)
	writePair(t, p.Server, p.Files.ServerCert, p.Files.ServerKey)
	writePair(t, p.Client, p.Files.ClientCert, p.Files.ClientKey)
	return p
}

// Issue returns a certificate for cn signed by the CA, with the given
// extended key usage, valid for the loopback addresses and "localhost".
func (p *PKI) Issue(t testing.TB, cn string, usage ...x509.ExtKeyUsage) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := template(cn)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.ExtKeyUsage = usage
	tmpl.DNSNames = []string{"localhost"}
	tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.CA, &key.PublicKey, p.caKey)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}
}

// ServerConfig returns a server TLS config with the server certificate;
// when mTLS, it requires a client certificate chained to the CA.
func (p *PKI) ServerConfig(mTLS bool) *tls.Config {
	c := &tls.Config{Certificates: []tls.Certificate{p.Server}, MinVersion: tls.VersionTLS12}
	if mTLS {
		c.ClientAuth, c.ClientCAs = tls.RequireAndVerifyClientCert, p.Pool
	}
	return c
}

// ClientConfig returns a client TLS config trusting the CA, presenting the
// client certificate when withCert.
func (p *PKI) ClientConfig(withCert bool) *tls.Config {
	c := &tls.Config{RootCAs: p.Pool, MinVersion: tls.VersionTLS12}
	if withCert {
		c.Certificates = []tls.Certificate{p.Client}
	}
	return c
}

func template(cn string) *x509.Certificate {
	serial, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	now := time.Now()
	return &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: cn},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour)}
}

func writePair(t testing.TB, c tls.Certificate, certFile, keyFile string) {
	t.Helper()
	write(t, certFile, "CERTIFICATE", c.Certificate[0])
	der, err := x509.MarshalPKCS8PrivateKey(c.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	write(t, keyFile, "PRIVATE KEY", der)
}

func write(t testing.TB, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}
