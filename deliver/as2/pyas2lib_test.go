package as2_test

// Interoperability with pyas2lib, an AS2 library nobody here wrote, run as
// a separate process: one long-lived Python helper per direction
// (testdata/pyas2lib/*.py, our own scripts), on loopback. pyas2lib itself
// (GPL) is never part of the repository: the tests find it through
// FLOODGATE_PYAS2LIB or in a shared/interop/pyas2lib-* folder next to the
// repository, and run it with Debian's /usr/bin/python3 and its
// python3-asn1crypto, python3-oscrypto and python3-openssl packages. Without
// them the tests skip, and fail under CI=true (.ci/run installs them).

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/deliver"
	"github.com/floodgate-go/floodgate/deliver/as2"
	"github.com/floodgate-go/floodgate/deliver/as2/as2partner"
	"github.com/floodgate-go/floodgate/deliver/as2/as2test"
	"github.com/floodgate-go/floodgate/internal/natstest"
)

// pythonPath is Debian's interpreter, by its full path: another python3 on
// the PATH (a pyenv build) cannot import Debian's oscrypto.
const pythonPath = "/usr/bin/python3"

// peerMissing skips the test, or fails it under CI=true, where the peer
// must run.
func peerMissing(t *testing.T, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("CI=true: .ci/run installs the pyas2lib peer; "+format, args...)
	}
	t.Skipf("pyas2lib peer not available (CI runs this test): "+format, args...)
}

// pyas2libDir returns the folder that holds the pyas2lib package:
// $FLOODGATE_PYAS2LIB, or else the newest shared/interop/pyas2lib-* folder
// found in a parent folder of the module root.
func pyas2libDir(t *testing.T) string {
	t.Helper()
	if d := os.Getenv("FLOODGATE_PYAS2LIB"); d != "" {
		if _, err := os.Stat(filepath.Join(d, "pyas2lib", "__init__.py")); err != nil {
			peerMissing(t, "FLOODGATE_PYAS2LIB=%q holds no pyas2lib package: %v", d, err)
		}
		return d
	}
	root, err := filepath.Abs("../..") // deliver/as2 -> module root
	if err != nil {
		t.Fatal(err)
	}
	for dir := filepath.Dir(root); ; dir = filepath.Dir(dir) {
		found, _ := filepath.Glob(filepath.Join(dir, "shared", "interop", "pyas2lib-*", "pyas2lib", "__init__.py"))
		if len(found) > 0 {
			sort.Strings(found)
			return filepath.Dir(filepath.Dir(found[len(found)-1]))
		}
		if filepath.Dir(dir) == dir {
			break
		}
	}
	peerMissing(t, "FLOODGATE_PYAS2LIB is unset and no shared/interop/pyas2lib-* folder is next to the module root %s", root)
	return ""
}

// pyHelper is one running Python helper: JSON lines in on stdin, out on
// stdout.
type pyHelper struct {
	stdin  io.WriteCloser
	lines  chan []byte
	mu     sync.Mutex
	stderr bytes.Buffer
}

func (h *pyHelper) Write(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.stderr.Write(p)
}

func (h *pyHelper) errOutput() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.stderr.String()
}

// startPyHelper runs testdata/pyas2lib/<script> with a configuration file
// naming the PEM files: key (our key and certificate), the peer's
// certificate and the CA. The process ends when the test does.
func startPyHelper(t *testing.T, script string, key []byte, peerCert, ca []byte) *pyHelper {
	t.Helper()
	lib := pyas2libDir(t)
	if _, err := os.Stat(pythonPath); err != nil {
		peerMissing(t, "%s: %v (Debian package python3)", pythonPath, err)
	}
	env := append(os.Environ(), "PYTHONPATH="+lib, "PYTHONDONTWRITEBYTECODE=1")
	probe := exec.Command(pythonPath, "-c", "import pyas2lib")
	probe.Env = env
	if out, err := probe.CombinedOutput(); err != nil {
		peerMissing(t, "%s cannot import pyas2lib from %s (Debian packages python3-asn1crypto python3-oscrypto python3-openssl): %v\n%s",
			pythonPath, lib, err, out)
	}
	scriptPath, err := filepath.Abs(filepath.Join("testdata", "pyas2lib", script))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfg, _ := json.Marshal(map[string]string{
		"key":       writeFile(t, dir, "key.pem", key),
		"peer_cert": writeFile(t, dir, "peer.pem", peerCert),
		"ca":        writeFile(t, dir, "ca.pem", ca),
	})
	cmd := exec.Command(pythonPath, scriptPath, writeFile(t, dir, "config.json", cfg))
	cmd.Env = env
	h := &pyHelper{lines: make(chan []byte, 16)}
	cmd.Stderr = h
	if h.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(h.lines)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 64<<20)
		for sc.Scan() {
			h.lines <- bytes.Clone(sc.Bytes())
		}
	}()
	t.Cleanup(func() {
		h.stdin.Close() // both helpers exit at the end of stdin
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("%s: %v\n%s", script, err, h.errOutput())
			}
		case <-time.After(30 * time.Second): // hang guard
			cmd.Process.Kill()
			<-done
			t.Errorf("%s did not exit after its stdin closed\n%s", script, h.errOutput())
		}
	})
	return h
}

