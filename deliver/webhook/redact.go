package webhook

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/floodgate-go/floodgate/internal/redact"
)

// configView is what every printed form of a [Config] shows: the secret,
// the extra header values and the URL's user information and query values
// are "REDACTED".
type configView struct {
	URL         string
	BodyFormat  string
	ContentType string `json:",omitempty"`
	Secret      string `json:",omitempty"`
	Scheme      string
	Timeout     time.Duration     `json:",omitempty"`
	Header      map[string]string `json:",omitempty"`
}

func (c Config) view() configView {
	return configView{URL: redact.HTTPURL(c.URL), BodyFormat: c.BodyFormat.String(), ContentType: c.ContentType,
		Secret: redact.Bytes(c.Secret), Scheme: c.Scheme.String(), Timeout: c.Timeout, Header: redact.Header(c.Header)}
}

// Format prints c with any verb (%v, %+v, %#v, %s, %q, %x, ...) with
// Secret, the values of Header, and the user information and query values
// of URL replaced by "REDACTED". HTTPClient and Now are not printed.
func (c Config) Format(f fmt.State, verb rune) { redact.Format(f, verb, c.view()) }

// MarshalJSON encodes c as [Config.Format] prints it: secrets redacted.
func (c Config) MarshalJSON() ([]byte, error) { return json.Marshal(c.view()) }

// LogValue logs c as [Config.Format] prints it: secrets redacted.
func (c Config) LogValue() slog.Value { return slog.AnyValue(c.view()) }

// verifierView is what every printed form of a [VerifierConfig] shows.
type verifierView struct {
	Secret    string `json:",omitempty"`
	Scheme    string
	Tolerance time.Duration `json:",omitempty"`
	MaxSeen   int           `json:",omitempty"`
}

func (c VerifierConfig) view() verifierView {
	return verifierView{Secret: redact.Bytes(c.Secret), Scheme: c.Scheme.String(), Tolerance: c.Tolerance, MaxSeen: c.MaxSeen}
}

// Format prints c with any verb, Secret replaced by "REDACTED". Now is not
// printed.
func (c VerifierConfig) Format(f fmt.State, verb rune) { redact.Format(f, verb, c.view()) }

// MarshalJSON encodes c as [VerifierConfig.Format] prints it.
func (c VerifierConfig) MarshalJSON() ([]byte, error) { return json.Marshal(c.view()) }

// LogValue logs c as [VerifierConfig.Format] prints it.
func (c VerifierConfig) LogValue() slog.Value { return slog.AnyValue(c.view()) }

// Format prints the sender as its [Config] (redacted), so printing a
// *Sender never shows the secret.
func (s *Sender) Format(f fmt.State, verb rune) {
	redact.Format(f, verb, struct{ Sender configView }{s.cfg.view()})
}

// Format prints the verifier as its [VerifierConfig] (redacted).
func (v *Verifier) Format(f fmt.State, verb rune) {
	redact.Format(f, verb, struct{ Verifier verifierView }{v.cfg.view()})
}
