package as2_test

// The per-partner compatibility switches (compat.go, filename.go, oaep.go)
// and the processed/warning MDN.

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"mime"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/deliver"
	"github.com/floodgate-go/floodgate/deliver/as2"
	"github.com/floodgate-go/floodgate/deliver/as2/as2partner"
)

// A signed, processed MDN whose disposition carries a warning modifier
// (RFC 4130 §7.4.3) is delivered with the warning mdn-warning: never a
// plain success, never a failure.
func TestSendProcessedWarningMDN(t *testing.T) {
	pki := testPKI(t)
	srv := mdnResponder(t, func(w http.ResponseWriter, msgID, mic string) {
		signAndWrite(t, w, reportEntity(notification(msgID, "processed/warning: duplicate-document", mic)), pki.Partner, nil)
	})
	s, err := as2.NewSender(pki.SenderConfig(srv.URL))
	if err != nil {
		t.Fatal(err)
	}
	mdn, err := s.Send(context.Background(), testID, payload(t))
	wantWarning(t, err, deliver.WarnMDNWarning, as2.ErrMDNWarning)
	if mdn == nil || !mdn.Verified || !strings.Contains(err.Error(), "duplicate-document") {
		t.Errorf("Send = %+v, %v; want the verified MDN and its disposition in the cause", mdn, err)
	}
}

func TestSanitizeFilename(t *testing.T) {
	long := strings.Repeat("é", 200) // 400 bytes
	tests := []struct{ in, want string }{
		{"PO-1001.x12", "PO-1001.x12"},
		{"../../etc/passwd", "passwd"},
		{`C:\orders\po.edi`, "po.edi"},
		{"dir/", ""},
		{"..", ""},
		{"  .hidden. ", "hidden"},
		{"po\r\nX-Evil: 1.edi", "poX-Evil: 1.edi"},
		{`say "hi".txt`, "say hi.txt"},
		{"evil\u202Etxt.exe", "eviltxt.exe"},
		{"bad\xffutf8.txt", "badutf8.txt"},
		{"Bestellung-Müller.edi", "Bestellung-Müller.edi"},
		{long, strings.Repeat("é", 127)},
	}
	for _, tt := range tests {
		if got := as2.SanitizeFilename(tt.in); got != tt.want {
			t.Errorf("SanitizeFilename(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if got := as2.SanitizeFilename(tt.want); got != tt.want {
			t.Errorf("SanitizeFilename not idempotent on %q: %q", tt.want, got)
		}
	}
}

// The payload's filename reaches the partner in Content-Disposition: from
// Config.Filename, or from the message's metadata (sanitised; one that
// sanitises to nothing falls back to Config.Filename), ASCII and not,
// plain and signed and encrypted.
func TestSendFilename(t *testing.T) {
	tests := []struct {
		name, config, meta, want string
	}{
		{"none", "", "", ""},
		{"per partner", "orders.x12", "", "orders.x12"},
		{"per message", "orders.x12", "PO-1001.x12", "PO-1001.x12"},
		{"per message, UTF-8", "", "Bestellung-Müller ß.edi", "Bestellung-Müller ß.edi"},
		{"path stripped", "", "../../etc/passwd", "passwd"},
		{"header injection", "", "po.edi\r\nAS2-To: MALLORY", "po.ediAS2-To: MALLORY"},
		{"nothing left: Config.Filename", "orders.x12", "../", "orders.x12"},
	}
	for _, secure := range []bool{false, true} {
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				var pmod func(*as2partner.Config)
				smod := func(c *as2.Config) { c.Filename = tt.config }
				if !secure {
					pmod = func(c *as2partner.Config) { *c = as2partner.Config{AS2ID: c.AS2ID} }
					smod = func(c *as2.Config) {
						*c = as2.Config{URL: c.URL, From: c.From, To: c.To, Timeout: c.Timeout, Filename: tt.config}
					}
				}
				partner, s := securePair(t, pmod, smod)
				mdn, err := s.SendMessage(context.Background(), testID, payload(t), map[string]string{as2.MetaFilename: tt.meta})
				if err != nil || !mdn.Processed() {
					t.Fatalf("SendMessage = %+v, %v", mdn, err)
				}
				got, ok := partner.Filenames()[as2.MessageID(testID, as2.DefaultMessageIDDomain)]
				if got != tt.want || ok != (tt.want != "") {
					t.Errorf("secure=%v: partner received filename %q (%v), want %q", secure, got, ok, tt.want)
				}
			})
		}
	}
}