// next decodes the helper's next output line into v.
func (h *pyHelper) next(t *testing.T, v any) {
	t.Helper()
	select {
	case line, ok := <-h.lines:
		if !ok {
			t.Fatalf("Python helper exited:\n%s", h.errOutput())
		}
		if err := json.Unmarshal(line, v); err != nil {
			t.Fatalf("Python helper wrote %q: %v", line, err)
		}
	case <-time.After(60 * time.Second): // hang guard
		t.Fatalf("no answer from the Python helper in 60s:\n%s", h.errOutput())
	}
}

// send writes one JSON request line to the helper.
func (h *pyHelper) send(t *testing.T, v any) {
	t.Helper()
	b, _ := json.Marshal(v)
	if _, err := h.stdin.Write(append(b, '\n')); err != nil {
		t.Fatalf("writing to the Python helper: %v\n%s", err, h.errOutput())
	}
}

// Payloads of the interop tests. Text payloads use CRLF line ends, MIME's
// canonical form: pyas2lib, like most implementations, canonicalises text.
func interopPayloads(t *testing.T) (x12, utf8Text, binary []byte) {
	x12 = bytes.ReplaceAll(payload(t), []byte("\n"), []byte("\r\n"))
	utf8Text = []byte("Bestellung Nr. 1001 für Zürich: 12 × Kaffeebohnen à 3,50 €\r\n" +
		"注文番号 1001: コーヒー豆 12 袋\r\nЗаказ 1001 — кофе, 12 мешков\r\n")
	binary = make([]byte, 4096)
	if _, err := rand.Read(binary); err != nil {
		t.Fatal(err)
	}
	// Every byte value, and the line ends and boundary-like text a MIME
	// parser might touch.
	for i := range 256 {
		binary[i] = byte(i)
	}
	copy(binary[256:], "\r\n--boundary\n\r\r\n.\r\nFrom x\n")
	return x12, utf8Text, binary
}

// pyReceived is what receiver.py reports about one request.
type pyReceived struct {
	MessageID  string `json:"message_id"`
	Status     string `json:"status"`
	Error      string `json:"error"`
	Signed     bool   `json:"signed"`
	Encrypted  bool   `json:"encrypted"`
	DigestAlg  string `json:"digest_alg"`
	EncAlg     string `json:"enc_alg"`
	KeyAlg     string `json:"key_alg"`
	MIC        string `json:"mic"`
	Payload    []byte `json:"payload"`
	MDNSigned  bool   `json:"mdn_signed"`
	Compressed bool   `json:"compressed"`
	MDNURL     string `json:"mdn_url"`
}

