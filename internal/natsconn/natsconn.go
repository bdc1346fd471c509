package natsconn

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/floodgate-go/floodgate/internal/redact"

	"github.com/nats-io/jsm.go/natscontext"
	"github.com/nats-io/nats.go"
)

// Environment variables read for options not given as flags, as the nats
// CLI reads them.
const (
	EnvURL      = "NATS_URL"
	EnvContext  = "NATS_CONTEXT"
	EnvCreds    = "NATS_CREDS"
	EnvNKey     = "NATS_NKEY"
	EnvUser     = "NATS_USER"
	EnvPassword = "NATS_PASSWORD"
	EnvCert     = "NATS_CERT"
	EnvKey      = "NATS_KEY"
	EnvCA       = "NATS_CA"
)

// ErrConnect wraps every failure of [Options.Connect] and
// [Options.Resolve]: a context that does not load, a bad option, or a
// server that refused or could not be reached.
var ErrConnect = errors.New("natsconn: connect")

// Options are the connection settings. The zero value connects as the nats
// CLI does with no flags: to $NATS_URL, else the selected context, else
// nats://127.0.0.1:4222. Options is a plain value, safe to copy.
type Options struct {
	// Server is one URL or a comma-separated list (--server, -s, and the
	// older --nats-url). Default: $NATS_URL, else the context's URL.
	Server string
	// Context is a context name, or the path of a context .json file.
	// Default: $NATS_CONTEXT, else the selected context, if any.
	Context string
	// Creds is a credentials (.creds) file. Default: $NATS_CREDS.
	Creds string
	// NKey is an nkey seed file. Default: $NATS_NKEY.
	NKey string
	// User and Password authenticate by user name. Default: $NATS_USER,
	// $NATS_PASSWORD.
	User, Password string
	// Token authenticates with a token.
	Token string
	// TLSCert and TLSKey are a client certificate and its key (PEM files),
	// TLSCA the CA certificate that verifies the server. Default:
	// $NATS_CERT, $NATS_KEY, $NATS_CA.
	TLSCert, TLSKey, TLSCA string
	// Timeout bounds connecting. Default 5s.
	Timeout time.Duration
	// InboxPrefix replaces "_INBOX" as the prefix of the connection's
	// reply subjects (--inbox-prefix of the nats CLI), so a user whose
	// permissions allow only its own prefix gets its replies
	// (permissions.InboxPrefix of a service). Default: the context's,
	// else "_INBOX".
	InboxPrefix string
}

// Register adds the connection flags to fs: -server (and its aliases -s
// and -nats-url), -context, -creds, -nkey, -user, -password, -token,
// -tlscert, -tlskey, -tlsca, -inbox-prefix. Go's flag package accepts one or two dashes.
// The help text names the environment variables and never shows their
// values.
func (o *Options) Register(fs *flag.FlagSet) {
	fs.StringVar(&o.Server, "server", "", "NATS server `URL`s, comma-separated (env "+EnvURL+"; default: the context's, else "+nats.DefaultURL+")")
	fs.Var(fs.Lookup("server").Value, "s", "the same as -server `URL`")
	fs.Var(fs.Lookup("server").Value, "nats-url", "the same as -server `URL` (kept for old scripts)")
	fs.StringVar(&o.Context, "context", "", "nats CLI context `name` or .json file (env "+EnvContext+"; default: the selected context)")
	fs.StringVar(&o.Creds, "creds", "", "user credentials `file` (env "+EnvCreds+")")
	fs.StringVar(&o.NKey, "nkey", "", "user nkey seed `file` (env "+EnvNKey+")")
	fs.StringVar(&o.User, "user", "", "user `name` (env "+EnvUser+")")
	fs.StringVar(&o.Password, "password", "", "`password` of -user (env "+EnvPassword+")")
	fs.StringVar(&o.Token, "token", "", "authentication `token`")
	fs.StringVar(&o.TLSCert, "tlscert", "", "TLS client certificate `file` (env "+EnvCert+")")
	fs.StringVar(&o.TLSKey, "tlskey", "", "TLS client key `file` (env "+EnvKey+")")
	fs.StringVar(&o.TLSCA, "tlsca", "", "TLS CA certificate `file` that verifies the server (env "+EnvCA+")")
	fs.StringVar(&o.InboxPrefix, "inbox-prefix", "", "`prefix` of reply subjects (default: the context's, else _INBOX)")
}

