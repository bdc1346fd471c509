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