// TestInteropPyas2libReceives: floodgate's Sender → a pyas2lib receiver
// (Message().parse, Mdn().build), answering with a synchronous MDN. pyas2lib
// decrypts, decompresses, verifies and reads the payload byte for byte,
// computes the same MIC, and the Sender accepts its MDN, signed or not,
// checking its MIC. Compression is sent in both orders (RFC 5402), and the
// content key with RSA-OAEP as well as PKCS#1 v1.5; pyas2lib reads OAEP
// with SHA-1 only (rsa-oaep-sha1). Asynchronous MDNs: see
// testAsyncToPyas2lib.
func TestInteropPyas2libReceives(t *testing.T) {
	pki := testPKI(t)
	x12, utf8Text, binary := interopPayloads(t)
	rx := startPyHelper(t, "receiver.py",
		append(bytes.Clone(pki.Partner.KeyPEM), pki.Partner.CertPEM...), pki.Sender.CertPEM, pki.CAPEM)
	var hello struct{ Port int }
	rx.next(t, &hello)
	url := "http://127.0.0.1:" + strconv.Itoa(hello.Port) + "/as2"

	tests := []struct {
		name              string
		sign, encrypt     string // "" for none
		signedMDN         bool
		from, to          string
		contentType       string
		body              []byte
		compress          string // as2.Compress*
		keyTransport      string // as2.KeyTransport*, "" for the default
		wantDigest, wantC string // the digest pyas2lib read, the cipher asn1crypto read
		wantKeyAlg        string // the key transport asn1crypto read, when encrypted
		wantWarn          string // deliver.Warn* reason, or "" for a clean receipt
	}{
		{name: "sign sha256 + encrypt aes256-cbc, signed MDN, X12", sign: as2.SignSHA256, encrypt: as2.EncryptAES256CBC,
			signedMDN: true, body: x12, wantDigest: "sha256", wantC: "aes256_cbc"},
		{name: "sign sha384, unsigned MDN, UTF-8", sign: as2.SignSHA384, contentType: "text/plain; charset=utf-8",
			body: utf8Text, wantDigest: "sha384"},
		{name: "sign sha512 + encrypt aes128-cbc, signed MDN, binary", sign: as2.SignSHA512, encrypt: as2.EncryptAES128CBC,
			signedMDN: true, contentType: "application/octet-stream", body: binary, wantDigest: "sha512", wantC: "aes128_cbc"},
		{name: "sign sha1 + encrypt 3des, signed MDN, X12", sign: as2.SignSHA1, encrypt: as2.Encrypt3DES,
			signedMDN: true, body: x12, wantDigest: "sha1", wantC: "tripledes_3key"},
		// pyas2lib omits the MIC from the MDN of an unsigned message: with
		// a signed MDN asked for, that is delivered with a warning.
		{name: "encrypt aes256-cbc only, signed MDN without MIC, binary", encrypt: as2.EncryptAES256CBC,
			signedMDN: true, contentType: "application/octet-stream", body: binary, wantC: "aes256_cbc",
			wantWarn: deliver.WarnMICMissing},
		{name: "plain, unsigned MDN, AS2 names with spaces, UTF-8", from: "NORTHWIND RETAIL", to: "BLUE WATER HG",
			contentType: "text/plain; charset=utf-8", body: utf8Text},

		// Compression (RFC 5402), each order, with and without sign and
		// encrypt: pyas2lib decompresses, and its MIC equals ours.
		{name: "compress-sign, sign sha256 + encrypt aes256-cbc, signed MDN, X12", compress: as2.CompressBeforeSign,
			sign: as2.SignSHA256, encrypt: as2.EncryptAES256CBC, signedMDN: true, body: x12, wantDigest: "sha256", wantC: "aes256_cbc"},
		{name: "sign-compress, sign sha384 + encrypt aes128-cbc, signed MDN, binary", compress: as2.CompressAfterSign,
			sign: as2.SignSHA384, encrypt: as2.EncryptAES128CBC, signedMDN: true, contentType: "application/octet-stream",
			body: binary, wantDigest: "sha384", wantC: "aes128_cbc"},
		{name: "compress-sign, sign sha512, unsigned MDN, UTF-8", compress: as2.CompressBeforeSign, sign: as2.SignSHA512,
			contentType: "text/plain; charset=utf-8", body: utf8Text, wantDigest: "sha512"},
		{name: "sign-compress, sign sha256, signed MDN, X12", compress: as2.CompressAfterSign, sign: as2.SignSHA256,
			signedMDN: true, body: x12, wantDigest: "sha256"},
		{name: "compress only, unsigned MDN, binary", compress: as2.CompressBeforeSign,
			contentType: "application/octet-stream", body: binary},
		{name: "sign-compress + encrypt aes256-cbc, no signature, signed MDN without MIC, X12", compress: as2.CompressAfterSign,
			encrypt: as2.EncryptAES256CBC, signedMDN: true, body: x12, wantC: "aes256_cbc", wantWarn: deliver.WarnMICMissing},

		// RSA-OAEP key transport (RFC 3560): pyas2lib decrypts the SHA-1
		// form, alone and with a signature and compression.
		{name: "OAEP sha1: sign sha256 + encrypt aes256-cbc, signed MDN, X12", keyTransport: as2.KeyTransportOAEPSHA1,
			sign: as2.SignSHA256, encrypt: as2.EncryptAES256CBC, signedMDN: true, body: x12, wantDigest: "sha256",
			wantC: "aes256_cbc", wantKeyAlg: "rsaes_oaep"},
		{name: "OAEP sha1: compress-sign, sign sha384 + encrypt aes128-cbc, unsigned MDN, binary",
			keyTransport: as2.KeyTransportOAEPSHA1, compress: as2.CompressBeforeSign, sign: as2.SignSHA384,
			encrypt: as2.EncryptAES128CBC, contentType: "application/octet-stream", body: binary, wantDigest: "sha384",
			wantC: "aes128_cbc", wantKeyAlg: "rsaes_oaep"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := pki.SenderConfig(url)
			cfg.SigningCert, cfg.SigningKey, cfg.EncryptionCert, cfg.MDNCert = nil, nil, nil, nil
			if tt.sign != "" {
				cfg.SigningCert, cfg.SigningKey, cfg.SignAlgorithm = pki.Sender.Cert, pki.Sender.Key, tt.sign
			}
			if tt.encrypt != "" {
				cfg.EncryptionCert, cfg.EncryptAlgorithm = pki.Partner.Cert, tt.encrypt
			}
			if tt.signedMDN {
				cfg.MDNCert = pki.Partner.Cert
			}
			if tt.from != "" {
				cfg.From, cfg.To = tt.from, tt.to
			}
			cfg.ContentType = tt.contentType
			cfg.Compression, cfg.KeyTransport = tt.compress, tt.keyTransport
			s, err := as2.NewSender(cfg)
			if err != nil {
				t.Fatal(err)
			}
			id := "7c1e6a52-0d7b-4f3e-9a51-3b2c4d5e6f" + strconv.Itoa(10+i)
			out, err := s.Build(id, tt.body) // the MIC the Send below computes
			if err != nil {
				t.Fatal(err)
			}
			mdn, err := s.Send(context.Background(), id, tt.body)
			var got pyReceived
			rx.next(t, &got)

			// pyas2lib's side: it read what we sent.
			if got.Status != "processed" || got.Error != "" {
				t.Fatalf("pyas2lib: status %q, error %s", got.Status, got.Error)
			}
			if got.MessageID != strings.Trim(out.MessageID, "<>") {
				t.Errorf("pyas2lib read Message-ID %q, sent %s", got.MessageID, out.MessageID)
			}
			if !bytes.Equal(got.Payload, tt.body) {
				t.Errorf("pyas2lib read a payload of %d bytes, not the %d sent: %q", len(got.Payload), len(tt.body),
					got.Payload[:min(len(got.Payload), 120)])
			}
			if got.Signed != (tt.sign != "") || got.Encrypted != (tt.encrypt != "") ||
				got.DigestAlg != tt.wantDigest || got.EncAlg != tt.wantC || got.MDNSigned != tt.signedMDN {
				t.Errorf("pyas2lib read signed %v (%q) encrypted %v (%q), signed its MDN %v",
					got.Signed, got.DigestAlg, got.Encrypted, got.EncAlg, got.MDNSigned)
			}
			if got.Compressed != (tt.compress != "") {
				t.Errorf("pyas2lib read compressed %v; sent %q", got.Compressed, tt.compress)
			}
			if wantKey := cmp.Or(tt.wantKeyAlg, "rsaes_pkcs1v15"); tt.encrypt != "" && got.KeyAlg != wantKey {
				t.Errorf("pyas2lib read key transport %q; want %q", got.KeyAlg, wantKey)
			}
			// The MIC, computed independently on both sides, is the same.
			if tt.sign != "" {
				digest, _, _ := as2.ParseMIC(out.MIC)
				if got.MIC != digest {
					t.Errorf("pyas2lib's MIC %q, ours %q", got.MIC, out.MIC)
				}
			}

			// Our side: the Sender accepted pyas2lib's MDN.
			if tt.wantWarn != "" {
				var w *deliver.Warning
				if !errors.As(err, &w) || w.Reason != tt.wantWarn {
					t.Fatalf("Send = %v; want a warning %q", err, tt.wantWarn)
				}
			} else if err != nil {
				t.Fatalf("Send: %v", err)
			}
			if mdn == nil || !mdn.Processed() || mdn.Signed != tt.signedMDN || mdn.Verified != tt.signedMDN {
				t.Fatalf("MDN = %+v; want processed, signed and verified %v", mdn, tt.signedMDN)
			}
			if tt.sign != "" && mdn.ReceivedContentMIC == "" {
				t.Error("pyas2lib's MDN for a signed message has no Received-Content-MIC")
			}
		})
	}

	// Imperfect and negative receipts from pyas2lib, signed sha256 and
	// encrypted aes256-cbc, a signed MDN asked for.
	receipts := []struct {
		name            string
		path            string // receiver.py: "/unsigned-mdn" has no signing key
		requireSigned   bool
		signer          as2test.Identity
		wantStatus      string // pyas2lib's disposition
		wantWarn        string
		wantErr         error // with a permanent failure
		wantSigned      bool  // the MDN
		wantMICReturned bool
	}{
		{name: "unsigned MDN to an optional request: warning", path: "/unsigned-mdn", signer: pki.Sender,
			wantStatus: "processed", wantWarn: deliver.WarnMDNUnsigned, wantMICReturned: true},
		{name: "unsigned MDN to a required request: permanent", path: "/unsigned-mdn", requireSigned: true,
			signer: pki.Sender, wantStatus: "processed", wantErr: as2.ErrMDNUnsigned, wantMICReturned: true},
		{name: "signed by a certificate pyas2lib does not expect: its error MDN is permanent", path: "/as2",
			signer: other, wantStatus: "processed/Error", wantErr: as2.ErrNotProcessed, wantSigned: true},
	}
	for i, tt := range receipts {
		t.Run(tt.name, func(t *testing.T) {
			cfg := pki.SenderConfig("http://127.0.0.1:" + strconv.Itoa(hello.Port) + tt.path)
			cfg.SigningCert, cfg.SigningKey, cfg.RequireSignedMDN = tt.signer.Cert, tt.signer.Key, tt.requireSigned
			s, err := as2.NewSender(cfg)
			if err != nil {
				t.Fatal(err)
			}
			id := "7c1e6a52-0d7b-4f3e-9a51-3b2c4d5e6f" + strconv.Itoa(50+i)
			mdn, err := s.Send(context.Background(), id, x12)
			var got pyReceived
			rx.next(t, &got)
			if got.Status != tt.wantStatus || got.MDNSigned != tt.wantSigned {
				t.Fatalf("pyas2lib: status %q (want %q), error %s, MDN signed %v", got.Status, tt.wantStatus, got.Error, got.MDNSigned)
			}
			switch {
			case tt.wantWarn != "":
				var w *deliver.Warning
				if !errors.As(err, &w) || w.Reason != tt.wantWarn {
					t.Fatalf("Send = %v; want a warning %q", err, tt.wantWarn)
				}
			case !deliver.IsPermanent(err) || !errors.Is(err, tt.wantErr):
				t.Fatalf("Send = %v; want a permanent failure, Is %v", err, tt.wantErr)
			}
			if mdn == nil || mdn.Signed != tt.wantSigned || mdn.Verified != tt.wantSigned ||
				(mdn.ReceivedContentMIC != "") != tt.wantMICReturned {
				t.Errorf("MDN = %+v; want signed and verified %v, a MIC %v", mdn, tt.wantSigned, tt.wantMICReturned)
			}
		})
	}

	t.Run("async MDN", func(t *testing.T) { testAsyncToPyas2lib(t, rx, pki, hello.Port) })
}

