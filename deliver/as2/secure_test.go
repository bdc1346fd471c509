package as2_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"errors"
	"io"
	"math/big"
	"mime"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/deliver"
	"github.com/floodgate-go/floodgate/deliver/as2"
	"github.com/floodgate-go/floodgate/deliver/as2/as2partner"
	"github.com/floodgate-go/floodgate/deliver/as2/as2test"
)

var (
	pkiOnce sync.Once
	pkiVal  *as2test.PKI
	pkiErr  error
	// other is a second identity, issued by the same CA: the wrong key.
	other as2test.Identity
)

// testPKI returns key material shared by the tests of this package.
func testPKI(t *testing.T) *as2test.PKI {
	t.Helper()
	pkiOnce.Do(func() {
		pkiVal, pkiErr = as2test.New(buyerID, supplierID)
		if pkiErr == nil {
			now := time.Now()
			other, pkiErr = pkiVal.Issue("MALLORY", now.Add(-time.Hour), now.Add(time.Hour))
		}
	})
	if pkiErr != nil {
		t.Fatal(pkiErr)
	}
	return pkiVal
}

// securePair starts a partner from pki.PartnerConfig (modified by pmod) and
// returns it with a sender from pki.SenderConfig (modified by smod).
func securePair(t *testing.T, pmod func(*as2partner.Config), smod func(*as2.Config)) (*as2partner.Partner, *as2.Sender) {
	t.Helper()
	pki := testPKI(t)
	pcfg := pki.PartnerConfig()
	if pmod != nil {
		pmod(&pcfg)
	}
	partner, srv := startPartner(t, pcfg)
	cfg := pki.SenderConfig(srv.URL)
	cfg.Timeout = 5 * time.Second
	if smod != nil {
		smod(&cfg)
	}
	s, err := as2.NewSender(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return partner, s
}

// entityMIC computes, independently of the package, the MIC of a signed or
// encrypted message: over the canonical payload entity, headers included.
func entityMIC(alg string, payload []byte) string {
	entity := append([]byte("Content-Type: application/EDI-X12\r\nContent-Transfer-Encoding: binary\r\n\r\n"), payload...)
	var sum []byte
	switch alg {
	case "sha-1":
		s := sha1.Sum(entity)
		sum = s[:]
	case "sha-384":
		s := sha512.Sum384(entity)
		sum = s[:]
	case "sha-512":
		s := sha512.Sum512(entity)
		sum = s[:]
	default:
		s := sha256.Sum256(entity)
		sum = s[:]
	}
	return base64.StdEncoding.EncodeToString(sum) + ", " + alg
}

func TestSendSignedEncrypted(t *testing.T) {
	tests := []struct {
		sign, encrypt, micalg string
	}{
		{"", "", "sha-256"}, // defaults: sha256, aes256-cbc
		{as2.SignSHA256, as2.EncryptAES128CBC, "sha-256"},
		{as2.SignSHA384, as2.EncryptAES256CBC, "sha-384"},
		{as2.SignSHA512, as2.Encrypt3DES, "sha-512"},
		{as2.SignSHA1, as2.Encrypt3DES, "sha-1"},
	}
	for _, tt := range tests {
		t.Run(tt.sign+"/"+tt.encrypt, func(t *testing.T) {
			partner, s := securePair(t, nil, func(c *as2.Config) {
				c.SignAlgorithm, c.EncryptAlgorithm = tt.sign, tt.encrypt
			})
			body := payload(t)
			mdn, err := s.Send(context.Background(), testID, body)
			if err != nil {
				t.Fatalf("Send: %v", err)
			}
			if !mdn.Processed() || !mdn.Signed || !mdn.Verified || mdn.Signer == nil || !mdn.Signer.Equal(testPKI(t).Partner.Cert) {
				t.Errorf("MDN = %+v", mdn)
			}
			if want := entityMIC(tt.micalg, body); mdn.ReceivedContentMIC != want {
				t.Errorf("ReceivedContentMIC = %q, want %q", mdn.ReceivedContentMIC, want)
			}
			st := partner.Stats()
			if st.Processed != 1 || st.Signed != 1 || st.Encrypted != 1 || st.SignedMDNs != 1 || st.ErrorMDNs != 0 {
				t.Errorf("Stats = %+v", st)
			}
			if cn := partner.ControlNumbers(); cn["000001001"] != 1 {
				t.Errorf("ControlNumbers = %v: the partner did not get the X12 payload", cn)
			}
		})
	}
}

func TestBuildSignedEncryptedHeaders(t *testing.T) {
	_, s := securePair(t, nil, func(c *as2.Config) { c.SignAlgorithm = "SHA-384" })
	body := payload(t)
	out, err := s.Build(testID, body)
	if err != nil {
		t.Fatal(err)
	}
	mt, params, err := mime.ParseMediaType(out.Header.Get("Content-Type"))
	if err != nil || mt != "application/pkcs7-mime" || params["smime-type"] != "enveloped-data" {
		t.Errorf("Content-Type = %q", out.Header.Get("Content-Type"))
	}
	if got := out.Header.Get("Disposition-Notification-Options"); got != "signed-receipt-protocol=optional, pkcs7-signature; signed-receipt-micalg=optional, sha-384" {
		t.Errorf("Disposition-Notification-Options = %q", got)
	}
	if out.MIC != entityMIC("sha-384", body) {
		t.Errorf("MIC = %q, want %q", out.MIC, entityMIC("sha-384", body))
	}
	if bytes.Contains(out.Body, []byte("ISA*")) || out.Body[0] != 0x30 {
		t.Error("body is not a DER envelope, or shows the payload in clear")
	}

	// The receiver side opens it, and agrees on the MIC.
	pki := testPKI(t)
	o, err := as2.OpenMessage(out.Header.Get("Content-Type"), out.Body, as2.OpenOptions{
		Cert: pki.Partner.Cert, Key: pki.Partner.Key, SignerCert: pki.Sender.Cert, MICAlgorithm: "sha-384",
	})
	if err != nil {
		t.Fatal(err)
	}
	if !o.Signed || !o.Encrypted || !bytes.Equal(o.Payload, body) || o.MIC != out.MIC || o.ContentType != "application/EDI-X12" {
		t.Errorf("Opened = signed %v encrypted %v type %q MIC %q, payload equal %v", o.Signed, o.Encrypted, o.ContentType, o.MIC, bytes.Equal(o.Payload, body))
	}
	// Nobody else can open it.
	if _, err := as2.OpenMessage(out.Header.Get("Content-Type"), out.Body, as2.OpenOptions{Cert: other.Cert, Key: other.Key}); !errors.Is(err, as2.ErrDecryption) {
		t.Errorf("OpenMessage with another key: %v, want ErrDecryption", err)
	}
	// A signature check pinned to another certificate fails.
	if _, err := as2.OpenMessage(out.Header.Get("Content-Type"), out.Body, as2.OpenOptions{
		Cert: pki.Partner.Cert, Key: pki.Partner.Key, SignerCert: other.Cert,
	}); !errors.Is(err, as2.ErrSignature) {
		t.Errorf("OpenMessage pinned to another signer: %v, want ErrSignature", err)
	}
}

// TestSecurityLayersApart sends signed only, encrypted only, and plain with
// a signed MDN.
func TestSecurityLayersApart(t *testing.T) {
	body := payload(t)
	tests := []struct {
		name                string
		smod                func(*as2.Config)
		signed, encrypted   bool
		wantMIC             string
		wantContentTypeHTTP string
	}{
		{"signed only", func(c *as2.Config) { c.EncryptionCert = nil }, true, false, entityMIC("sha-256", body), "multipart/signed"},
		{"encrypted only", func(c *as2.Config) { c.SigningCert, c.SigningKey = nil, nil }, false, true, entityMIC("sha-256", body), "application/pkcs7-mime"},
		{"plain, signed MDN", func(c *as2.Config) { c.SigningCert, c.SigningKey, c.EncryptionCert = nil, nil, nil }, false, false, sha256MIC(body), "application/EDI-X12"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			partner, s := securePair(t, func(c *as2partner.Config) { c.RequireSigned, c.RequireEncrypted = false, false }, tt.smod)
			out, err := s.Build(testID, body)
			if err != nil {
				t.Fatal(err)
			}
			if mt, _, _ := mime.ParseMediaType(out.Header.Get("Content-Type")); !strings.EqualFold(mt, tt.wantContentTypeHTTP) {
				t.Errorf("Content-Type %q, want %s", mt, tt.wantContentTypeHTTP)
			}
			mdn, err := s.Send(context.Background(), testID, body)
			if err != nil {
				t.Fatalf("Send: %v", err)
			}
			if mdn.ReceivedContentMIC != tt.wantMIC || !mdn.Verified {
				t.Errorf("MIC %q (want %q), verified %v", mdn.ReceivedContentMIC, tt.wantMIC, mdn.Verified)
			}
			st := partner.Stats()
			if (st.Signed == 1) != tt.signed || (st.Encrypted == 1) != tt.encrypted || st.Processed != 1 || st.SignedMDNs != 1 {
				t.Errorf("Stats = %+v", st)
			}
		})
	}
}

