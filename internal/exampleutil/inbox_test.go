package exampleutil_test

import (
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/floodgate-go/floodgate/internal/exampleutil"
	"github.com/floodgate-go/floodgate/internal/natsconn"
	"github.com/floodgate-go/floodgate/internal/natstest"
)

// TestStartNATSInboxPrefix: -inbox-prefix reaches the examples' own
// connection and the options their subscribers connect with, on an
// external server and on the embedded one.
func TestStartNATSInboxPrefix(t *testing.T) {
	t.Setenv(natsconn.EnvContext, "")
	const prefix = "_INBOX_floodgate.example"
	for name, o := range map[string]natsconn.Options{
		"external": {Server: natstest.URL(t), InboxPrefix: prefix},
		"embedded": {InboxPrefix: prefix},
	} {
		n, err := exampleutil.StartNATS(o)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got := n.Conn.Opts.InboxPrefix; got != prefix {
			t.Errorf("%s: connection inbox prefix %q, want %q", name, got, prefix)
		}
		var no nats.Options
		for _, opt := range n.ConnectOptions {
			if err := opt(&no); err != nil {
				t.Fatal(err)
			}
		}
		if no.InboxPrefix != prefix {
			t.Errorf("%s: ConnectOptions inbox prefix %q, want %q", name, no.InboxPrefix, prefix)
		}
		n.Close()
	}
}
