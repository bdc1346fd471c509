package natsconn_test

import (
	"strings"
	"testing"

	"github.com/floodgate-go/floodgate/internal/natsconn"
	"github.com/floodgate-go/floodgate/internal/natsserver"
	"github.com/floodgate-go/floodgate/internal/tlstest"
)

// TestTLSPrivateCAAndClientCert connects to a server that requires TLS and
// a client certificate, both from a CA made in the test: with -tlsca,
// -tlscert and -tlskey (and from $NATS_CA, $NATS_CERT, $NATS_KEY) it
// connects; without the CA or without the client certificate it fails.
func TestTLSPrivateCAAndClientCert(t *testing.T) {
	isolate(t)
	pki := tlstest.New(t, "natsconn-ca")
	s := start(t, natsserver.Options{TLS: pki.ServerConfig(true)})
	f := pki.Files

	nc, err := natsconn.Options{Server: s.ClientURL(), TLSCA: f.CA, TLSCert: f.ClientCert, TLSKey: f.ClientKey}.Connect("tls")
	if err != nil {
		t.Fatalf("with CA and client certificate: %v", err)
	}
	if !nc.TLSRequired() {
		t.Error("connection is not TLS")
	}
	if _, err := nc.TLSConnectionState(); err != nil {
		t.Errorf("TLS state: %v", err)
	}
	nc.Close()

	t.Setenv(natsconn.EnvCA, f.CA)
	t.Setenv(natsconn.EnvCert, f.ClientCert)
	t.Setenv(natsconn.EnvKey, f.ClientKey)
	nc, err = natsconn.Options{Server: s.ClientURL()}.Connect("tls-env")
	if err != nil {
		t.Fatalf("from the environment: %v", err)
	}
	nc.Close()
	isolate(t)

	for name, o := range map[string]natsconn.Options{
		"no CA":          {Server: s.ClientURL(), TLSCert: f.ClientCert, TLSKey: f.ClientKey},
		"no client cert": {Server: s.ClientURL(), TLSCA: f.CA},
	} {
		nc, err := o.Connect("tls-bad")
		if err == nil {
			nc.Close()
			t.Errorf("%s: connected", name)
			continue
		}
		if !strings.Contains(err.Error(), "natsconn: connect") {
			t.Errorf("%s: error %q does not wrap ErrConnect", name, err)
		}
	}
}
