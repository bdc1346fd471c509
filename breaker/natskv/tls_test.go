package natskv_test

import (
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/floodgate-go/floodgate/breaker/natskv"
	"github.com/floodgate-go/floodgate/internal/natsserver"
	"github.com/floodgate-go/floodgate/internal/natstest"
	"github.com/floodgate-go/floodgate/internal/tlstest"
)

// TestTLS: the fleet store works on a JetStream whose connection uses TLS
// with a private CA and a client certificate; the store takes the
// connection as it is, so TLS is the connection's business.
func TestTLS(t *testing.T) {
	pki := tlstest.New(t, "natskv-ca")
	srv, err := natsserver.Start(natsserver.Options{TLS: pki.ServerConfig(true)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	nc, err := nats.Connect(srv.ClientURL(), nats.Secure(pki.ClientConfig(true)))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := natskv.New(t.Context(), js, natskv.Config{Bucket: natstest.Name(t, "kv")}); err != nil {
		t.Fatalf("fleet store over TLS: %v", err)
	}
}
