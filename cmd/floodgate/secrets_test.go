package main

import (
	"strings"
	"testing"
)

// TestHelpShowsNoSecrets: with credentials in the environment, no
// command's -h output shows them (flag defaults are never read from the
// environment; the help names the variables only).
func TestHelpShowsNoSecrets(t *testing.T) {
	canaries := map[string]string{
		"NATS_PASSWORD": "canary-env-password", "NATS_USER": "canary-env-user",
		"NATS_URL": "nats://u:canary-env-urlpass@127.0.0.1:4222", "NATS_CREDS": "/canary-env-creds",
		"NATS_NKEY": "/canary-env-nkey", "NATS_KEY": "/canary-env-key",
	}
	for k, v := range canaries {
		t.Setenv(k, v)
	}
	for _, cmd := range []string{"sim", "backlog", "deadletters", "replay", "purge", "migrate", "status", "open", "close", "reset"} {
		_, out, errOut := runCmd(cmd, "-h")
		if !strings.Contains(out+errOut, "-password") && cmd != "sim" {
			t.Errorf("%s -h does not list -password: %.300s", cmd, out+errOut)
		}
		for _, v := range canaries {
			if strings.Contains(out+errOut, strings.TrimPrefix(v, "/")) || strings.Contains(out+errOut, "canary-env") {
				t.Errorf("%s -h shows %q", cmd, v)
			}
		}
	}
}
