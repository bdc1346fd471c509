package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/deliver/webhook"
)

// TestWebhookSecret: the secret of -webhook-secret-file, or else of
// $FLOODGATE_WEBHOOK_SECRET, is the one every consumer verifies with: a
// trigger signed with it outside the example is accepted by consumer 1
// (with a throwaway secret it would get 401). A file that does not hold a
// secret is refused with an error naming the flag (or the variable), never
// quoting what it holds.
func TestWebhookSecret(t *testing.T) {
	key := []byte("canary-secret-key-of-the-test-32")
	secret := webhook.FormatSecret(key)
	dir := t.TempDir()
	file := filepath.Join(dir, "secret")
	if err := os.WriteFile(file, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(EnvWebhookSecret, "")
	for name, setup := range map[string]func(t *testing.T) []string{
		"file": func(*testing.T) []string { return []string{"-webhook-secret-file", file} },
		"env":  func(t *testing.T) []string { t.Setenv(EnvWebhookSecret, secret); return nil },
	} {
		t.Run(name, func(t *testing.T) {
			o, err := parseFlags(setup(t), &bytes.Buffer{})
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(o.webhookSecret, key) {
				t.Fatalf("the secret read is not the one given")
			}
			c, err := newConsumer(1, o)
			if err != nil {
				t.Fatal(err)
			}
			defer c.srv.Close()
			c.start(time.Now())
			s, err := webhook.NewSender(webhook.Config{URL: c.url, Secret: key})
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Send(context.Background(), "trigger-1", []byte(`{"id":"trigger-1"}`)); err != nil {
				t.Fatalf("a trigger signed with the secret: %v", err)
			}
			if st := c.hook.Stats(); st.BadSignatures != 0 || c.hook.Deliveries()["trigger-1"] != 1 {
				t.Errorf("consumer stats %+v, deliveries %v: want the trigger verified and processed", st, c.hook.Deliveries())
			}
		})
	}

	bad := filepath.Join(dir, "bad")
	if err := os.WriteFile(bad, []byte("whsec_canary!!notbase64"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(EnvWebhookSecret, "")
	for _, tc := range []struct {
		args []string
		env  string
		want string
	}{
		{[]string{"-webhook-secret-file", bad}, "", "-webhook-secret-file: "},
		{[]string{"-webhook-secret-file", filepath.Join(dir, "missing")}, "", "-webhook-secret-file: "},
		{nil, "whsec_canary!!notbase64", "$" + EnvWebhookSecret + ": "},
		{nil, "whsec_", "$" + EnvWebhookSecret + ": "},
	} {
		t.Setenv(EnvWebhookSecret, tc.env)
		_, err := parseFlags(tc.args, &bytes.Buffer{})
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%v, env %q: %v, want an error starting %q", tc.args, tc.env, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "canary") {
			t.Errorf("the error quotes the secret: %v", err)
		}
	}
}

// TestHelpShowsNoSecrets: -h lists -webhook-secret-file, its variable and
// the NATS credential flags, and shows no value of the environment (flag
// defaults are never read from it).
func TestHelpShowsNoSecrets(t *testing.T) {
	canaries := map[string]string{EnvWebhookSecret: webhook.FormatSecret([]byte("canary-env-webhook")),
		"NATS_PASSWORD": "canary-env-password", "NATS_USER": "canary-env-user",
		"NATS_URL": "nats://u:canary-env-urlpass@127.0.0.1:4222"}
	for k, v := range canaries {
		t.Setenv(k, v)
	}
	var help bytes.Buffer
	if _, err := parseFlags([]string{"-h"}, &help); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("-h: %v", err)
	}
	for _, want := range []string{"-webhook-secret-file", EnvWebhookSecret, "-token", "-password"} {
		if !strings.Contains(help.String(), want) {
			t.Errorf("-h does not list %s", want)
		}
	}
	for _, v := range canaries {
		if strings.Contains(help.String(), v) || strings.Contains(help.String(), "canary-env") {
			t.Errorf("-h shows a value of the environment: %s", help.String())
		}
	}
}
