package as2test

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"time"

	"github.com/floodgate-go/floodgate/deliver/as2"
	"github.com/floodgate-go/floodgate/deliver/as2/as2partner"
)

// KeyBits is the size of the RSA keys [New] and [PKI.Issue] generate.
const KeyBits = 2048

// Identity is a certificate with its private key, in parsed and PEM form.
type Identity struct {
	// AS2ID is the AS2 ID the certificate was made for (its common name).
	AS2ID string
	// Cert is the certificate, issued by the PKI's CA.
	Cert *x509.Certificate
	// Key is Cert's RSA private key.
	Key *rsa.PrivateKey
	// CertPEM is Cert as a PEM "CERTIFICATE" block.
	CertPEM []byte
	// KeyPEM is Key as a PEM "PRIVATE KEY" (PKCS #8) block.
	KeyPEM []byte
}

// PKI is a throwaway CA with the two trading partners' identities. Its
// fields are read-only after [New].
type PKI struct {
	// CA is the self-signed CA certificate that issued both identities.
	CA *x509.Certificate
	// CAPEM is CA as a PEM "CERTIFICATE" block.
	CAPEM []byte
	// Sender is our side: it signs messages and is the recipient of nothing.
	Sender Identity
	// Partner is the trading partner: messages are encrypted to it, and it
	// signs the MDNs.
	Partner Identity

	caKey  crypto.Signer
	serial int64
}

// New generates a CA and the identities of senderID and partnerID (AS2 IDs,
// used as the certificates' common names), valid from an hour ago for a
// year. It takes a few hundred milliseconds (two RSA 2048 keys).
func New(senderID, partnerID string) (*PKI, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "floodgate as2test CA", Organization: []string{"floodgate test"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.AddDate(1, 0, 0),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, caKey.Public(), caKey)
	if err != nil {
		return nil, err
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	p := &PKI{CA: ca, CAPEM: pemBlock("CERTIFICATE", der), caKey: caKey, serial: 1}
	if p.Sender, err = p.Issue(senderID, now.Add(-time.Hour), now.AddDate(1, 0, 0)); err != nil {
		return nil, err
	}
	if p.Partner, err = p.Issue(partnerID, now.Add(-time.Hour), now.AddDate(1, 0, 0)); err != nil {
		return nil, err
	}
	return p, nil
}

// Issue generates an RSA key and a certificate for it, issued by the CA
// with the given validity period: use it for expired or not-yet-valid
// certificates, or a second key for a partner. The certificate is fit for
// S/MIME signing and key encipherment (key usage digitalSignature,
// nonRepudiation, keyEncipherment; extended key usage emailProtection).
// Issue is not safe for concurrent use.
func (p *PKI) Issue(as2ID string, notBefore, notAfter time.Time) (Identity, error) {
	key, err := rsa.GenerateKey(rand.Reader, KeyBits)
	if err != nil {
		return Identity{}, err
	}
	p.serial++
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(p.serial),
		Subject:      pkix.Name{CommonName: as2ID, Organization: []string{"floodgate test"}},
		NotBefore:    notBefore,
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageContentCommitment | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageEmailProtection},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.CA, key.Public(), p.caKey)
	if err != nil {
		return Identity{}, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return Identity{}, err
	}
	pkcs8, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return Identity{}, err
	}
	return Identity{
		AS2ID:   as2ID,
		Cert:    cert,
		Key:     key,
		CertPEM: pemBlock("CERTIFICATE", der),
		KeyPEM:  pemBlock("PRIVATE KEY", pkcs8),
	}, nil
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

// SenderConfig returns the sender's partner profile for a partner at url:
// From and To, our signing certificate and key, the partner's certificate
// for encryption and for MDN signatures. Algorithms and timeouts are left
// at their defaults (sha256, aes256-cbc, 30 s); set them on the result.
func (p *PKI) SenderConfig(url string) as2.Config {
	return as2.Config{
		URL:            url,
		From:           p.Sender.AS2ID,
		To:             p.Partner.AS2ID,
		SigningCert:    p.Sender.Cert,
		SigningKey:     p.Sender.Key,
		EncryptionCert: p.Partner.Cert,
		MDNCert:        p.Partner.Cert,
	}
}

// PartnerConfig returns the partner simulator's configuration matching
// [PKI.SenderConfig]: its AS2 ID, certificate and key (to decrypt and to sign
// MDNs), the sender's certificate (to verify signatures), and it requires
// every message to be signed and encrypted. The Script is empty (healthy);
// set it on the result.
func (p *PKI) PartnerConfig() as2partner.Config {
	return as2partner.Config{
		AS2ID:            p.Partner.AS2ID,
		Cert:             p.Partner.Cert,
		Key:              p.Partner.Key,
		SenderCert:       p.Sender.Cert,
		RequireSigned:    true,
		RequireEncrypted: true,
	}
}

// Files are the paths of the PEM files [PKI.WriteFiles] wrote.
type Files struct {
	// CA is the CA certificate, ca.pem.
	CA string
	// SenderCert and SenderKey are sender.pem and sender.key.
	SenderCert, SenderKey string
	// PartnerCert and PartnerKey are partner.pem and partner.key.
	PartnerCert, PartnerKey string
}

// Profile returns the sender's [as2.ProfileFiles] for these files.
func (f Files) Profile() as2.ProfileFiles {
	return as2.ProfileFiles{
		SigningCert:    f.SenderCert,
		SigningKey:     f.SenderKey,
		EncryptionCert: f.PartnerCert,
		MDNCert:        f.PartnerCert,
	}
}

// WriteFiles writes the CA certificate and both identities as PEM files into
// dir (which must exist), keys with mode 0600, and returns their paths.
func (p *PKI) WriteFiles(dir string) (Files, error) {
	f := Files{
		CA:          filepath.Join(dir, "ca.pem"),
		SenderCert:  filepath.Join(dir, "sender.pem"),
		SenderKey:   filepath.Join(dir, "sender.key"),
		PartnerCert: filepath.Join(dir, "partner.pem"),
		PartnerKey:  filepath.Join(dir, "partner.key"),
	}
	for _, w := range []struct {
		path string
		data []byte
		mode os.FileMode
	}{
		{f.CA, p.CAPEM, 0o644},
		{f.SenderCert, p.Sender.CertPEM, 0o644},
		{f.SenderKey, p.Sender.KeyPEM, 0o600},
		{f.PartnerCert, p.Partner.CertPEM, 0o644},
		{f.PartnerKey, p.Partner.KeyPEM, 0o600},
	} {
		if err := os.WriteFile(w.path, w.data, w.mode); err != nil {
			return Files{}, fmt.Errorf("as2test: %w", err)
		}
	}
	return f, nil
}
