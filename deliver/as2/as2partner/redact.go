package as2partner

import (
	"encoding/json"
	"fmt"
	"log/slog"

	"github.com/floodgate-go/floodgate/internal/redact"
)

// configView is what every printed form of a [Config] shows: Key is
// "REDACTED" with its type, certificates are their subject and SHA-256
// fingerprint prefix.
type configView struct {
	Script           []Phase `json:",omitempty"`
	AS2ID            string  `json:",omitempty"`
	MaxBodySize      int64   `json:",omitempty"`
	Cert             string  `json:",omitempty"`
	Key              string  `json:",omitempty"`
	SenderCert       string  `json:",omitempty"`
	RequireSigned    bool    `json:",omitempty"`
	RequireEncrypted bool    `json:",omitempty"`
}

func (c Config) view() configView {
	v := configView{Script: c.Script, AS2ID: c.AS2ID, MaxBodySize: c.MaxBodySize, Cert: redact.Cert(c.Cert),
		SenderCert: redact.Cert(c.SenderCert), RequireSigned: c.RequireSigned, RequireEncrypted: c.RequireEncrypted}
	if c.Key != nil {
		v.Key = redact.Key(c.Key)
	}
	return v
}

// Format prints c with any verb (%v, %+v, %#v, %s, %q, %x, ...) with Key
// replaced by "REDACTED" and its type, and certificates as their subject and
// fingerprint. Clock is not printed.
func (c Config) Format(f fmt.State, verb rune) { redact.Format(f, verb, c.view()) }

// MarshalJSON encodes c as [Config.Format] prints it: the key redacted.
func (c Config) MarshalJSON() ([]byte, error) { return json.Marshal(c.view()) }

// LogValue logs c as [Config.Format] prints it: the key redacted.
func (c Config) LogValue() slog.Value { return slog.AnyValue(c.view()) }

// Format prints the partner as its [Config] (redacted), so printing a
// *Partner never shows its key.
func (p *Partner) Format(f fmt.State, verb rune) {
	redact.Format(f, verb, struct{ Partner configView }{p.cfg.view()})
}
