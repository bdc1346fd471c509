package natsconn_test

import (
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/floodgate-go/floodgate/internal/natsconn"
)

// TestInboxPrefix: Options.InboxPrefix becomes the connection's inbox
// prefix, so replies arrive where a service's permissions allow.
func TestInboxPrefix(t *testing.T) {
	t.Setenv(natsconn.EnvContext, "")
	_, opts, err := natsconn.Options{Server: "nats://127.0.0.1:1", InboxPrefix: "_INBOX_floodgate.svc"}.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	var no nats.Options
	for _, o := range opts {
		if err := o(&no); err != nil {
			t.Fatal(err)
		}
	}
	if no.InboxPrefix != "_INBOX_floodgate.svc" {
		t.Errorf("inbox prefix %q, want _INBOX_floodgate.svc", no.InboxPrefix)
	}
}