func TestPartnerRejectsInsecureOrForeign(t *testing.T) {
	testPKI(t) // for other
	tests := []struct {
		name     string
		pmod     func(*as2partner.Config)
		smod     func(*as2.Config)
		modifier string
	}{
		{"unsigned to a partner that requires signing", nil, func(c *as2.Config) { c.SigningCert, c.SigningKey = nil, nil }, "error: insufficient-message-security"},
		{"unencrypted to a partner that requires encryption", nil, func(c *as2.Config) { c.EncryptionCert = nil }, "error: insufficient-message-security"},
		{"signed by a key the partner does not know", func(c *as2partner.Config) { c.SenderCert = other.Cert }, nil, "error: authentication-failed"},
		{"encrypted to another certificate", nil, func(c *as2.Config) { c.EncryptionCert = other.Cert }, "error: decryption-failed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			partner, s := securePair(t, tt.pmod, tt.smod)
			mdn, err := s.Send(context.Background(), testID, payload(t))
			if !errors.Is(err, as2.ErrNotProcessed) || !deliver.IsPermanent(err) {
				t.Fatalf("Send = %v, want permanent ErrNotProcessed", err)
			}
			if mdn == nil || mdn.Modifier != tt.modifier || !mdn.Verified {
				t.Fatalf("MDN = %+v, want verified %q", mdn, tt.modifier)
			}
			if st := partner.Stats(); st.ErrorMDNs != 1 || st.Processed != 0 || len(partner.Received()) != 0 {
				t.Errorf("Stats = %+v", st)
			}
		})
	}
}

