package exampleutil_test

import (
	"testing"

	"github.com/floodgate-go/floodgate/internal/exampleutil"
	"github.com/floodgate-go/floodgate/internal/natsconn"
	"github.com/floodgate-go/floodgate/internal/natsserver"
	"github.com/floodgate-go/floodgate/internal/tlstest"
	"github.com/floodgate-go/floodgate/jsq"
)

// TestStartNATSOverTLS: the examples' StartNATS, given -server, -tlsca,
// -tlscert and -tlskey, connects to a server requiring TLS and a client
// certificate of a private CA, and its ConnectOptions carry the TLS setup
// to the connections the examples open themselves (their subscriber).
func TestStartNATSOverTLS(t *testing.T) {
	pki := tlstest.New(t, "example-nats-ca")
	srv, err := natsserver.Start(natsserver.Options{TLS: pki.ServerConfig(true)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	f := pki.Files
	n, err := exampleutil.StartNATS(natsconn.Options{Server: srv.ClientURL(), TLSCA: f.CA, TLSCert: f.ClientCert, TLSKey: f.ClientKey})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if !n.Conn.TLSRequired() {
		t.Error("example connection is not TLS")
	}
	sub, err := jsq.NewSubscriber(jsq.SubscriberConfig{URL: n.URL, ConnectOptions: n.ConnectOptions})
	if err != nil {
		t.Fatalf("subscriber with the example's ConnectOptions: %v", err)
	}
	sub.Close()
}
