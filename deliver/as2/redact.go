package as2

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/floodgate-go/floodgate/internal/redact"
)

// configView is what every printed form of a [Config] shows: the signing
// key is "REDACTED" with its type, certificates are their subject and
// SHA-256 fingerprint prefix, and the URL's user information and query
// values are "REDACTED".
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
}

func (c Config) view() configView {
	v := configView{URL: redact.HTTPURL(c.URL), From: c.From, To: c.To, Subject: c.Subject, ContentType: c.ContentType,
		MDNTo: c.MDNTo, Timeout: c.Timeout, MessageIDDomain: c.MessageIDDomain, MaxMDNSize: c.MaxMDNSize,
		SigningCert: redact.Cert(c.SigningCert), SignAlgorithm: c.SignAlgorithm,
		EncryptionCert: redact.Cert(c.EncryptionCert), EncryptAlgorithm: c.EncryptAlgorithm, MDNCert: redact.Cert(c.MDNCert)}
	if c.SigningKey != nil {
		v.SigningKey = redact.Key(c.SigningKey)
	}
	return v
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
