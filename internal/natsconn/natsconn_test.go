package natsconn_test

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/internal/natsconn"
	"github.com/floodgate-go/floodgate/internal/natsserver"
)

// isolate points the context store at an empty temporary folder and
// clears the NATS_* variables, so no context or variable of the machine
// running the tests is used.
func isolate(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", dir)
	for _, k := range []string{natsconn.EnvURL, natsconn.EnvContext, natsconn.EnvCreds, natsconn.EnvNKey,
		natsconn.EnvUser, natsconn.EnvPassword, natsconn.EnvCert, natsconn.EnvKey, natsconn.EnvCA} {
		t.Setenv(k, "")
	}
	return dir
}

func start(t *testing.T, o natsserver.Options) *natsserver.Server {
	t.Helper()
	s, err := natsserver.Start(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Shutdown)
	return s
}

func TestUserPassword(t *testing.T) {
	isolate(t)
	s := start(t, natsserver.Options{User: "ops", Password: "s3cret-pw"})
	nc, err := natsconn.Options{Server: s.ClientURL(), User: "ops", Password: "s3cret-pw"}.Connect("test")
	if err != nil {
		t.Fatalf("connect with the right password: %v", err)
	}
	nc.Close()

	_, err = natsconn.Options{Server: s.ClientURL(), User: "ops", Password: "wrong-pw"}.Connect("test")
	if !errors.Is(err, natsconn.ErrConnect) {
		t.Fatalf("wrong password: got %v, want an error wrapping ErrConnect", err)
	}
	msg := err.Error()
	if !strings.Contains(strings.ToLower(msg), "authorization") || !strings.Contains(msg, "-user/-password") {
		t.Errorf("wrong password: error %q does not say authorization failed and name the flags", msg)
	}
	if strings.Contains(msg, "wrong-pw") {
		t.Errorf("error %q shows the password", msg)
	}
}

func TestPasswordInURLIsRedacted(t *testing.T) {
	isolate(t)
	s := start(t, natsserver.Options{User: "ops", Password: "s3cret-pw"})
	u := strings.Replace(s.ClientURL(), "nats://", "nats://ops:wrong-pw@", 1)
	_, err := natsconn.Options{Server: u}.Connect("test")
	if err == nil {
		t.Fatal("wrong password in the URL: connected")
	}
	if strings.Contains(err.Error(), "wrong-pw") || !strings.Contains(err.Error(), "REDACTED@127.0.0.1") {
		t.Errorf("error %q: want the URL with its user information redacted", err)
	}
}

// A URL that does not parse is quoted by the connection error; its
// credentials are not.
func TestUnparsableURLIsRedacted(t *testing.T) {
	isolate(t)
	_, err := natsconn.Options{Server: "nats://alice:s3cret@127.0.0.1:abc"}.Connect("test")
	if err == nil {
		t.Fatal("connected to a URL with a bad port")
	}
	if strings.Contains(err.Error(), "s3cret") || strings.Contains(err.Error(), "alice") {
		t.Errorf("error %q shows the credentials", err)
	}
}

// The connection error of a URL whose password holds a list separator or
// a bad escape, or whose query holds a token, shows none of it: nats.go
// splits the list on commas and quotes the pieces it cannot parse.
func TestOddCredentialsAreRedacted(t *testing.T) {
	isolate(t)
	for _, c := range []struct{ url, secret string }{
		{"nats://u:canA,ryPW@127.0.0.1:1", "canA"},
		{"nats://u:canA,ryPW@127.0.0.1:1", "ryPW"},
		{"nats://u:canary%zz@127.0.0.1:1", "%zz"},
		{"nats://127.0.0.1:1?token=s3cretTok", "s3cretTok"},
	} {
		_, err := natsconn.Options{Server: c.url, Timeout: time.Second}.Connect("test")
		if err == nil {
			t.Fatalf("%s: connected", c.url)
		}
		if strings.Contains(err.Error(), c.secret) {
			t.Errorf("%s: error %q shows %q", c.url, err, c.secret)
		}
	}
}

func TestToken(t *testing.T) {
	isolate(t)
	s := start(t, natsserver.Options{Token: "tok-123"})
	nc, err := natsconn.Options{Server: s.ClientURL(), Token: "tok-123"}.Connect("test")
	if err != nil {
		t.Fatalf("connect with the token: %v", err)
	}
	nc.Close()
	if _, err := (natsconn.Options{Server: s.ClientURL(), Token: "tok-999"}).Connect("test"); err == nil || strings.Contains(err.Error(), "tok-999") {
		t.Fatalf("wrong token: got %v, want an authorization error without the token", err)
	}
	if _, err := (natsconn.Options{Server: s.ClientURL()}).Connect("test"); err == nil {
		t.Fatal("no token: connected to a server that requires one")
	}
}

