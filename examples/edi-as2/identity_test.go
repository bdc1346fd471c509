package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/floodgate-go/floodgate/deliver/as2/as2test"
)

// TestAS2Identity: with -as2-cert and -as2-key, every retailer's sender
// signs with our certificate and key, and its receiver verifies with our
// certificate (both print the certificate's fingerprint); a key that is
// not the certificate's, or a file that is not PEM, is refused with an
// error naming the flag and never quoting the key.
func TestAS2Identity(t *testing.T) {
	pki, err := as2test.New(ourAS2ID, "OTHER")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	files, err := pki.WriteFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	o, err := parseFlags([]string{"-as2-cert", files.SenderCert, "-as2-key", files.SenderKey}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	ours, err := loadIdentity(o)
	if err != nil {
		t.Fatal(err)
	}
	r, err := newRetailer(retailerIDs[0], false, o, ours, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.srv.Close()
	defer r.receiver.Close()
	sum := sha256.Sum256(pki.Sender.Cert.Raw)
	fp := hex.EncodeToString(sum[:8])
	want := "CN=" + ourAS2ID + ",O=floodgate test sha256:" + fp
	if s := fmt.Sprintf("%+v", r.sender); !strings.Contains(s, "SigningCert:"+want) {
		t.Errorf("the sender does not sign with -as2-cert (fingerprint %s): %s", fp, s)
	}
	if s := fmt.Sprintf("%+v", r.receiver); !strings.Contains(s, "SenderCert:"+want) {
		t.Errorf("the retailer does not verify with -as2-cert (fingerprint %s): %s", fp, s)
	}

	garbage := filepath.Join(dir, "garbage.key")
	if err := os.WriteFile(garbage, []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := loadIdentity(options{as2Cert: files.SenderCert, as2Key: garbage}); err == nil || !strings.HasPrefix(err.Error(), "-as2-key: ") {
		t.Errorf("a key file that is not PEM: %v, want an error naming -as2-key", err)
	}
	if _, err := loadIdentity(options{as2Cert: garbage, as2Key: files.SenderKey}); err == nil || !strings.HasPrefix(err.Error(), "-as2-cert: ") {
		t.Errorf("a certificate file that is not PEM: %v, want an error naming -as2-cert", err)
	}
	// The partner's key with our certificate: refused as the flags are
	// parsed, before anything starts.
	_, err = parseFlags([]string{"-as2-cert", files.SenderCert, "-as2-key", files.PartnerKey}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "-as2-key is not the private key of -as2-cert") {
		t.Errorf("a key that is not the certificate's: %v, want an error naming the flags", err)
	}
	if err != nil && strings.Contains(err.Error(), pki.Partner.Key.D.String()) {
		t.Errorf("the error quotes the key: %v", err)
	}
}

// TestHelpShowsNoSecrets: -h lists -as2-cert, -as2-key and the NATS
// credential flags, and shows no value of the NATS variables (flag
// defaults are never read from the environment).
func TestHelpShowsNoSecrets(t *testing.T) {
	canaries := map[string]string{"NATS_PASSWORD": "canary-env-password", "NATS_USER": "canary-env-user",
		"NATS_URL": "nats://u:canary-env-urlpass@127.0.0.1:4222"}
	for k, v := range canaries {
		t.Setenv(k, v)
	}
	var help bytes.Buffer
	if _, err := parseFlags([]string{"-h"}, &help); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("-h: %v", err)
	}
	for _, want := range []string{"-as2-cert", "-as2-key", "-password", "NATS_PASSWORD"} {
		if !strings.Contains(help.String(), want) {
			t.Errorf("-h does not list %s", want)
		}
	}
	if strings.Contains(help.String(), "canary-env") {
		t.Errorf("-h shows a value of the environment: %s", help.String())
	}
}