// Send (without metadata) sends Config.Filename, the per-partner name.
func TestSendConfigFilename(t *testing.T) {
	partner, s := securePair(t, nil, func(c *as2.Config) { c.Filename = "orders.x12" })
	if mdn, err := s.Send(context.Background(), testID, payload(t)); err != nil || !mdn.Processed() {
		t.Fatalf("Send = %+v, %v", mdn, err)
	}
	if got := partner.Filenames()[as2.MessageID(testID, as2.DefaultMessageIDDomain)]; got != "orders.x12" {
		t.Errorf("partner received filename %q, want orders.x12", got)
	}
}

// A non-ASCII filename goes as filename* (RFC 6266 §4.3) after an ASCII
// fallback (TestSendFilename shows the MIC over it matches); a
// Config.Filename that is not a bare name is refused at construction.
func TestBuildFilenameEncoding(t *testing.T) {
	_, s := securePair(t, nil, func(c *as2.Config) { c.EncryptionCert = nil; c.Filename = "Bestellung-ü.edi" })
	out, err := s.Build(testID, payload(t))
	if err != nil {
		t.Fatal(err)
	}
	want := `Content-Disposition: attachment; filename="Bestellung-_.edi"; filename*=UTF-8''Bestellung-%C3%BC.edi` + "\r\n"
	if !bytes.Contains(out.Body, []byte(want)) {
		t.Errorf("signed body lacks %q:\n%s", want, out.Body[:min(len(out.Body), 600)])
	}
	if _, err := as2.NewSender(as2.Config{URL: "http://x", From: "A", To: "B", Filename: "../x"}); !errors.Is(err, as2.ErrFilename) {
		t.Errorf("NewSender with Filename ../x: %v, want ErrFilename", err)
	}
}

// LegacyMICAlg spells micalg and signed-receipt-micalg "sha256" (RFC 3851);
// the default is RFC 5751's "sha-256". The partner reads both.
func TestLegacyMICAlg(t *testing.T) {
	for _, legacy := range []bool{false, true} {
		partner, s := securePair(t, func(c *as2partner.Config) { c.RequireEncrypted = false },
			func(c *as2.Config) { c.EncryptionCert = nil; c.LegacyMICAlg = legacy })
		out, err := s.Build(testID, payload(t))
		if err != nil {
			t.Fatal(err)
		}
		want := "sha-256"
		if legacy {
			want = "sha256"
		}
		_, params, err := mime.ParseMediaType(out.Header.Get("Content-Type"))
		if err != nil || params["micalg"] != want {
			t.Errorf("legacy=%v: Content-Type %q, want micalg=%s", legacy, out.Header.Get("Content-Type"), want)
		}
		if opts := out.Header.Get("Disposition-Notification-Options"); !strings.HasSuffix(opts, "optional, "+want) {
			t.Errorf("legacy=%v: Disposition-Notification-Options %q, want micalg %s", legacy, opts, want)
		}
		if mdn, err := s.Send(context.Background(), testID, payload(t)); err != nil || !mdn.Verified {
			t.Errorf("legacy=%v: Send = %+v, %v", legacy, mdn, err)
		}
		if st := partner.Stats(); st.Signed != 1 {
			t.Errorf("legacy=%v: partner stats %+v, want 1 signed", legacy, st)
		}
	}
}

