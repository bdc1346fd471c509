package webhooktest

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/floodgate-go/floodgate/internal/redact"
)

// configView is what every printed form of a [Config] shows: the secret
// "REDACTED". Clock is not printed.
type configView struct {
	Secret      string `json:",omitempty"`
	Scheme      string
	Tolerance   time.Duration `json:",omitempty"`
	Script      []Phase
	MaxBodySize int64 `json:",omitempty"`
}

func (c Config) view() configView {
	return configView{Secret: redact.Bytes(c.Secret), Scheme: c.Scheme.String(), Tolerance: c.Tolerance,
		Script: c.Script, MaxBodySize: c.MaxBodySize}
}

// Format prints c with any verb, Secret replaced by "REDACTED".
func (c Config) Format(f fmt.State, verb rune) { redact.Format(f, verb, c.view()) }

// MarshalJSON encodes c as [Config.Format] prints it: the secret redacted.
func (c Config) MarshalJSON() ([]byte, error) { return json.Marshal(c.view()) }

// LogValue logs c as [Config.Format] prints it: the secret redacted.
func (c Config) LogValue() slog.Value { return slog.AnyValue(c.view()) }

// Format prints the consumer as its [Config] (redacted), so printing a
// *Consumer never shows the secret.
func (c *Consumer) Format(f fmt.State, verb rune) {
	redact.Format(f, verb, struct{ Consumer configView }{c.cfg.view()})
}