// mdnResponder answers each AS2 request with an MDN made by build from the
// opened request.
func mdnResponder(t *testing.T, build func(w http.ResponseWriter, msgID, mic string)) *httptest.Server {
	t.Helper()
	pki := testPKI(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		_, micalg := as2.SignedReceiptRequest(r.Header.Get("Disposition-Notification-Options"))
		o, err := as2.OpenMessage(r.Header.Get("Content-Type"), body, as2.OpenOptions{
			Cert: pki.Partner.Cert, Key: pki.Partner.Key, SignerCert: pki.Sender.Cert, MICAlgorithm: micalg,
		})
		if err != nil {
			t.Errorf("OpenMessage: %v", err)
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		build(w, r.Header.Get("Message-ID"), o.MIC)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// reportEntity returns an MDN report entity (header and body) with the
// given notification fields.
func reportEntity(fields string) []byte {
	return []byte("Content-Type: " + reportCT + "\r\n\r\n" + report(fields))
}

func notification(msgID, disposition, mic string) string {
	f := "Reporting-UA: test\r\nOriginal-Message-ID: " + msgID + "\r\nDisposition: automatic-action/MDN-sent-automatically; " + disposition
	if mic != "" {
		f += "\r\nReceived-Content-MIC: " + mic
	}
	return f
}

func signAndWrite(t *testing.T, w http.ResponseWriter, entity []byte, id as2test.Identity, tamper func([]byte) []byte) {
	ct, body, err := as2.SignEntity(entity, id.Cert, id.Key, as2.SignSHA256)
	if err != nil {
		t.Error(err)
		http.Error(w, err.Error(), 500)
		return
	}
	if tamper != nil {
		body = tamper(body)
	}
	w.Header().Set("Content-Type", ct)
	w.Write(body)
}

func TestSendSignedMDNChecks(t *testing.T) {
	pki := testPKI(t)
	const wrongMIC = "7v7F++fQaNWYUbkMzPh1H4Qgw0bJz0TG5S3RpU6L2QE=, sha-256"
	tests := []struct {
		name  string
		build func(t *testing.T, w http.ResponseWriter, msgID, mic string)
		want  []error // all must match; nil means success
		kind  error   // deliver.ErrRetryable, ErrPermanent or ErrWarning
		cfg   func(*as2.Config)
	}{
		{"valid", func(t *testing.T, w http.ResponseWriter, msgID, mic string) {
			signAndWrite(t, w, reportEntity(notification(msgID, "processed", mic)), pki.Partner, nil)
		}, nil, nil, nil},
		{"MIC in sha-1 although sha-256 was asked", func(t *testing.T, w http.ResponseWriter, msgID, mic string) {
			// The partner may answer in another algorithm: we recompute.
			signAndWrite(t, w, reportEntity(notification(msgID, "processed", entityMIC("sha-1", payload(t)))), pki.Partner, nil)
		}, nil, nil, nil},
		{"wrong MIC", func(t *testing.T, w http.ResponseWriter, msgID, mic string) {
			signAndWrite(t, w, reportEntity(notification(msgID, "processed", wrongMIC)), pki.Partner, nil)
		}, []error{as2.ErrMICMismatch}, deliver.ErrPermanent, nil},
		{"wrong MIC, the partner's policy warns", func(t *testing.T, w http.ResponseWriter, msgID, mic string) {
			signAndWrite(t, w, reportEntity(notification(msgID, "processed", wrongMIC)), pki.Partner, nil)
		}, []error{as2.ErrMICMismatch}, deliver.ErrWarning, func(c *as2.Config) { c.WarnOnMICMismatch = true }},
		{"MIC of the payload alone", func(t *testing.T, w http.ResponseWriter, msgID, mic string) {
			signAndWrite(t, w, reportEntity(notification(msgID, "processed", sha256MIC(payload(t)))), pki.Partner, nil)
		}, []error{as2.ErrMICMismatch}, deliver.ErrPermanent, nil},
		{"MIC in an unknown algorithm", func(t *testing.T, w http.ResponseWriter, msgID, mic string) {
			signAndWrite(t, w, reportEntity(notification(msgID, "processed", "AAAA, gost-3411")), pki.Partner, nil)
		}, []error{as2.ErrMICMismatch}, deliver.ErrPermanent, nil},
		{"no MIC", func(t *testing.T, w http.ResponseWriter, msgID, mic string) {
			signAndWrite(t, w, reportEntity(notification(msgID, "processed", "")), pki.Partner, nil)
		}, []error{as2.ErrMICMissing}, deliver.ErrWarning, nil},
		{"no MIC, MIC required", func(t *testing.T, w http.ResponseWriter, msgID, mic string) {
			signAndWrite(t, w, reportEntity(notification(msgID, "processed", "")), pki.Partner, nil)
		}, []error{as2.ErrMICMissing}, deliver.ErrPermanent, func(c *as2.Config) { c.RequireMIC = true }},
		{"signed by another key", func(t *testing.T, w http.ResponseWriter, msgID, mic string) {
			signAndWrite(t, w, reportEntity(notification(msgID, "processed", mic)), other, nil)
		}, []error{as2.ErrCertNotPinned}, deliver.ErrParked, nil}, // the pinned model: trust.go
		{"tampered disposition", func(t *testing.T, w http.ResponseWriter, msgID, mic string) {
			signAndWrite(t, w, reportEntity(notification(msgID, "failed/failure: nope", mic)), pki.Partner, func(b []byte) []byte {
				return bytes.Replace(b, []byte("failed/failure: nope"), []byte("processed           "), 1)
			})
		}, []error{as2.ErrMDNSignature}, deliver.ErrPermanent, nil},
		{"unsigned", func(t *testing.T, w http.ResponseWriter, msgID, mic string) {
			w.Header().Set("Content-Type", reportCT)
			io.WriteString(w, report(notification(msgID, "processed", mic)))
		}, []error{as2.ErrMDNUnsigned}, deliver.ErrWarning, nil},
		{"unsigned, signed MDN required", func(t *testing.T, w http.ResponseWriter, msgID, mic string) {
			w.Header().Set("Content-Type", reportCT)
			io.WriteString(w, report(notification(msgID, "processed", mic)))
		}, []error{as2.ErrMDNUnsigned}, deliver.ErrPermanent, func(c *as2.Config) { c.RequireSignedMDN = true }},
		{"unsigned, no MIC", func(t *testing.T, w http.ResponseWriter, msgID, mic string) {
			w.Header().Set("Content-Type", reportCT)
			io.WriteString(w, report(notification(msgID, "processed", "")))
		}, []error{as2.ErrMDNUnsigned, as2.ErrMICMissing}, deliver.ErrWarning, nil},
		{"unsigned and failed", func(t *testing.T, w http.ResponseWriter, msgID, mic string) {
			w.Header().Set("Content-Type", reportCT)
			io.WriteString(w, report(notification(msgID, "processed/error: decryption-failed", "")))
		}, []error{as2.ErrMDNUnsigned, as2.ErrNotProcessed}, deliver.ErrPermanent, nil},
		{"signed, failed", func(t *testing.T, w http.ResponseWriter, msgID, mic string) {
			signAndWrite(t, w, reportEntity(notification(msgID, "failed/failure: unsupported format", "")), pki.Partner, nil)
		}, []error{as2.ErrNotProcessed}, deliver.ErrPermanent, nil},
		{"signed, but not an MDN inside", func(t *testing.T, w http.ResponseWriter, msgID, mic string) {
			signAndWrite(t, w, []byte("Content-Type: text/plain\r\n\r\nthanks"), pki.Partner, nil)
		}, []error{as2.ErrNoMDN}, deliver.ErrWarning, nil},
		{"truncated multipart/signed", func(t *testing.T, w http.ResponseWriter, msgID, mic string) {
			signAndWrite(t, w, reportEntity(notification(msgID, "processed", mic)), pki.Partner, func(b []byte) []byte { return b[:len(b)/2] })
		}, []error{as2.ErrMalformedMDN}, deliver.ErrWarning, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := mdnResponder(t, func(w http.ResponseWriter, msgID, mic string) { tt.build(t, w, msgID, mic) })
			cfg := pki.SenderConfig(srv.URL)
			if tt.cfg != nil {
				tt.cfg(&cfg)
			}
			s, err := as2.NewSender(cfg)
			if err != nil {
				t.Fatal(err)
			}
			mdn, err := s.Send(context.Background(), testID, payload(t))
			if tt.want == nil {
				if err != nil || !mdn.Verified {
					t.Fatalf("Send = %+v, %v; want verified success", mdn, err)
				}
				return
			}
			for _, w := range tt.want {
				if !errors.Is(err, w) {
					t.Errorf("Send error %v; want Is %v", err, w)
				}
			}
			if !errors.Is(err, tt.kind) {
				t.Errorf("Send error %v; want kind %v", err, tt.kind)
			}
		})
	}
}

func TestVerifyMDNLineEndings(t *testing.T) {
	pki := testPKI(t)
	// A partner that signed the canonical (CRLF) form and sent bare LFs.
	entity := reportEntity(notification("<a@b>", "processed", "x, sha-256"))
	ct, body, err := as2.SignEntity(entity, pki.Partner.Cert, pki.Partner.Key, "sha-256")
	if err != nil {
		t.Fatal(err)
	}
	lf := bytes.ReplaceAll(body, []byte("\r\n"), []byte("\n"))
	m, err := as2.VerifyMDN(ct, lf, pki.Partner.Cert)
	if err != nil || !m.Verified || m.OriginalMessageID != "<a@b>" {
		t.Fatalf("VerifyMDN(LF) = %+v, %v", m, err)
	}
}

func TestConfigSecurityValidation(t *testing.T) {
	pki := testPKI(t)
	now := time.Now()
	expired, err := pki.Issue("OLD", now.AddDate(-2, 0, 0), now.AddDate(-1, 0, 0))
	if err != nil {
		t.Fatal(err)
	}
	future, err := pki.Issue("NEW", now.Add(24*time.Hour), now.AddDate(1, 0, 0))
	if err != nil {
		t.Fatal(err)
	}
	ecKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	valid := pki.SenderConfig("https://as2.example.com/as2")
	tests := []struct {
		name  string
		mod   func(*as2.Config)
		want  error
		field string
	}{
		{"expired signing cert", func(c *as2.Config) { c.SigningCert, c.SigningKey = expired.Cert, expired.Key }, as2.ErrCertExpired, "Config.SigningCert"},
		{"signing cert not yet valid", func(c *as2.Config) { c.SigningCert, c.SigningKey = future.Cert, future.Key }, as2.ErrCertNotYetValid, "Config.SigningCert"},
		{"expired encryption cert", func(c *as2.Config) { c.EncryptionCert = expired.Cert }, as2.ErrCertExpired, "Config.EncryptionCert"},
		{"expired MDN cert", func(c *as2.Config) { c.MDNCert = expired.Cert }, as2.ErrCertExpired, "Config.MDNCert"},
		{"MDN cert not yet valid", func(c *as2.Config) { c.MDNCert = future.Cert }, as2.ErrCertNotYetValid, "Config.MDNCert"},
		{"key of another cert", func(c *as2.Config) { c.SigningKey = pki.Partner.Key }, as2.ErrKeyMismatch, "Config.SigningKey"},
		{"cert without key", func(c *as2.Config) { c.SigningKey = nil }, as2.ErrMissingKey, "Config.SigningKey"},
		{"key without cert", func(c *as2.Config) { c.SigningCert = nil }, as2.ErrMissingCert, "Config.SigningCert"},
		{"ECDSA key for an RSA cert", func(c *as2.Config) { c.SigningKey = ecKey }, as2.ErrKeyMismatch, "Config.SigningKey"},
		{"unknown signing algorithm", func(c *as2.Config) { c.SignAlgorithm = "md5" }, as2.ErrAlgorithm, "Config.SignAlgorithm"},
		{"unknown encryption algorithm", func(c *as2.Config) { c.EncryptAlgorithm = "rc2-40" }, as2.ErrAlgorithm, "Config.EncryptAlgorithm"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := valid
			tt.mod(&cfg)
			s, err := as2.NewSender(cfg)
			if s != nil || !errors.Is(err, tt.want) || !strings.HasPrefix(err.Error(), "invalid config: "+tt.field) {
				t.Fatalf("NewSender = %v, %v; want %v naming %s", s, err, tt.want, tt.field)
			}
		})
	}
	for _, alg := range []string{"sha256", "SHA-256", "sha1", "sha-512", "sha384"} {
		cfg := valid
		cfg.SignAlgorithm = alg
		if _, err := as2.NewSender(cfg); err != nil {
			t.Errorf("SignAlgorithm %q: %v", alg, err)
		}
	}
	for _, alg := range []string{"aes128-cbc", "AES256-CBC", "3des", "des-ede3-cbc", "aes-128-cbc"} {
		cfg := valid
		cfg.EncryptAlgorithm = alg
		if _, err := as2.NewSender(cfg); err != nil {
			t.Errorf("EncryptAlgorithm %q: %v", alg, err)
		}
	}
	// An ECDSA certificate cannot receive an RSA key-transport envelope.
	ecCert := ecdsaCert(t, ecKey)
	cfg := valid
	cfg.EncryptionCert = ecCert
	if _, err := as2.NewSender(cfg); !errors.Is(err, as2.ErrKeyType) || !strings.Contains(err.Error(), "Config.EncryptionCert") {
		t.Errorf("ECDSA encryption cert: %v, want ErrKeyType naming Config.EncryptionCert", err)
	}
}

func TestLoadProfile(t *testing.T) {
	pki := testPKI(t)
	dir := t.TempDir()
	files, err := pki.WriteFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	base := as2.Config{URL: "https://as2.example.com/as2", From: buyerID, To: supplierID, EncryptAlgorithm: as2.Encrypt3DES}
	cfg, err := as2.LoadProfile(base, files.Profile())
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.SigningCert.Equal(pki.Sender.Cert) || !cfg.EncryptionCert.Equal(pki.Partner.Cert) || !cfg.MDNCert.Equal(pki.Partner.Cert) ||
		cfg.SigningKey == nil || cfg.EncryptAlgorithm != as2.Encrypt3DES {
		t.Errorf("LoadProfile = %+v", cfg)
	}
	if _, err := as2.NewSender(cfg); err != nil {
		t.Errorf("NewSender(loaded): %v", err)
	}

	// A PKCS #1 key works too.
	write := func(name, data string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	garbage := write("garbage.pem", "not a PEM file\n")
	tests := []struct {
		name  string
		files as2.ProfileFiles
		want  error
		field string
	}{
		{"missing file", as2.ProfileFiles{SigningCert: filepath.Join(dir, "nope.pem")}, os.ErrNotExist, "ProfileFiles.SigningCert"},
		{"garbage cert", as2.ProfileFiles{EncryptionCert: garbage}, as2.ErrPEM, "ProfileFiles.EncryptionCert"},
		{"garbage key", as2.ProfileFiles{SigningCert: files.SenderCert, SigningKey: garbage}, as2.ErrPEM, "ProfileFiles.SigningKey"},
		{"key file as cert", as2.ProfileFiles{MDNCert: files.SenderKey}, as2.ErrPEM, "ProfileFiles.MDNCert"},
		{"cert without key", as2.ProfileFiles{SigningCert: files.SenderCert}, as2.ErrMissingKey, "invalid profile: Config.SigningKey"},
		{"mismatched key", as2.ProfileFiles{SigningCert: files.SenderCert, SigningKey: files.PartnerKey}, as2.ErrKeyMismatch, "invalid profile: Config.SigningKey"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := as2.LoadProfile(base, tt.files)
			if !errors.Is(err, tt.want) || !strings.HasPrefix(err.Error(), tt.field) {
				t.Fatalf("LoadProfile = %v; want %v naming %s", err, tt.want, tt.field)
			}
		})
	}
}

func TestMIMESplitEdgeCases(t *testing.T) {
	pki := testPKI(t)
	entity := []byte("Content-Type: text/plain\r\n\r\nline one\r\n\r\n--not-a-boundary\r\nend")
	ct, body, err := as2.SignEntity(entity, pki.Partner.Cert, pki.Partner.Key, "sha256")
	if err != nil {
		t.Fatal(err)
	}
	// Preamble, epilogue, and transport padding after a delimiter.
	_, params, _ := mime.ParseMediaType(ct)
	b := params["boundary"]
	padded := "This is an S/MIME signed message\r\n\r\n" +
		strings.Replace(string(body), "--"+b+"\r\n", "--"+b+"  \r\n", 1) + "epilogue\r\n"
	got, signer, err := as2.VerifySigned(ct, []byte(padded), pki.Partner.Cert)
	if err != nil || !bytes.Equal(got, entity) || !signer.Equal(pki.Partner.Cert) {
		t.Fatalf("VerifySigned = %q, %v", got, err)
	}
	// Not multipart/signed.
	if _, _, err := as2.VerifySigned("text/plain", body, nil); !errors.Is(err, as2.ErrSignature) {
		t.Errorf("text/plain: %v", err)
	}
	// Without a pinned certificate, the one in the signature is used.
	if _, s, err := as2.VerifySigned(ct, body, nil); err != nil || !s.Equal(pki.Partner.Cert) {
		t.Errorf("unpinned: %v", err)
	}
	// A changed byte in the content.
	bad := bytes.Replace(body, []byte("line one"), []byte("line One"), 1)
	if _, _, err := as2.VerifySigned(ct, bad, nil); !errors.Is(err, as2.ErrSignature) {
		t.Errorf("tampered: %v", err)
	}
	// A missing closing delimiter.
	if _, _, err := as2.VerifySigned(ct, body[:len(body)-10], nil); !errors.Is(err, as2.ErrMalformedMIME) {
		t.Errorf("truncated: %v", err)
	}
}

func ecdsaCert(t *testing.T, key *ecdsa.PrivateKey) *x509.Certificate {
	t.Helper()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(99),
		Subject:      pkix.Name{CommonName: "EC"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestConcurrentSecureSends runs senders with different algorithms at once
// (pkcs7.Encrypt takes its algorithm from a package variable).
func TestConcurrentSecureSends(t *testing.T) {
	partner, aes := securePair(t, nil, nil)
	_, des := securePair(t, nil, func(c *as2.Config) { c.EncryptAlgorithm = as2.Encrypt3DES })
	// Point the 3DES sender at the same partner.
	cfg := des.Config()
	cfg.URL = aes.Config().URL
	des, err := as2.NewSender(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 8 {
		s := aes
		if i%2 == 1 {
			s = des
		}
		wg.Go(func() {
			if _, err := s.Send(context.Background(), "c-"+strconv.Itoa(i), payload(t)); err != nil {
				t.Errorf("Send %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	if st := partner.Stats(); st.Processed != 8 || st.Encrypted != 8 || st.SignedMDNs != 8 {
		t.Errorf("Stats = %+v", st)
	}
}
