package natsconn

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/floodgate-go/floodgate/internal/redact"
)

// optionsView is what every printed form of [Options] shows: Password and
// Token are "REDACTED", the user information of Server too ([Redact]).
// Creds, NKey and the TLS fields are file paths and are shown.
type optionsView struct {
	Server, Context        string        `json:",omitempty"`
	Creds, NKey            string        `json:",omitempty"`
	User, Password, Token  string        `json:",omitempty"`
	TLSCert, TLSKey, TLSCA string        `json:",omitempty"`
	Timeout                time.Duration `json:",omitempty"`
}

func (o Options) view() optionsView {
	return optionsView{Server: Redact(o.Server), Context: o.Context, Creds: o.Creds, NKey: o.NKey, User: o.User,
		Password: redact.String(o.Password), Token: redact.String(o.Token),
		TLSCert: o.TLSCert, TLSKey: o.TLSKey, TLSCA: o.TLSCA, Timeout: o.Timeout}
}

// Format prints o with any verb (%v, %+v, %#v, %s, %q, %x, ...) with
// Password, Token and the user information of Server replaced by
// "REDACTED".
func (o Options) Format(f fmt.State, verb rune) { redact.Format(f, verb, o.view()) }

// MarshalJSON encodes o as [Options.Format] prints it: secrets redacted.
func (o Options) MarshalJSON() ([]byte, error) { return json.Marshal(o.view()) }

// LogValue logs o as [Options.Format] prints it: secrets redacted.
func (o Options) LogValue() slog.Value { return slog.AnyValue(o.view()) }
