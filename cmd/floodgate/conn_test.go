package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/internal/natsconn"
	"github.com/floodgate-go/floodgate/internal/natsserver"
	"github.com/floodgate-go/floodgate/internal/natstest"
)

// TestMain keeps the machine's nats CLI contexts and NATS_* credentials
// out of the tests: the context store is an empty temporary folder.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "floodgate-cli-test-")
	if err != nil {
		panic(err)
	}
	os.Setenv("XDG_CONFIG_HOME", dir)
	for _, k := range []string{natsconn.EnvContext, natsconn.EnvCreds, natsconn.EnvNKey, natsconn.EnvUser,
		natsconn.EnvPassword, natsconn.EnvCert, natsconn.EnvKey, natsconn.EnvCA} {
		os.Unsetenv(k)
	}
	connectTimeout = time.Minute // a hang guard only
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// TestSecuredServer: every command that connects reaches a server that
// requires a password, with -s/-user/-password and with a context; a
// wrong password exits 1 with an authorization error naming the flags and
// never showing the password.
func TestSecuredServer(t *testing.T) {
	srv, err := natsserver.Start(natsserver.Options{User: "ops", Password: "pw-right"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	url := srv.ClientURL()
	dir := os.Getenv("XDG_CONFIG_HOME")
	ctxFile := filepath.Join(dir, "nats", "context", "secured.json")
	if err := os.MkdirAll(filepath.Dir(ctxFile), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(ctxFile, []byte(`{"url":"`+url+`","user":"ops","password":"pw-right"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(ctxFile) })
	retry, dead := natstest.Name(t, "retry"), natstest.Name(t, "dead")
	streams := []string{"-retry-topic", retry, "-dead-topic", dead}

	for _, auth := range [][]string{
		{"-s", url, "-user", "ops", "-password", "pw-right"},
		{"--server", url, "--user", "ops", "--password", "pw-right"},
		{"-nats-url", url, "-user", "ops", "-password", "pw-right"},
		{"--context", "secured"},
	} {
		for _, cmd := range [][]string{
			append([]string{"backlog"}, streams...),
			append([]string{"deadletters", "list"}, streams...),
			append([]string{"purge", "-dry-run"}, streams...),
			append([]string{"replay", "-dry-run"}, streams...),
			{"status", "-bucket", natstest.Name(t, "kv")},
		} {
			args := append(append([]string{}, cmd...), auth...)
			code, _, errOut := runCmd(args...)
			// The streams do not exist: exit 1 with "stream not found"
			// (status: no bucket and no route), not an authorization error.
			if code != exitError || strings.Contains(strings.ToLower(errOut), "authorization") {
				t.Errorf("%v: code %d, stderr %q; want a connected command failing on the missing stream", args, code, errOut)
			}
		}
	}

	code, _, errOut := runCmd("backlog", "-s", url, "-user", "ops", "-password", "pw-wrong")
	if code != exitError || !strings.Contains(strings.ToLower(errOut), "authorization violation") || !strings.Contains(errOut, "-user/-password") {
		t.Errorf("wrong password: code %d, stderr %q; want 1 and an authorization error naming the flags", code, errOut)
	}
	if strings.Contains(errOut, "pw-wrong") {
		t.Errorf("wrong password: stderr shows it: %q", errOut)
	}
	withUserinfo := strings.Replace(url, "nats://", "nats://ops:pw-wrong@", 1)
	code, _, errOut = runCmd("status", "-s", withUserinfo)
	if code != exitError || strings.Contains(errOut, "pw-wrong") || !strings.Contains(errOut, "REDACTED@") {
		t.Errorf("wrong password in the URL: code %d, stderr %q; want 1 and the URL redacted", code, errOut)
	}
	code, _, errOut = runCmd("backlog", "-context", "nope")
	if code != exitError || !strings.Contains(errOut, `context "nope"`) {
		t.Errorf("missing context: code %d, stderr %q", code, errOut)
	}
}

// TestHelpRedactsNothingSecret: -h names the environment variables, never
// their values.
func TestHelpShowsNoSecret(t *testing.T) {
	t.Setenv("NATS_URL", "nats://ops:env-secret@127.0.0.1:1")
	for _, c := range commands {
		if c.name == "sim" || c.name == "permissions" { // no connection
			continue
		}
		_, out, errOut := runCmd(c.name, "-h")
		if strings.Contains(out+errOut, "env-secret") {
			t.Errorf("%s -h shows the password of NATS_URL", c.name)
		}
		if !strings.Contains(errOut, "-context") || !strings.Contains(errOut, "-creds") {
			t.Errorf("%s -h lacks the connection flags", c.name)
		}
	}
}
