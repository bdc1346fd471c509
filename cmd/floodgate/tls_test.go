package main

import (
	"strings"
	"testing"

	"github.com/floodgate-go/floodgate/internal/natsserver"
	"github.com/floodgate-go/floodgate/internal/natstest"
	"github.com/floodgate-go/floodgate/internal/tlstest"
)

// TestTLSServer: every command that connects reaches a server requiring
// TLS and a client certificate from a private CA made in the test, with
// -tlsca, -tlscert and -tlskey; without the client certificate it exits 1
// with a TLS error.
func TestTLSServer(t *testing.T) {
	pki := tlstest.New(t, "cli-ca")
	srv, err := natsserver.Start(natsserver.Options{TLS: pki.ServerConfig(true)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	f := pki.Files
	tlsFlags := []string{"-s", srv.ClientURL(), "-tlsca", f.CA, "-tlscert", f.ClientCert, "-tlskey", f.ClientKey}
	retry, dead := natstest.Name(t, "retry"), natstest.Name(t, "dead")
	streams := []string{"-retry-topic", retry, "-dead-topic", dead}
	for _, cmd := range [][]string{
		append([]string{"backlog"}, streams...),
		append([]string{"deadletters", "list"}, streams...),
		append([]string{"purge", "-dry-run"}, streams...),
		append([]string{"replay", "-dry-run"}, streams...),
		{"status", "-bucket", natstest.Name(t, "kv")},
	} {
		args := append(append([]string{}, cmd...), tlsFlags...)
		code, _, errOut := runCmd(args...)
		// Connected: it fails on the missing stream, not on connecting.
		if code != exitError || strings.Contains(errOut, "natsconn: connect") {
			t.Errorf("%v: code %d, stderr %q; want a connected command failing on the missing stream", args, code, errOut)
		}
	}
	code, _, errOut := runCmd("backlog", "-s", srv.ClientURL(), "-tlsca", f.CA)
	if code != exitError || !strings.Contains(errOut, "natsconn: connect") {
		t.Errorf("without a client certificate: code %d, stderr %q; want 1 and a connect error", code, errOut)
	}
}