// writeContext writes a nats CLI context file under dir's nats/context.
func writeContext(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, "nats", "context", name+".json")
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestContext(t *testing.T) {
	dir := isolate(t)
	s := start(t, natsserver.Options{User: "ops", Password: "ctx-pw"})
	path := writeContext(t, dir, "prod", `{"url":"`+s.ClientURL()+`","user":"ops","password":"ctx-pw"}`)
	writeContext(t, dir, "bad", `{"url":"`+s.ClientURL()+`","user":"ops","password":"nope"}`)

	for _, tc := range []struct {
		name string
		o    natsconn.Options
		env  string
	}{
		{"by name", natsconn.Options{Context: "prod"}, ""},
		{"by file", natsconn.Options{Context: path}, ""},
		{"by NATS_CONTEXT", natsconn.Options{}, "prod"},
		{"flags override the context", natsconn.Options{Context: "bad", Password: "ctx-pw"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(natsconn.EnvContext, tc.env)
			nc, err := tc.o.Connect("test")
			if err != nil {
				t.Fatalf("connect: %v", err)
			}
			nc.Close()
		})
	}

	if _, err := (natsconn.Options{Context: "bad"}).Connect("test"); err == nil || strings.Contains(err.Error(), "nope") {
		t.Fatalf("context with a wrong password: got %v, want an authorization error without the password", err)
	}
	_, err := natsconn.Options{Context: "missing"}.Connect("test")
	if !errors.Is(err, natsconn.ErrConnect) || !strings.Contains(err.Error(), `context "missing"`) {
		t.Fatalf("missing context: got %v, want an error naming it", err)
	}
}

func TestSelectedContext(t *testing.T) {
	dir := isolate(t)
	s := start(t, natsserver.Options{Token: "sel-tok"})
	writeContext(t, dir, "picked", `{"url":"`+s.ClientURL()+`","token":"sel-tok"}`)
	if err := os.WriteFile(filepath.Join(dir, "nats", "context.txt"), []byte("picked"), 0o600); err != nil {
		t.Fatal(err)
	}
	nc, err := natsconn.Options{}.Connect("test")
	if err != nil {
		t.Fatalf("connect with the selected context: %v", err)
	}
	nc.Close()
	if (natsconn.Options{}).Explicit() {
		t.Error("Explicit() with only a selected context: want false (the examples then run their own server)")
	}
}

func TestEnvURL(t *testing.T) {
	isolate(t)
	s := start(t, natsserver.Options{})
	t.Setenv(natsconn.EnvURL, s.ClientURL())
	if !(natsconn.Options{}).Explicit() {
		t.Error("Explicit() with NATS_URL set: want true")
	}
	nc, err := natsconn.Options{}.Connect("test")
	if err != nil {
		t.Fatalf("connect to NATS_URL: %v", err)
	}
	nc.Close()
}

func TestFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-s", "nats://h:1"}, {"--server", "nats://h:1"}, {"-nats-url", "nats://h:1"}, {"--nats-url=nats://h:1"},
	} {
		var o natsconn.Options
		fs := flag.NewFlagSet("x", flag.ContinueOnError)
		o.Register(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		if o.Server != "nats://h:1" {
			t.Errorf("%v: Server = %q", args, o.Server)
		}
	}
	var o natsconn.Options
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	o.Register(fs)
	if err := fs.Parse([]string{"--user", "u", "--password", "p", "--token", "t", "--creds", "c", "--nkey", "n", "--tlscert", "a", "--tlskey", "b", "--tlsca", "d", "--context", "e"}); err != nil {
		t.Fatal(err)
	}
	want := natsconn.Options{User: "u", Password: "p", Token: "t", Creds: "c", NKey: "n", TLSCert: "a", TLSKey: "b", TLSCA: "d", Context: "e"}
	if o != want {
		t.Errorf("parsed %+v, want %+v", o, want)
	}
}

func TestHelpShowsNoSecret(t *testing.T) {
	isolate(t)
	t.Setenv(natsconn.EnvURL, "nats://ops:env-secret@h:4222")
	t.Setenv(natsconn.EnvPassword, "env-secret")
	var o natsconn.Options
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	var b strings.Builder
	fs.SetOutput(&b)
	o.Register(fs)
	fs.PrintDefaults()
	if strings.Contains(b.String(), "env-secret") {
		t.Errorf("help shows a secret:\n%s", b.String())
	}
}

func TestCheck(t *testing.T) {
	isolate(t)
	for _, o := range []natsconn.Options{{TLSCert: "c"}, {TLSKey: "k"}, {Password: "p"}} {
		if _, err := o.Connect("test"); !errors.Is(err, natsconn.ErrConnect) {
			t.Errorf("%+v: got %v, want an error wrapping ErrConnect", o, err)
		}
	}
}

func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		"nats://127.0.0.1:4222":            "nats://127.0.0.1:4222",
		"nats://u:p@h:4222":                "nats://REDACTED@h:4222",
		"nats://tok@h:4222, tls://a:b@g:1": "nats://REDACTED@h:4222,tls://REDACTED@g:1",
		"nats://u:p%zz@h:4222":             "nats://REDACTED@h:4222",
		"u:p@h:4222":                       "REDACTED@h:4222",
	} {
		if got := natsconn.Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
}
