package as2_test

// Interoperability with OpenSSL's cms command: an S/MIME implementation
// nobody here wrote. These tests fail (never skip) when openssl is missing:
// .ci/run installs Debian's openssl package.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/floodgate-go/floodgate/deliver"
	"github.com/floodgate-go/floodgate/deliver/as2"
	"github.com/floodgate-go/floodgate/deliver/as2/as2partner"
	"github.com/floodgate-go/floodgate/deliver/as2/as2test"
)

// openssl runs the openssl command in dir and returns its standard output.
// It must run on the test's goroutine.
func openssl(t *testing.T, dir string, args ...string) []byte {
	t.Helper()
	out, err := runOpenSSL(dir, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// runOpenSSL runs the openssl command in dir, for handlers that cannot call
// t.Fatal.
func runOpenSSL(dir string, args ...string) ([]byte, error) {
	path, err := exec.LookPath("openssl")
	if err != nil {
		return nil, fmt.Errorf("openssl not found in PATH (%v): the TestInterop tests need OpenSSL's cms command; install Debian's openssl package (.ci/run does)", err)
	}
	cmd := exec.Command(path, args...)
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("openssl %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.Bytes(), nil
}

// opensslFails runs openssl and reports whether it failed.
func opensslFails(t *testing.T, dir string, args ...string) bool {
	t.Helper()
	openssl(t, dir, "version") // fails the test if openssl is missing
	cmd := exec.Command("openssl", args...)
	cmd.Dir = dir
	return cmd.Run() != nil
}

// interopDir writes the PKI's PEM files into a temporary directory.
func interopDir(t *testing.T) (string, as2test.Files) {
	t.Helper()
	dir := t.TempDir()
	files, err := testPKI(t).WriteFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	return dir, files
}

func writeFile(t *testing.T, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func readFile(t *testing.T, dir, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var boundaryRE = regexp.MustCompile(`boundary="?([^";\r\n]+)"?`)

// splitSigned splits a multipart/signed message (its header included, as
// openssl reads and writes them) into the signed part and the DER
// signature, with a splitter independent of the package's.
func splitSigned(t *testing.T, msg []byte) (signed, sig []byte) {
	t.Helper()
	signed, sig, err := splitSignedErr(msg)
	if err != nil {
		t.Fatal(err)
	}
	return signed, sig
}

func splitSignedErr(msg []byte) (signed, sig []byte, err error) {
	m := boundaryRE.FindSubmatch(msg)
	if m == nil {
		return nil, nil, fmt.Errorf("no boundary in %q", msg[:min(len(msg), 300)])
	}
	parts := bytes.Split(msg, append([]byte("--"), m[1]...))
	if len(parts) != 4 {
		return nil, nil, fmt.Errorf("multipart/signed has %d pieces, want preamble, 2 parts, epilogue", len(parts))
	}
	signed = bytes.TrimPrefix(parts[1], []byte("\r\n"))
	signed = bytes.TrimSuffix(signed, []byte("\r\n"))
	_, b64, ok := bytes.Cut(parts[2], []byte("\r\n\r\n"))
	if !ok {
		return nil, nil, fmt.Errorf("signature part has no body")
	}
	sig, err = base64.StdEncoding.DecodeString(strings.Join(strings.Fields(string(b64)), ""))
	if err != nil {
		return nil, nil, fmt.Errorf("signature: %v", err)
	}
	return signed, sig, nil
}

func sha256B64(b []byte) string {
	s := sha256.Sum256(b)
	return base64.StdEncoding.EncodeToString(s[:])
}

// TestInteropOpenSSLDecryptsAndVerifies: OpenSSL opens what the Sender sends.
func TestInteropOpenSSLDecryptsAndVerifies(t *testing.T) {
	dir, files := interopDir(t)
	tests := []struct {
		sign, encrypt, opensslCipher string
	}{
		{as2.SignSHA256, as2.EncryptAES256CBC, "aes-256-cbc"},
		{as2.SignSHA256, as2.EncryptAES128CBC, "aes-128-cbc"},
		{as2.SignSHA512, as2.Encrypt3DES, "des-ede3-cbc"},
		{as2.SignSHA1, as2.EncryptAES128CBC, "aes-128-cbc"},
	}
	for _, tt := range tests {
		t.Run(tt.sign+"/"+tt.encrypt, func(t *testing.T) {
			cfg := testPKI(t).SenderConfig("https://as2.example.com/as2")
			cfg.SignAlgorithm, cfg.EncryptAlgorithm = tt.sign, tt.encrypt
			s, err := as2.NewSender(cfg)
			if err != nil {
				t.Fatal(err)
			}
			body := payload(t) // X12 with bare LF line ends: binary content
			out, err := s.Build(testID, body)
			if err != nil {
				t.Fatal(err)
			}
			writeFile(t, dir, "msg.der", out.Body)
			if info := string(openssl(t, dir, "cms", "-cmsout", "-print", "-inform", "DER", "-in", "msg.der")); !strings.Contains(info, tt.opensslCipher) {
				t.Errorf("OpenSSL does not see %s in the envelope:\n%s", tt.opensslCipher, info[:min(len(info), 2000)])
			}
			openssl(t, dir, "cms", "-decrypt", "-inform", "DER", "-in", "msg.der",
				"-recip", files.PartnerCert, "-inkey", files.PartnerKey, "-out", "dec.eml")
			dec := readFile(t, dir, "dec.eml")
			signed, sig := splitSigned(t, dec)
			writeFile(t, dir, "signed.bin", signed)
			writeFile(t, dir, "sig.der", sig)
			// Detached verification of the exact bytes: OpenSSL 3's S/MIME
			// reader rewrites bare LF to CRLF inside multipart/signed, so a
			// binary payload is verified as detached content.
			openssl(t, dir, "cms", "-verify", "-inform", "DER", "-in", "sig.der", "-content", "signed.bin",
				"-binary", "-CAfile", files.CA, "-out", "content.bin")
			content := readFile(t, dir, "content.bin")
			if !bytes.HasSuffix(content, body) || !bytes.HasPrefix(content, []byte("Content-Type: application/EDI-X12\r\n")) {
				t.Errorf("OpenSSL's verified content is not the payload entity: %q", content[:min(len(content), 200)])
			}
			// The MIC we expect back is over exactly what OpenSSL verified.
			digest, alg, _ := as2.ParseMIC(out.MIC)
			want, _ := as2.ComputeMIC(alg, content)
			if wantDigest, _, _ := as2.ParseMIC(want); wantDigest != digest {
				t.Errorf("MIC %q is not over the signed entity", out.MIC)
			}
			// A signature by someone else's certificate: OpenSSL says no.
			if !opensslFails(t, dir, "cms", "-verify", "-inform", "DER", "-in", "sig.der", "-content", "signed.bin",
				"-binary", "-CAfile", files.CA, "-certfile", files.PartnerCert, "-nointern", "-out", "/dev/null") {
				t.Error("OpenSSL verified the signature against the partner's certificate")
			}
		})
	}

	t.Run("canonical payload, OpenSSL reads the MIME", func(t *testing.T) {
		cfg := testPKI(t).SenderConfig("https://as2.example.com/as2")
		s, err := as2.NewSender(cfg)
		if err != nil {
			t.Fatal(err)
		}
		body := bytes.ReplaceAll(payload(t), []byte("\n"), []byte("\r\n"))
		out, err := s.Build(testID, body)
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, dir, "msg2.der", out.Body)
		openssl(t, dir, "cms", "-decrypt", "-inform", "DER", "-in", "msg2.der",
			"-recip", files.PartnerCert, "-inkey", files.PartnerKey, "-out", "dec2.eml")
		// OpenSSL's own S/MIME reading, in its default canonical text mode.
		openssl(t, dir, "cms", "-verify", "-in", "dec2.eml", "-CAfile", files.CA, "-out", "content2.bin")
		content := readFile(t, dir, "content2.bin")
		if !bytes.HasSuffix(content, body) {
			t.Errorf("content = %q", content[:min(len(content), 200)])
		}
		if got := sha256B64(content) + ", sha-256"; got != out.MIC {
			t.Errorf("MIC %q, OpenSSL's content hashes to %q", out.MIC, got)
		}
	})
}

// TestInteropOpenSSLSignsAndEncrypts: our receiving side (OpenMessage and
// the partner simulator) opens what OpenSSL signs and encrypts.
func TestInteropOpenSSLSignsAndEncrypts(t *testing.T) {
	dir, files := interopDir(t)
	pki := testPKI(t)
	body := payload(t)
	entity := append([]byte("Content-Type: application/EDI-X12\r\nContent-Transfer-Encoding: binary\r\n\r\n"), body...)
	writeFile(t, dir, "entity.txt", entity)
	for _, tt := range []struct{ md, cipher, outform string }{
		{"sha256", "-aes256", "DER"},
		{"sha256", "-aes128", "SMIME"},
		{"sha384", "-des3", "DER"},
		{"sha1", "-aes256", "SMIME"},
	} {
		t.Run(tt.md+tt.cipher+"/"+tt.outform, func(t *testing.T) {
			openssl(t, dir, "cms", "-sign", "-in", "entity.txt", "-signer", files.SenderCert, "-inkey", files.SenderKey,
				"-md", tt.md, "-binary", "-crlfeol", "-out", "signed.eml")
			openssl(t, dir, "cms", "-encrypt", "-in", "signed.eml", "-binary", tt.cipher, "-outform", tt.outform,
				"-out", "enc.out", files.PartnerCert)
			enc := readFile(t, dir, "enc.out")
			contentType := `application/pkcs7-mime; smime-type=enveloped-data; name="smime.p7m"`
			httpBody := enc
			if tt.outform == "SMIME" {
				// An S/MIME file: its header goes to HTTP, its base64 body is the body.
				hdr, b, ok := bytes.Cut(bytes.ReplaceAll(enc, []byte("\r\n"), []byte("\n")), []byte("\n\n"))
				if !ok || !bytes.Contains(hdr, []byte("application/pkcs7-mime")) {
					t.Fatalf("openssl S/MIME output: %q", enc[:min(len(enc), 300)])
				}
				httpBody = b
			}
			micalg := strings.Replace(tt.md, "sha", "sha-", 1)
			o, err := as2.OpenMessage(contentType, httpBody, as2.OpenOptions{
				Cert: pki.Partner.Cert, Key: pki.Partner.Key, SignerCert: pki.Sender.Cert, MICAlgorithm: micalg,
			})
			if err != nil {
				t.Fatalf("OpenMessage: %v", err)
			}
			if !o.Encrypted || !o.Signed || !o.Signer.Equal(pki.Sender.Cert) || !bytes.Equal(o.Payload, body) {
				t.Errorf("Opened: encrypted %v signed %v payload equal %v", o.Encrypted, o.Signed, bytes.Equal(o.Payload, body))
			}
			want, _ := as2.ComputeMIC(micalg, entity)
			if o.MIC != want {
				t.Errorf("MIC %q, want %q (over the entity OpenSSL signed)", o.MIC, want)
			}

			// The same bytes over HTTP to the partner simulator.
			partner, err := as2partner.New(pki.PartnerConfig())
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(partner)
			defer srv.Close()
			req, _ := http.NewRequest(http.MethodPost, srv.URL, bytes.NewReader(httpBody))
			req.Header.Set("AS2-Version", "1.2")
			req.Header.Set("AS2-From", buyerID)
			req.Header.Set("AS2-To", supplierID)
			req.Header.Set("Message-ID", "<openssl-1@example>")
			req.Header.Set("Content-Type", contentType)
			req.Header.Set("Disposition-Notification-To", buyerID)
			req.Header.Set("Disposition-Notification-Options", "signed-receipt-protocol=optional, pkcs7-signature; signed-receipt-micalg=optional, "+micalg)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			mdnBody, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			mdn, err := as2.VerifyMDN(resp.Header.Get("Content-Type"), mdnBody, pki.Partner.Cert)
			if err != nil || !mdn.Processed() || mdn.ReceivedContentMIC != want {
				t.Fatalf("partner MDN = %+v, %v; want processed with MIC %q", mdn, err, want)
			}
			if st := partner.Stats(); st.Signed != 1 || st.Encrypted != 1 || partner.ControlNumbers()["000001001"] != 1 {
				t.Errorf("partner Stats = %+v", st)
			}
		})
	}
}

// opensslMDN answers an AS2 request the way a partner built on OpenSSL
// would: OpenSSL decrypts and verifies the request, the MIC is the SHA-256
// of what OpenSSL verified (hashed by openssl dgst), and OpenSSL signs the
// MDN. edit may change the report before signing; tamper the signed MDN.
func opensslMDN(t *testing.T, dir string, files as2test.Files, signer [2]string,
	edit func(report string) string, tamper func(mdn []byte) []byte) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		mdn, err := buildOpenSSLMDN(r, dir, files, signer, edit)
		if err != nil {
			t.Error(err)
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		if tamper != nil {
			mdn = tamper(mdn)
		}
		hdr, b, ok := bytes.Cut(mdn, []byte("\r\n\r\n"))
		if !ok {
			t.Errorf("openssl MDN has no header: %q", mdn)
			http.Error(w, "bad MDN", http.StatusInternalServerError)
			return
		}
		for _, line := range strings.Split(string(hdr), "\r\n") {
			if v, ok := strings.CutPrefix(line, "Content-Type: "); ok {
				w.Header().Set("Content-Type", v)
			}
		}
		w.Header().Set("AS2-From", supplierID)
		w.Header().Set("AS2-To", buyerID)
		w.Write(b)
	}
}

func buildOpenSSLMDN(r *http.Request, dir string, files as2test.Files, signer [2]string, edit func(string) string) ([]byte, error) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "req.der"), body, 0o600); err != nil {
		return nil, err
	}
	if _, err := runOpenSSL(dir, "cms", "-decrypt", "-inform", "DER", "-in", "req.der",
		"-recip", files.PartnerCert, "-inkey", files.PartnerKey, "-out", "req.eml"); err != nil {
		return nil, err
	}
	eml, err := os.ReadFile(filepath.Join(dir, "req.eml"))
	if err != nil {
		return nil, err
	}
	signed, sig, err := splitSignedErr(eml)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "req-signed.bin"), signed, 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "req-sig.der"), sig, 0o600); err != nil {
		return nil, err
	}
	if _, err := runOpenSSL(dir, "cms", "-verify", "-inform", "DER", "-in", "req-sig.der", "-content", "req-signed.bin",
		"-binary", "-CAfile", files.CA, "-out", "req-content.bin"); err != nil {
		return nil, err
	}
	digest, err := runOpenSSL(dir, "dgst", "-sha256", "-binary", "req-content.bin")
	if err != nil {
		return nil, err
	}
	mic := base64.StdEncoding.EncodeToString(digest) + ", sha-256"
	report := "Content-Type: multipart/report; report-type=disposition-notification; boundary=\"rpt\"\r\n\r\n" +
		"--rpt\r\nContent-Type: text/plain\r\n\r\nYour message was received and processed.\r\n" +
		"--rpt\r\nContent-Type: message/disposition-notification\r\n\r\n" +
		"Reporting-UA: openssl-partner\r\n" +
		"Original-Recipient: rfc822; " + supplierID + "\r\n" +
		"Final-Recipient: rfc822; " + supplierID + "\r\n" +
		"Original-Message-ID: " + r.Header.Get("Message-ID") + "\r\n" +
		"Disposition: automatic-action/MDN-sent-automatically; processed\r\n" +
		"Received-Content-MIC: " + mic + "\r\n" +
		"\r\n--rpt--\r\n"
	if edit != nil {
		report = edit(report)
	}
	if err := os.WriteFile(filepath.Join(dir, "report.txt"), []byte(report), 0o600); err != nil {
		return nil, err
	}
	if _, err := runOpenSSL(dir, "cms", "-sign", "-in", "report.txt", "-signer", signer[0], "-inkey", signer[1],
		"-md", "sha256", "-binary", "-crlfeol", "-out", "mdn.eml"); err != nil {
		return nil, err
	}
	return os.ReadFile(filepath.Join(dir, "mdn.eml"))
}