// pySent is what sender.py reports about one message.
type pySent struct {
	MessageID  string `json:"message_id"`
	MIC        string `json:"mic"`
	HTTPStatus int    `json:"http_status"`
	MDNStatus  string `json:"mdn_status"`
	MDNDetail  string `json:"mdn_detail"`
	MDNSigned  bool   `json:"mdn_signed"`
	MDNMIC     string `json:"mdn_mic"`
	Error      string `json:"error"`
}

// recorder serves an as2partner and opens each request body again with
// [as2.OpenMessage], the way the partner did, to record the payload the
// partner processed.
type recorder struct {
	partner *as2partner.Partner
	opts    as2.OpenOptions
	mu      sync.Mutex
	got     [][]byte
	bodies  [][]byte // the request bodies, as received
}

func (rec *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	rec.partner.ServeHTTP(w, r)
	var p []byte
	if o, err := as2.OpenMessage(r.Header.Get("Content-Type"), body, rec.opts); err == nil {
		p = o.Payload
	}
	rec.mu.Lock()
	rec.got = append(rec.got, p)
	rec.bodies = append(rec.bodies, body)
	rec.mu.Unlock()
}

// TestInteropPyas2libSends: a pyas2lib sender (Message().build) → the
// as2partner receiver. as2partner decrypts, decompresses, verifies and
// processes what pyas2lib built, byte for byte, and pyas2lib accepts its
// MDN (Mdn().parse: signature and MIC checked; a MIC mismatch would read
// "processed/warning"). pyas2lib compresses before signing; its key
// transport is PKCS#1 v1.5 or RSA-OAEP (rsaes_oaep, SHA-1). An
// asynchronous MDN (mdn_mode ASYNC) is posted by as2partner to a loopback
// URL this test serves, allowed in its Async.AllowURLs, and handed to
// pyas2lib to parse.
func TestInteropPyas2libSends(t *testing.T) {
	pki := testPKI(t)
	x12, utf8Text, binary := interopPayloads(t)
	tx := startPyHelper(t, "sender.py",
		append(bytes.Clone(pki.Sender.KeyPEM), pki.Sender.CertPEM...), pki.Partner.CertPEM, pki.CAPEM)

	tests := []struct {
		name        string
		sign        string // pyas2lib digest_alg, "" for unsigned
		encrypt     string // pyas2lib enc_alg, "" for unencrypted
		compress    bool
		keyEnc      string // pyas2lib key_enc_alg, "" for rsaes_pkcs1v15
		mdn         string // "SYNC", "ASYNC", or "" for no MDN
		mdnDigest   string // signed-receipt-micalg asked for, "" for an unsigned MDN
		from, to    string
		contentType string
		body        []byte
		signer      *as2test.Identity // another signing identity, which as2partner refuses
	}{
		{name: "sign sha256 + encrypt aes_256_cbc, signed MDN, X12", sign: "sha256", encrypt: "aes_256_cbc",
			mdn: "SYNC", mdnDigest: "sha256", body: x12},
		{name: "sign sha1 + encrypt tripledes_192_cbc, unsigned MDN, UTF-8", sign: "sha1", encrypt: "tripledes_192_cbc",
			mdn: "SYNC", contentType: "text/plain; charset=utf-8", body: utf8Text},
		{name: "sign sha384 + encrypt aes_128_cbc, signed MDN, binary", sign: "sha384", encrypt: "aes_128_cbc",
			mdn: "SYNC", mdnDigest: "sha384", contentType: "application/octet-stream", body: binary},
		{name: "sign sha512, signed MDN, X12", sign: "sha512", mdn: "SYNC", mdnDigest: "sha512", body: x12},
		{name: "encrypt aes_256_cbc only, signed MDN, binary", encrypt: "aes_256_cbc", mdn: "SYNC", mdnDigest: "sha256",
			contentType: "application/octet-stream", body: binary},
		{name: "plain, unsigned MDN, AS2 names with spaces, UTF-8", mdn: "SYNC", from: "NORTHWIND RETAIL", to: "BLUE WATER HG",
			contentType: "text/plain; charset=utf-8", body: utf8Text},
		{name: "sign sha256, no MDN asked for, X12", sign: "sha256", body: x12},
		{name: "signed by a certificate as2partner does not expect: error MDN", sign: "sha256", encrypt: "aes_256_cbc",
			mdn: "SYNC", mdnDigest: "sha256", body: x12, signer: &other},

		// Compression (pyas2lib compresses before signing).
		{name: "compress, sign sha256 + encrypt aes_256_cbc, signed MDN, X12", compress: true, sign: "sha256",
			encrypt: "aes_256_cbc", mdn: "SYNC", mdnDigest: "sha256", body: x12},
		{name: "compress, sign sha1, unsigned MDN, UTF-8", compress: true, sign: "sha1", mdn: "SYNC",
			contentType: "text/plain; charset=utf-8", body: utf8Text},
		{name: "compress only, signed MDN, binary", compress: true, mdn: "SYNC", mdnDigest: "sha512",
			contentType: "application/octet-stream", body: binary},

		// RSA-OAEP key transport.
		{name: "OAEP: sign sha256 + encrypt aes_256_cbc, signed MDN, X12", keyEnc: "rsaes_oaep", sign: "sha256",
			encrypt: "aes_256_cbc", mdn: "SYNC", mdnDigest: "sha256", body: x12},
		{name: "OAEP: compress + encrypt aes_128_cbc, unsigned MDN, binary", keyEnc: "rsaes_oaep", compress: true,
			encrypt: "aes_128_cbc", mdn: "SYNC", contentType: "application/octet-stream", body: binary},

		// Asynchronous MDNs, posted by as2partner to the test's URL.
		{name: "async: sign sha256 + encrypt aes_256_cbc, signed MDN, X12", sign: "sha256", encrypt: "aes_256_cbc",
			mdn: "ASYNC", mdnDigest: "sha256", body: x12},
		{name: "async: compress, sign sha384, signed MDN, binary", compress: true, sign: "sha384", mdn: "ASYNC",
			mdnDigest: "sha384", contentType: "application/octet-stream", body: binary},
		{name: "async: plain, unsigned MDN, AS2 names with spaces, UTF-8", mdn: "ASYNC", from: "NORTHWIND RETAIL",
			to: "BLUE WATER HG", contentType: "text/plain; charset=utf-8", body: utf8Text},
	}
	catcher := &asyncMDNCatcher{mdns: make(chan caughtMDN, 1)}
	receipts := httptest.NewServer(catcher)
	defer receipts.Close()
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			from, to := buyerID, supplierID
			if tt.from != "" {
				from, to = tt.from, tt.to
			}
			pcfg := pki.PartnerConfig()
			pcfg.AS2ID, pcfg.RequireSigned, pcfg.RequireEncrypted = to, tt.sign != "", tt.encrypt != ""
			pcfg.Async = as2partner.AsyncConfig{AllowURLs: []string{receipts.URL + "/mdn"}}
			partner, err := as2partner.New(pcfg)
			if err != nil {
				t.Fatal(err)
			}
			rec := &recorder{partner: partner, opts: as2.OpenOptions{Cert: pki.Partner.Cert, Key: pki.Partner.Key, SignerCert: pki.Sender.Cert}}
			srv := httptest.NewServer(rec)
			defer srv.Close()

			req := map[string]any{
				"url": srv.URL + "/as2", "from": from, "to": to,
				"sign": tt.sign != "", "digest_alg": tt.sign, "encrypt": tt.encrypt != "", "enc_alg": tt.encrypt,
				"content_type": tt.contentType, "payload": base64.StdEncoding.EncodeToString(tt.body),
				"compress": tt.compress, "key_enc_alg": tt.keyEnc,
			}
			if tt.mdn != "" {
				req["mdn_mode"] = tt.mdn
			}
			if tt.mdn == "ASYNC" {
				req["mdn_url"] = receipts.URL + "/mdn/" + strconv.Itoa(i)
			}
			if tt.mdnDigest != "" {
				req["mdn_digest_alg"] = tt.mdnDigest
			}
			if tt.signer != nil {
				req["sign_key"] = writeFile(t, t.TempDir(), "signer.pem", append(bytes.Clone(tt.signer.KeyPEM), tt.signer.CertPEM...))
			}
			tx.send(t, req)
			var got pySent
			tx.next(t, &got)
			if got.Error != "" {
				t.Fatalf("sender.py: %s", got.Error)
			}
			if got.HTTPStatus != http.StatusOK {
				t.Fatalf("as2partner answered HTTP %d", got.HTTPStatus)
			}
			if tt.mdn == "ASYNC" {
				// No MDN in the answer: as2partner posts it to our URL,
				// and pyas2lib parses it there.
				if got.MDNStatus != "" {
					t.Fatalf("asynchronous MDN asked for; pyas2lib read one in the answer: %q", got.MDNStatus)
				}
				m := catcher.next(t)
				hdr := map[string]string{}
				for k := range m.header {
					hdr[k] = m.header.Get(k)
				}
				tx.send(t, map[string]any{"mdn": map[string]any{"message_id": got.MessageID, "headers": hdr,
					"body": base64.StdEncoding.EncodeToString(m.body)}})
				var parsed pySent
				tx.next(t, &parsed)
				if parsed.Error != "" {
					t.Fatalf("sender.py: %s", parsed.Error)
				}
				got.MDNStatus, got.MDNDetail, got.MDNSigned, got.MDNMIC = parsed.MDNStatus, parsed.MDNDetail, parsed.MDNSigned, parsed.MDNMIC
				natstest.Eventually(t, 10*time.Second, func() bool { return partner.AsyncStats().Posted == 1 },
					"as2partner AsyncStats %+v; want 1 posted", partner.AsyncStats())
			}

			st := partner.Stats()
			if tt.signer != nil {
				// Refused with a signed error MDN, which pyas2lib verifies
				// and reads as an error.
				if st.ErrorMDNs != 1 || st.Processed != 0 || st.SignedMDNs != 1 ||
					!strings.HasPrefix(got.MDNStatus, "processed/error") || !strings.Contains(got.MDNDetail, "authentication-failed") {
					t.Errorf("as2partner Stats = %+v; pyas2lib read the MDN as %q (%s)", st, got.MDNStatus, got.MDNDetail)
				}
				return
			}
			// as2partner's side: it processed exactly what pyas2lib sent.
			if st.Processed != 1 || st.ErrorMDNs != 0 || partner.Received()["<"+got.MessageID+">"] != 1 {
				t.Fatalf("as2partner Stats = %+v, Received = %v; want %s processed", st, partner.Received(), got.MessageID)
			}
			if st.Signed != b2i(tt.sign != "") || st.Encrypted != b2i(tt.encrypt != "") || st.Compressed != b2i(tt.compress) {
				t.Errorf("as2partner saw signed %d, encrypted %d, compressed %d", st.Signed, st.Encrypted, st.Compressed)
			}
			rec.mu.Lock()
			recorded, bodies := rec.got, rec.bodies
			rec.mu.Unlock()
			if tt.encrypt != "" && len(bodies) == 1 && bytes.Contains(bodies[0], oidRSAESOAEP) != (tt.keyEnc == "rsaes_oaep") {
				t.Errorf("pyas2lib's envelope names id-RSAES-OAEP: %v; key_enc_alg %q", !(tt.keyEnc == "rsaes_oaep"), tt.keyEnc)
			}
			if len(recorded) != 1 || !bytes.Equal(recorded[0], tt.body) {
				t.Errorf("as2partner processed %d payloads; the first is not the %d bytes sent", len(recorded), len(tt.body))
			}

			// pyas2lib's side: it accepted as2partner's MDN.
			if tt.mdn == "" {
				if got.MDNStatus != "" {
					t.Errorf("no MDN was asked for; pyas2lib read one: %q", got.MDNStatus)
				}
				return
			}
			if got.MDNStatus != "processed" {
				t.Fatalf("pyas2lib read the MDN as %q (%s)", got.MDNStatus, got.MDNDetail)
			}
			if got.MDNSigned != (tt.mdnDigest != "") || (st.SignedMDNs == 1) != (tt.mdnDigest != "") {
				t.Errorf("MDN signed %v (as2partner counted %d); signed asked for: %v", got.MDNSigned, st.SignedMDNs, tt.mdnDigest != "")
			}
			// The MIC, computed independently on both sides, is the same.
			if tt.sign != "" {
				digest, _, err := as2.ParseMIC(got.MDNMIC)
				if err != nil || digest != got.MIC {
					t.Errorf("as2partner's Received-Content-MIC %q (%v); pyas2lib's MIC %q", got.MDNMIC, err, got.MIC)
				}
			}
		})
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
