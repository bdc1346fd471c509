package main

import (
	"bytes"
	"errors"
	"flag"
	"strings"
	"testing"
)

// TestInboxPrefixFlag: the example takes -inbox-prefix (a service's
// permissions.InboxPrefix, for a user with generated permissions), shows
// it in -h, and hands it to its NATS connection options.
func TestInboxPrefixFlag(t *testing.T) {
	var help bytes.Buffer
	if _, err := parseFlags([]string{"-h"}, &help); !errors.Is(err, flag.ErrHelp) || !strings.Contains(help.String(), "-inbox-prefix") {
		t.Errorf("-h: %v, no -inbox-prefix in:\n%s", err, help.String())
	}
	o, err := parseFlags([]string{"-inbox-prefix", "_INBOX_floodgate.example"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if o.nats.InboxPrefix != "_INBOX_floodgate.example" {
		t.Errorf("inbox prefix %q, want _INBOX_floodgate.example", o.nats.InboxPrefix)
	}
}
