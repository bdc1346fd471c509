package redact

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
)

func TestURL(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"nats://127.0.0.1:4222", "nats://127.0.0.1:4222"},
		{"nats://alice:s3cret@127.0.0.1:4222", "nats://REDACTED@127.0.0.1:4222"},
		{"alice:s3cret@host:4222", "REDACTED@host:4222"},
		{"tls://tok@a:4222, nats://b:4222", "tls://REDACTED@a:4222,nats://b:4222"},
		{"nats://al@ice:p@ss@h:1", "nats://REDACTED@h:1"},
		{"nats://alice:s3cret@127.0.0.1:abc", "nats://REDACTED@127.0.0.1:abc"},
	} {
		if got := URL(c.in); got != c.want {
			t.Errorf("URL(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestError(t *testing.T) {
	raw := "nats://alice:s3cret@127.0.0.1:abc"
	_, perr := url.Parse(raw)
	if perr == nil || !strings.Contains(perr.Error(), "s3cret") {
		t.Fatalf("precondition: the parse error quotes the URL: %v", perr)
	}
	err := Error(fmt.Errorf("connect: %w", perr), raw)
	if strings.Contains(err.Error(), "s3cret") || strings.Contains(err.Error(), "alice") {
		t.Fatalf("error still holds the credentials: %v", err)
	}
	var ue *url.Error
	if !errors.As(err, &ue) {
		t.Fatalf("errors.As lost the url.Error: %v", err)
	}
	plain := errors.New("no servers available")
	if Error(plain, raw) != plain || Error(nil, raw) != nil {
		t.Fatal("an error without credentials must be returned as is")
	}
}

// A password holding a list separator, a bad escape or a query token is
// never printed, in part or whole, by URL or in an error quoting pieces of
// it (nats.go splits the server list on commas before parsing).
func TestCredentialsWithSeparatorsAndEscapes(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"nats://u:canA,ryPW@127.0.0.1:1", "nats://REDACTED@127.0.0.1:1"},
		{"nats://u:a,b@h1:1,nats://c:d@h2:2", "nats://REDACTED@h1:1,nats://REDACTED@h2:2"},
		{"h0:1, nats://u:p@h1:1", "h0:1,nats://REDACTED@h1:1"},
		{"nats://h:4222?token=s3cret", "nats://h:4222?REDACTED"},
		{"nats://u:canary%zz@h:1", "nats://REDACTED@h:1"},
		{"nats://h1:1,h2:2", "nats://h1:1,h2:2"},
		{"nats://u:p4ss@h:1?x=http://y", "nats://REDACTED@h:1?REDACTED"},
		{"nats://u:a://bcd@h:1", "nats://REDACTED@h:1"},
		{"nats://u:canA,ryPW@h:1?x=http://y,tls://t@h2:2", "nats://REDACTED@h:1?REDACTED,tls://REDACTED@h2:2"},
	} {
		if got := URL(c.in); got != c.want {
			t.Errorf("URL(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	for _, c := range []struct{ urls, parse, secret string }{
		{"nats://u:canA,ryPW@127.0.0.1:1", "nats://u:canA", "canA"},
		{"nats://u:canA,ryPW@127.0.0.1:1", "ryPW@127.0.0.1:1", "ryPW"},
		{"nats://u:canary%zz@h:1", "nats://u:canary%zz@h:1", "%zz"},
		{"nats://h:1?token=s3cret", "nats://h:1?token=s3cret", "s3cret"},
	} {
		_, perr := url.Parse(c.parse)
		if perr == nil {
			perr = fmt.Errorf("connect to %q: refused", c.parse)
		}
		if !strings.Contains(perr.Error(), c.secret) {
			t.Fatalf("precondition: %v quotes %q", perr, c.secret)
		}
		if got := Error(perr, c.urls).Error(); strings.Contains(got, c.secret) {
			t.Errorf("Error(%v, %q) = %q: holds %q", perr, c.urls, got, c.secret)
		}
	}
}

// A user name is left where it appears outside its URL: it is often a
// word of the error ("nats: no servers available").
func TestErrorKeepsUserNameWords(t *testing.T) {
	err := Error(errors.New("nats: no servers available for connection to nats://nats:s3cretpw@h:1"), "nats://nats:s3cretpw@h:1")
	if got, want := err.Error(), "nats: no servers available for connection to nats://REDACTED@h:1"; got != want {
		t.Errorf("Error = %q, want %q", got, want)
	}
}
