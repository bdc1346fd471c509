package natsconn

import (
	"slices"
	"testing"

	"github.com/floodgate-go/floodgate/internal/redact/leaktest"
)

func TestOptionsRedactSecrets(t *testing.T) {
	pass, tok, urlPass := "canary-nats-password", "canary-nats-token", "canary-url-password"
	forms := slices.Concat(leaktest.Forms([]byte(pass)), leaktest.Forms([]byte(tok)), leaktest.Forms([]byte(urlPass)))
	o := Options{Server: "nats://alice:" + urlPass + "@127.0.0.1:4222,nats://b:4222", User: "alice", Password: pass, Token: tok,
		Creds: "/etc/nats/user.creds"}
	leaktest.CheckPrinted(t, o, "user.creds", forms)
}
