package as2

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/floodgate-go/floodgate/internal/redact"
)

// configView is what every printed form of a [Config] shows: the signing
// key is "REDACTED" with its type, certificates are their subject and
// SHA-256 fingerprint prefix (TrustRoots: their subjects), and the user
// information, query values and path secrets of URL and AsyncMDNURL are
// "REDACTED". Receipts, HTTPClient and Now are not printed.
type configView struct {
	URL              string
	From, To         string
	Subject          string        `json:",omitempty"`
	ContentType      string        `json:",omitempty"`
	MDNTo            string        `json:",omitempty"`
	Timeout          time.Duration `json:",omitempty"`
	MessageIDDomain  string        `json:",omitempty"`
	MaxMDNSize       int64         `json:",omitempty"`
	SigningCert      string        `json:",omitempty"`
	SigningKey       string        `json:",omitempty"`
	SignAlgorithm    string        `json:",omitempty"`
	EncryptionCert   string        `json:",omitempty"`
	EncryptAlgorithm string        `json:",omitempty"`
	MDNCert          string        `json:",omitempty"`

	NextMDNCert           string        `json:",omitempty"`
	NextEncryptionCert    string        `json:",omitempty"`
	NextEncryptionFrom    time.Time     `json:",omitzero"`
	TrustRoots            []string      `json:",omitempty"`
	Compression           string        `json:",omitempty"`
	MDNMode               string        `json:",omitempty"`
	AsyncMDNURL           string        `json:",omitempty"`
	AllowUnsignedAsyncMDN bool          `json:",omitempty"`
	AsyncMDNTimeout       time.Duration `json:",omitempty"`
	RequireSignedMDN      bool          `json:",omitempty"`
	RequireMIC            bool          `json:",omitempty"`
	WarnOnMICMismatch     bool          `json:",omitempty"`
	Filename              string        `json:",omitempty"`
	LegacyMICAlg          bool          `json:",omitempty"`
	TransferBase64        bool          `json:",omitempty"`
	KeyTransport          string        `json:",omitempty"`
}

func (c Config) view() configView {
	v := configView{URL: redact.HTTPURL(c.URL), From: c.From, To: c.To, Subject: c.Subject, ContentType: c.ContentType,
		MDNTo: c.MDNTo, Timeout: c.Timeout, MessageIDDomain: c.MessageIDDomain, MaxMDNSize: c.MaxMDNSize,
		SigningCert: redact.Cert(c.SigningCert), SignAlgorithm: c.SignAlgorithm,
		EncryptionCert: redact.Cert(c.EncryptionCert), EncryptAlgorithm: c.EncryptAlgorithm, MDNCert: redact.Cert(c.MDNCert),
		NextMDNCert: redact.Cert(c.NextMDNCert), NextEncryptionCert: redact.Cert(c.NextEncryptionCert),
		NextEncryptionFrom: c.NextEncryptionFrom, TrustRoots: poolSubjects(c.TrustRoots),
		Compression: c.Compression, MDNMode: c.MDNMode, AsyncMDNURL: redact.HTTPURL(c.AsyncMDNURL),
		AllowUnsignedAsyncMDN: c.AllowUnsignedAsyncMDN,
		AsyncMDNTimeout:       c.AsyncMDNTimeout, RequireSignedMDN: c.RequireSignedMDN, RequireMIC: c.RequireMIC,
		WarnOnMICMismatch: c.WarnOnMICMismatch, Filename: c.Filename, LegacyMICAlg: c.LegacyMICAlg,
		TransferBase64: c.TransferBase64, KeyTransport: c.KeyTransport}
	if c.SigningKey != nil {
		v.SigningKey = redact.Key(c.SigningKey)
	}
	return v
}

// poolSubjects lists the subjects of the certificates in pool (nil for
// none): a trust anchor is public, and its subject names it.
func poolSubjects(pool *x509.CertPool) []string {
	if pool == nil {
		return nil
	}
	var names []string
	//lint:ignore SA1019 the pool is ours (never the system pool), so Subjects lists it all
	for _, raw := range pool.Subjects() {
		var rdn pkix.RDNSequence
		if _, err := asn1.Unmarshal(raw, &rdn); err != nil {
			names = append(names, "unparsable subject")
			continue
		}
		var n pkix.Name
		n.FillFromRDNSequence(&rdn)
		names = append(names, n.String())
	}
	if names == nil {
		names = []string{}
	}
	return names
}

// Format prints c with any verb (%v, %+v, %#v, %s, %q, %x, ...) with
// SigningKey replaced by "REDACTED" and its type (a *rsa.PrivateKey printed
// as it is shows its private exponent), certificates as their subject and
// fingerprint, and the URL's user information and query values redacted.
// HTTPClient is not printed.
func (c Config) Format(f fmt.State, verb rune) { redact.Format(f, verb, c.view()) }

// MarshalJSON encodes c as [Config.Format] prints it: the key redacted.
func (c Config) MarshalJSON() ([]byte, error) { return json.Marshal(c.view()) }

// LogValue logs c as [Config.Format] prints it: the key redacted.
func (c Config) LogValue() slog.Value { return slog.AnyValue(c.view()) }

// Format prints the sender as its [Config] (redacted), so printing a
// *Sender never shows the signing key.
func (s *Sender) Format(f fmt.State, verb rune) {
	redact.Format(f, verb, struct{ Sender configView }{s.cfg.view()})
}

// openOptionsView is what every printed form of [OpenOptions] shows: the
// key "REDACTED" with its type, certificates by subject and fingerprint.
type openOptionsView struct {
	Cert                string `json:",omitempty"`
	Key                 string `json:",omitempty"`
	SignerCert          string `json:",omitempty"`
	MICAlgorithm        string `json:",omitempty"`
	MaxDecompressedSize int64  `json:",omitempty"`
}

func (o OpenOptions) view() openOptionsView {
	v := openOptionsView{Cert: redact.Cert(o.Cert), SignerCert: redact.Cert(o.SignerCert),
		MICAlgorithm: o.MICAlgorithm, MaxDecompressedSize: o.MaxDecompressedSize}
	if o.Key != nil {
		v.Key = redact.Key(o.Key)
	}
	return v
}

// Format prints o with any verb with Key replaced by "REDACTED" and its
// type (a *rsa.PrivateKey printed as it is shows its private exponent),
// and certificates as their subject and fingerprint.
func (o OpenOptions) Format(f fmt.State, verb rune) { redact.Format(f, verb, o.view()) }

// MarshalJSON encodes o as [OpenOptions.Format] prints it: the key redacted.
func (o OpenOptions) MarshalJSON() ([]byte, error) { return json.Marshal(o.view()) }

// LogValue logs o as [OpenOptions.Format] prints it: the key redacted.
func (o OpenOptions) LogValue() slog.Value { return slog.AnyValue(o.view()) }