// TransferBase64 sends the payload part and the enveloped data in base64;
// the partner opens them and returns the MIC we computed.
func TestTransferBase64(t *testing.T) {
	t.Run("signed", func(t *testing.T) {
		partner, s := securePair(t, func(c *as2partner.Config) { c.RequireEncrypted = false },
			func(c *as2.Config) { c.EncryptionCert = nil; c.TransferBase64 = true })
		out, err := s.Build(testID, payload(t))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(out.Body, []byte("Content-Transfer-Encoding: base64\r\n\r\n"+base64.StdEncoding.EncodeToString(payload(t))[:76]+"\r\n")) {
			t.Errorf("payload part not base64:\n%s", out.Body[:min(len(out.Body), 400)])
		}
		if mdn, err := s.Send(context.Background(), testID, payload(t)); err != nil || !mdn.Verified {
			t.Fatalf("Send = %+v, %v", mdn, err)
		}
		wantControlNumber(t, partner)
	})
	t.Run("signed and encrypted", func(t *testing.T) {
		partner, s := securePair(t, nil, func(c *as2.Config) { c.TransferBase64 = true })
		out, err := s.Build(testID, payload(t))
		if err != nil {
			t.Fatal(err)
		}
		if cte := out.Header.Get("Content-Transfer-Encoding"); cte != "base64" {
			t.Errorf("Content-Transfer-Encoding %q, want base64", cte)
		}
		if der, err := base64.StdEncoding.DecodeString(strings.Join(strings.Fields(string(out.Body)), "")); err != nil || der[0] != 0x30 {
			t.Errorf("body is not base64 DER: %v", err)
		}
		if mdn, err := s.Send(context.Background(), testID, payload(t)); err != nil || !mdn.Verified {
			t.Fatalf("Send = %+v, %v", mdn, err)
		}
		wantControlNumber(t, partner)
	})
}

// wantControlNumber checks that the partner read the X12 payload intact.
func wantControlNumber(t *testing.T, partner *as2partner.Partner) {
	t.Helper()
	if n := len(partner.ControlNumbers()); n != 1 {
		t.Errorf("partner read %d X12 control numbers, want 1 (payload not decoded?)", n)
	}
}

// RSA-OAEP key transport (RFC 3560), with SHA-256 and with SHA-1: the
// partner decrypts it, and the MIC it returns matches, with each content
// encryption.
func TestSendOAEP(t *testing.T) {
	for _, kt := range []string{as2.KeyTransportOAEPSHA256, as2.KeyTransportOAEPSHA1} {
		for _, enc := range []string{as2.EncryptAES256CBC, as2.EncryptAES128CBC, as2.Encrypt3DES} {
			t.Run(kt+"/"+enc, func(t *testing.T) {
				partner, s := securePair(t, nil, func(c *as2.Config) { c.KeyTransport = kt; c.EncryptAlgorithm = enc })
				out, err := s.Build(testID, payload(t))
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Contains(out.Body, oidRSAESOAEP) {
					t.Errorf("the envelope does not name id-RSAES-OAEP")
				}
				if mdn, err := s.Send(context.Background(), testID, payload(t)); err != nil || !mdn.Verified {
					t.Fatalf("Send = %+v, %v", mdn, err)
				}
				if st := partner.Stats(); st.Encrypted != 1 || st.Signed != 1 {
					t.Errorf("partner stats %+v, want 1 signed and encrypted", st)
				}
				wantControlNumber(t, partner)
			})
		}
	}
	if _, err := as2.NewSender(as2.Config{URL: "http://x", From: "A", To: "B", KeyTransport: "rsa-oaep-md5"}); !errors.Is(err, as2.ErrAlgorithm) {
		t.Errorf("NewSender with KeyTransport rsa-oaep-md5: %v, want ErrAlgorithm", err)
	}
}

// oidRSAESOAEP is the DER of id-RSAES-OAEP, 1.2.840.113549.1.1.7.
var oidRSAESOAEP = []byte{0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x07}