// withEnv fills the fields not given from the environment.
func (o Options) withEnv() Options {
	for _, f := range []struct {
		v   *string
		env string
	}{{&o.Server, EnvURL}, {&o.Context, EnvContext}, {&o.Creds, EnvCreds}, {&o.NKey, EnvNKey},
		{&o.User, EnvUser}, {&o.Password, EnvPassword}, {&o.TLSCert, EnvCert}, {&o.TLSKey, EnvKey}, {&o.TLSCA, EnvCA}} {
		if *f.v == "" {
			*f.v = os.Getenv(f.env)
		}
	}
	return o
}

// Explicit reports whether a server was named: -server or $NATS_URL, or a
// context by -context or $NATS_CONTEXT. The examples use it to choose
// between an external server and an embedded one (they never fall back to
// the selected context).
func (o Options) Explicit() bool {
	o = o.withEnv()
	return o.Server != "" || o.Context != ""
}

// Resolve loads the context (named, or the selected one) and applies the
// options given on top of it. It returns the server URL(s) and the
// nats.Options that authenticate and set up TLS, or an error wrapping
// [ErrConnect].
func (o Options) Resolve() (string, []nats.Option, error) {
	o = o.withEnv()
	over := []natscontext.Option{
		natscontext.WithServerURL(o.Server),
		natscontext.WithCreds(o.Creds),
		natscontext.WithNKey(o.NKey),
		natscontext.WithUser(o.User),
		natscontext.WithPassword(o.Password),
		natscontext.WithToken(o.Token),
		natscontext.WithCertificate(o.TLSCert),
		natscontext.WithKey(o.TLSKey),
		natscontext.WithCA(o.TLSCA),
		natscontext.WithInboxPrefix(o.InboxPrefix),
	}
	var (
		c   *natscontext.Context
		err error
	)
	if strings.HasSuffix(o.Context, ".json") {
		c, err = natscontext.NewFromFile(o.Context, over...)
	} else {
		c, err = natscontext.New(o.Context, true, over...)
	}
	if err != nil {
		what := "the selected context"
		if o.Context != "" {
			what = fmt.Sprintf("context %q", o.Context)
		}
		return "", nil, fmt.Errorf("%w: load %s: %w", ErrConnect, what, err)
	}
	if (c.Certificate() == "") != (c.Key() == "") {
		return "", nil, fmt.Errorf("%w: -tlscert and -tlskey go together (from flags, environment or context): give both or neither", ErrConnect)
	}
	if c.Password() != "" && c.User() == "" {
		return "", nil, fmt.Errorf("%w: -password needs -user (from flags, environment or context)", ErrConnect)
	}
	opts, err := c.NATSOptions()
	if err != nil {
		return "", nil, fmt.Errorf("%w: context %q: %w", ErrConnect, c.Name, err)
	}
	return c.ServerURL(), opts, nil
}

// Connect resolves the options ([Options.Resolve]) and connects, naming
// the connection name; extra options go after those of the context. The
// error wraps [ErrConnect], names the server redacted ([Redact]) and, for
// an authorization failure, the flags that authenticate.
func (o Options) Connect(name string, extra ...nats.Option) (*nats.Conn, error) {
	u, opts, err := o.Resolve()
	if err != nil {
		return nil, err
	}
	timeout := o.Timeout
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	opts = append(opts, nats.Name(name), nats.Timeout(timeout))
	nc, err := nats.Connect(u, append(opts, extra...)...)
	if err != nil {
		hint := ""
		if errors.Is(err, nats.ErrAuthorization) || errors.Is(err, nats.ErrAuthExpired) || errors.Is(err, nats.ErrAuthRevoked) {
			hint = " (check -user/-password, -token, -creds, -nkey or the context)"
		}
		return nil, fmt.Errorf("%w to %s: %w%s", ErrConnect, Redact(u), redact.Error(err, u), hint)
	}
	return nc, nil
}

// Redact returns urls (one URL or a comma-separated list, with or without
// a scheme) with the user information of each replaced by "REDACTED", so a
// user, password or token in a URL is never printed.
func Redact(urls string) string { return redact.URL(urls) }