// TestInteropOpenSSLSignedMDN: an MDN signed by OpenSSL verifies; the same
// MDN with a wrong MIC, an altered report or an altered signature does not,
// each with its own typed error.
func TestInteropOpenSSLSignedMDN(t *testing.T) {
	dir, files := interopDir(t)
	partnerKey := [2]string{files.PartnerCert, files.PartnerKey}
	// flipSignatureByte changes one byte of the RSA signature value, which
	// ends the SignerInfo and so the DER, and writes the part back.
	flipSignatureByte := func(mdn []byte) []byte {
		m := boundaryRE.FindSubmatch(mdn)
		delim := append([]byte("--"), m[1]...)
		parts := bytes.Split(mdn, delim)
		hdr, b64, _ := bytes.Cut(parts[2], []byte("\r\n\r\n"))
		sig, err := base64.StdEncoding.DecodeString(strings.Join(strings.Fields(string(b64)), ""))
		if err != nil {
			t.Errorf("signature part: %v", err)
			return mdn
		}
		sig[len(sig)-5] ^= 0x01
		parts[2] = []byte(string(hdr) + "\r\n\r\n" + base64.StdEncoding.EncodeToString(sig) + "\r\n")
		return bytes.Join(parts, delim)
	}
	tests := []struct {
		name   string
		signer [2]string
		edit   func(string) string
		tamper func([]byte) []byte
		want   []error
	}{
		{"valid", partnerKey, nil, nil, nil},
		{"wrong MIC", partnerKey, func(r string) string {
			return regexp.MustCompile(`Received-Content-MIC: [^\r]+`).ReplaceAllString(r,
				"Received-Content-MIC: "+sha256B64([]byte("something else"))+", sha-256")
		}, nil, []error{as2.ErrMICMismatch}},
		{"altered report after signing", partnerKey, nil, func(mdn []byte) []byte {
			return bytes.Replace(mdn, []byte("received and processed"), []byte("received and Processed"), 1)
		}, []error{as2.ErrMDNSignature, as2.ErrSignature}},
		{"altered signature", partnerKey, nil, flipSignatureByte, []error{as2.ErrMDNSignature, as2.ErrSignature}},
		{"signed with another key", [2]string{files.SenderCert, files.SenderKey}, nil, nil, []error{as2.ErrCertNotPinned, deliver.ErrParked}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(opensslMDN(t, dir, files, tt.signer, tt.edit, tt.tamper))
			defer srv.Close()
			s, err := as2.NewSender(testPKI(t).SenderConfig(srv.URL))
			if err != nil {
				t.Fatal(err)
			}
			mdn, err := s.Send(context.Background(), testID, payload(t))
			if tt.want == nil {
				if err != nil || !mdn.Verified || !mdn.Processed() {
					t.Fatalf("Send = %+v, %v; want a verified processed MDN", mdn, err)
				}
				return
			}
			if !deliver.IsPermanent(err) && !errors.Is(err, deliver.ErrParked) {
				t.Errorf("Send error %v is neither permanent nor parked", err)
			}
			for _, w := range tt.want {
				if !errors.Is(err, w) {
					t.Errorf("Send error %v; want Is %v", err, w)
				}
			}
			if n := btoi(errors.Is(err, as2.ErrMICMismatch)) + btoi(errors.Is(err, as2.ErrMDNSignature)) + btoi(errors.Is(err, as2.ErrCertNotPinned)); n != 1 {
				t.Errorf("error %v should name exactly one cause", err)
			}
		})
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