// TestInteropOpenSSLDecryptsOAEP: OpenSSL's cms -decrypt reads our OAEP
// envelopes, and its -cmsout -print shows the parameters each names.
func TestInteropOpenSSLDecryptsOAEP(t *testing.T) {
	dir, files := interopDir(t)
	pki := testPKI(t)
	for _, tt := range []struct{ kt, params string }{
		{as2.KeyTransportOAEPSHA256, "sha256"},
		{as2.KeyTransportOAEPSHA1, ""},
	} {
		cfg := pki.SenderConfig("http://127.0.0.1:1")
		cfg.SigningCert, cfg.SigningKey, cfg.KeyTransport = nil, nil, tt.kt
		s, err := as2.NewSender(cfg)
		if err != nil {
			t.Fatal(err)
		}
		out, err := s.Build(testID, payload(t))
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, dir, "oaep.der", out.Body)
		printed := string(openssl(t, dir, "cms", "-cmsout", "-print", "-inform", "DER", "-in", "oaep.der"))
		if !strings.Contains(printed, "rsaesOaep") {
			t.Errorf("%s: key encryption algorithm is not rsaesOaep:\n%s", tt.kt, printed)
		}
		if tt.params != "" && (!strings.Contains(printed, "mgf1") || strings.Count(printed, tt.params) < 2) {
			t.Errorf("%s: parameters do not name %s for OAEP and MGF1:\n%s", tt.kt, tt.params, printed)
		}
		plain := openssl(t, dir, "cms", "-decrypt", "-binary", "-inform", "DER", "-in", "oaep.der",
			"-recip", files.PartnerCert, "-inkey", files.PartnerKey)
		if !bytes.HasSuffix(plain, payload(t)) || !bytes.HasPrefix(plain, []byte("Content-Type: application/EDI-X12\r\n")) {
			t.Errorf("%s: openssl decrypted %q...", tt.kt, plain[:min(len(plain), 120)])
		}
	}
}

// An ECDSA signing key is valid, and reported by Sender.Warnings: many
// peers reject ECDSA signatures. An RSA key has no warning.
func TestECDSASigningKeyWarning(t *testing.T) {
	pki := testPKI(t)
	s, err := as2.NewSender(pki.SenderConfig("http://127.0.0.1:1"))
	if err != nil {
		t.Fatal(err)
	}
	if ws := s.Warnings(); len(ws) != 0 {
		t.Errorf("RSA key: Warnings() = %v, want none", ws)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	cfg := pki.SenderConfig("http://127.0.0.1:1")
	cfg.SigningCert, cfg.SigningKey = ecdsaCert(t, key), key
	s, err = as2.NewSender(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if ws := s.Warnings(); len(ws) != 1 || !errors.Is(ws[0], as2.ErrECDSASigningKey) {
		t.Errorf("ECDSA key: Warnings() = %v, want ErrECDSASigningKey", ws)
	}
}

// Names with spaces: we send them quoted (RFC 4130 §6.2), and the partner
// answers with a receipt whether they come quoted or not.
func TestAS2NamesWithSpaces(t *testing.T) {
	const from, to = "Northwind Retail", "Bluewater Home Goods"
	partner, s := securePair(t, func(c *as2partner.Config) { *c = as2partner.Config{AS2ID: to} },
		func(c *as2.Config) { *c = as2.Config{URL: c.URL, From: from, To: to, Timeout: 5 * time.Second} })
	out, err := s.Build(testID, payload(t))
	if err != nil {
		t.Fatal(err)
	}
	if f, tt := out.Header.Get("AS2-From"), out.Header.Get("AS2-To"); f != `"`+from+`"` || tt != `"`+to+`"` {
		t.Errorf("AS2-From %s, AS2-To %s; want both quoted", f, tt)
	}
	if mdn, err := s.Send(context.Background(), testID, payload(t)); err != nil || !mdn.Processed() {
		t.Fatalf("Send = %+v, %v", mdn, err)
	}
	if st := partner.Stats(); st.Processed != 1 || st.BadRequests != 0 {
		t.Errorf("partner stats %+v", st)
	}
}
