package as2_test

import (
	"bytes"
	"compress/zlib"
	"context"
	"errors"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/floodgate-go/floodgate/deliver/as2"
	"github.com/floodgate-go/floodgate/deliver/as2/as2partner"
	"github.com/smallstep/pkcs7"
)

// x12Control is the interchange control number (ISA13) of payload(t).
const x12Control = "000001001"

// layers opens out's body layer by layer, with the partner's key, and
// returns the smime-type (or media type) of each layer from the outside
// in, and the entity that each signature signed. It uses the package's
// Decrypt, Decompress and VerifySigned one layer at a time, so it checks
// the order of the layers, not OpenMessage.
func layers(t *testing.T, out *as2.Outbound) (names []string, signed []byte) {
	t.Helper()
	pki := testPKI(t)
	ct, body := out.Header.Get("Content-Type"), out.Body
	for range 6 {
		mt, params, err := mime.ParseMediaType(ct)
		if err != nil {
			t.Fatal(err)
		}
		var inner []byte
		switch {
		case mt == "application/pkcs7-mime" && params["smime-type"] == "compressed-data":
			inner, err = as2.Decompress(body, 0)
		case mt == "application/pkcs7-mime":
			inner, err = as2.Decrypt(body, pki.Partner.Cert, pki.Partner.Key)
		case mt == "multipart/signed":
			inner, _, err = as2.VerifySigned(ct, body, pki.Sender.Cert)
			signed = inner
		default:
			return append(names, mt), signed
		}
		if err != nil {
			t.Fatalf("layer %s: %v", ct, err)
		}
		names = append(names, mt+";"+params["smime-type"])
		hdr, b, ok := bytes.Cut(inner, []byte("\r\n\r\n"))
		if !ok {
			t.Fatalf("inner entity without header: %q", inner[:min(len(inner), 100)])
		}
		ct, body = "", b
		for _, line := range strings.Split(string(hdr), "\r\n") {
			if k, v, _ := strings.Cut(line, ": "); strings.EqualFold(k, "Content-Type") {
				ct = v
			}
		}
	}
	t.Fatal("too many layers")
	return nil, nil
}

// TestSenderCompressionOrders: each Config.Compression order, signed,
// with and without encryption, builds the layers in the named order, the
// MIC covers what RFC 5402 §4 says, and as2partner decompresses the
// payload and returns the same MIC.
func TestSenderCompressionOrders(t *testing.T) {
	body := payload(t)
	entity := append([]byte("Content-Type: application/EDI-X12\r\nContent-Transfer-Encoding: binary\r\n\r\n"), body...)
	const (
		enc  = "application/pkcs7-mime;enveloped-data"
		zip  = "application/pkcs7-mime;compressed-data"
		sig  = "multipart/signed;"
		edi  = "application/edi-x12"
		none = ""
	)
	for _, tt := range []struct {
		name        string
		compression string
		sign, crypt bool
		want        []string
		micOverZip  bool // the MIC covers the compressed entity
	}{
		{"compress-sign", as2.CompressBeforeSign, true, false, []string{sig, zip, edi}, true},
		{"compress-sign-encrypt", as2.CompressBeforeSign, true, true, []string{enc, sig, zip, edi}, true},
		{"sign-compress", as2.CompressAfterSign, true, false, []string{zip, sig, edi}, false},
		{"sign-compress-encrypt", as2.CompressAfterSign, true, true, []string{enc, zip, sig, edi}, false},
		{"compress only", as2.CompressBeforeSign, false, false, []string{zip, edi}, false},
		{"compress-encrypt", as2.CompressAfterSign, false, true, []string{enc, zip, edi}, false},
		{"none", as2.CompressNone, true, true, []string{enc, sig, edi}, false},
		{"plain", none, false, false, []string{edi}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			partner, s := securePair(t, func(c *as2partner.Config) {
				c.RequireSigned, c.RequireEncrypted = tt.sign, tt.crypt
			}, func(c *as2.Config) {
				c.Compression = tt.compression
				if !tt.sign {
					c.SigningCert, c.SigningKey = nil, nil
				}
				if !tt.crypt {
					c.EncryptionCert = nil
				}
			})
			out, err := s.Build(testID, body)
			if err != nil {
				t.Fatal(err)
			}
			if v := out.Header.Get("AS2-Version"); v != "1.2" {
				t.Errorf("AS2-Version %q, want 1.2 (compression supported both ways)", v)
			}
			names, signed := layers(t, out)
			if strings.Join(names, " | ") != strings.Join(tt.want, " | ") {
				t.Fatalf("layers %q, want %q", names, tt.want)
			}
			// RFC 5402 §4, RFC 4130 §7.3.1.
			wantMIC := entityMIC("sha-256", body)
			switch {
			case tt.micOverZip:
				if !bytes.HasPrefix(signed, []byte("Content-Type: application/pkcs7-mime; smime-type=compressed-data")) {
					t.Fatalf("signed entity is not the compressed one: %q", signed[:60])
				}
				wantMIC, _ = as2.ComputeMIC("sha-256", signed)
			case tt.sign && !bytes.Equal(signed, entity):
				t.Fatalf("signed entity is not the payload entity: %q", signed[:min(len(signed), 80)])
			case !tt.sign && !tt.crypt && tt.compression == none:
				wantMIC, _ = as2.ComputeMIC("sha-256", body)
			}
			if out.MIC != wantMIC {
				t.Errorf("MIC %q, want %q", out.MIC, wantMIC)
			}
			mdn, err := s.Send(context.Background(), testID, body)
			if err != nil {
				t.Fatalf("Send: %v", err)
			}
			if mdn.ReceivedContentMIC != wantMIC {
				t.Errorf("partner MIC %q, want %q", mdn.ReceivedContentMIC, wantMIC)
			}
			st := partner.Stats()
			if (st.Compressed == 1) != (tt.compression != none) || partner.ControlNumbers()[x12Control] != 1 {
				t.Errorf("partner Stats %+v, control numbers %v", st, partner.ControlNumbers())
			}
		})
	}
}

// TestConfigCompression: an unknown order is a configuration error naming
// the field.
func TestConfigCompression(t *testing.T) {
	cfg := testPKI(t).SenderConfig("https://as2.example.com/as2")
	cfg.Compression = "zip"
	_, err := as2.NewSender(cfg)
	if !errors.Is(err, as2.ErrCompression) || !strings.Contains(err.Error(), "Config.Compression") {
		t.Fatalf("NewSender = %v, want ErrCompression naming Config.Compression", err)
	}
}

// post sends body to the partner as an AS2 request asking for a signed MDN
// and returns the MDN, verified with the partner's certificate.
func post(t *testing.T, url, contentType string, body []byte) *as2.MDN {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("AS2-Version", "1.2")
	req.Header.Set("AS2-From", buyerID)
	req.Header.Set("AS2-To", supplierID)
	req.Header.Set("Message-ID", "<vector-1@example>")
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("Disposition-Notification-To", buyerID)
	req.Header.Set("Disposition-Notification-Options", "signed-receipt-protocol=optional, pkcs7-signature; signed-receipt-micalg=optional, sha-256")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if v := resp.Header.Get("AS2-Version"); v != "1.2" {
		t.Errorf("MDN AS2-Version %q, want 1.2 (compression supported: RFC 5402)", v)
	}
	mdnBody, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		t.Fatal(err)
	}
	mdn, err := as2.VerifyMDN(resp.Header.Get("Content-Type"), mdnBody, testPKI(t).Partner.Cert)
	if err != nil {
		t.Fatalf("MDN: %v (HTTP %d %q)", err, resp.StatusCode, mdnBody[:min(len(mdnBody), 300)])
	}
	return mdn
}

// openPartner starts a partner that accepts unsigned, unencrypted
// messages too.
func openPartner(t *testing.T, mod func(*as2partner.Config)) (*as2partner.Partner, string) {
	t.Helper()
	cfg := testPKI(t).PartnerConfig()
	cfg.RequireSigned, cfg.RequireEncrypted = false, false
	if mod != nil {
		mod(&cfg)
	}
	p, srv := startPartner(t, cfg)
	return p, srv.URL
}

const compressedType = `application/pkcs7-mime; smime-type=compressed-data; name="smime.p7z"`

// TestPartnerCompressedOnly is a regression test: a message compressed and
// nothing else got "processed/error: decryption-failed". It is processed,
// with the MIC over the uncompressed entity, headers included (RFC 5402 §4).
func TestPartnerCompressedOnly(t *testing.T) {
	body := payload(t)
	entity := append([]byte("Content-Type: application/EDI-X12\r\nContent-Transfer-Encoding: binary\r\n\r\n"), body...)
	der, err := as2.Compress(entity)
	if err != nil {
		t.Fatal(err)
	}
	partner, url := openPartner(t, nil)
	mdn := post(t, url, compressedType, der)
	if !mdn.Processed() || mdn.ReceivedContentMIC != entityMIC("sha-256", body) {
		t.Fatalf("MDN %q MIC %q, want processed with %q", mdn.DispositionField, mdn.ReceivedContentMIC, entityMIC("sha-256", body))
	}
	if st := partner.Stats(); st.Compressed != 1 || partner.ControlNumbers()[x12Control] != 1 {
		t.Errorf("Stats %+v, control numbers %v", st, partner.ControlNumbers())
	}
}

// TestPartnerCompressedInsideSignature is a regression test: a compressed
// payload inside a signature was acknowledged processed without being
// decompressed. The payload is decompressed, and the MIC covers the
// signed compressed entity (RFC 5402 §4).
func TestPartnerCompressedInsideSignature(t *testing.T) {
	pki := testPKI(t)
	body := payload(t)
	entity := append([]byte("Content-Type: application/EDI-X12\r\nContent-Transfer-Encoding: binary\r\n\r\n"), body...)
	der, err := as2.Compress(entity)
	if err != nil {
		t.Fatal(err)
	}
	zipped := append([]byte("Content-Type: "+compressedType+"\r\nContent-Transfer-Encoding: binary\r\n\r\n"), der...)
	ct, signed, err := as2.SignEntity(zipped, pki.Sender.Cert, pki.Sender.Key, as2.SignSHA256)
	if err != nil {
		t.Fatal(err)
	}
	partner, url := openPartner(t, nil)
	mdn := post(t, url, ct, signed)
	wantMIC, _ := as2.ComputeMIC("sha-256", zipped)
	if !mdn.Processed() || mdn.ReceivedContentMIC != wantMIC {
		t.Fatalf("MDN %q MIC %q, want processed with %q", mdn.DispositionField, mdn.ReceivedContentMIC, wantMIC)
	}
	if st := partner.Stats(); st.Compressed != 1 || st.Signed != 1 || partner.ControlNumbers()[x12Control] != 1 {
		t.Errorf("Stats %+v, control numbers %v: the payload was not decompressed", st, partner.ControlNumbers())
	}
}

// zlibBomb returns a compressed-data body of 16 MiB of zeros, built once.
var zlibBomb = sync.OnceValue(func() []byte {
	var z bytes.Buffer
	w := zlib.NewWriter(&z)
	zero := make([]byte, 1<<20)
	for range 16 { // 16 MiB
		w.Write(zero)
	}
	w.Close()
	der, err := as2.CompressedDataForTest(z.Bytes())
	if err != nil {
		panic(err)
	}
	return der
})

// TestDecompressZlibBomb: 16 MiB of zeros in about 16 KiB of zlib stops
// at the bound, having allocated little more than the bound, and
// as2partner answers "decompression-failed".
func TestDecompressZlibBomb(t *testing.T) {
	bomb := zlibBomb()
	if len(bomb) > 1<<20 {
		t.Fatalf("bomb is %d bytes", len(bomb))
	}
	const limit = 1 << 20
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := as2.Decompress(bomb, limit)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, as2.ErrDecompression) || !errors.Is(err, as2.ErrTooLarge) {
		t.Fatalf("Decompress = %v, want ErrDecompression and ErrTooLarge", err)
	}
	alloc := after.TotalAlloc - before.TotalAlloc
	if alloc > 16*limit {
		t.Errorf("Decompress allocated %d bytes for a %d-byte bound", alloc, limit)
	}
	t.Logf("a %d-byte bomb of 16 MiB stopped at %d bytes, %d bytes allocated", len(bomb), limit, alloc)

	partner, url := openPartner(t, func(c *as2partner.Config) { c.MaxDecompressedSize = limit })
	mdn := post(t, url, compressedType, bomb)
	if mdn.Processed() || !strings.HasSuffix(mdn.DispositionField, "processed/error: decompression-failed") {
		t.Fatalf("MDN disposition %q, want processed/error: decompression-failed (RFC 5402 §5)", mdn.DispositionField)
	}
	if st := partner.Stats(); st.Processed != 0 || st.ErrorMDNs != 1 {
		t.Errorf("Stats %+v", st)
	}
}

// TestPartnerBareEnvelope is a regression test: an envelope holding the
// bare payload, without MIME header fields, got "no empty line after the
// header". It is processed as application/octet-stream, with the MIC over
// the decrypted content.
func TestPartnerBareEnvelope(t *testing.T) {
	pki := testPKI(t)
	body := payload(t)
	for _, tt := range []struct {
		name string
		make func() (string, []byte, []byte) // content type, body, MIC content
	}{
		{"encrypted", func() (string, []byte, []byte) {
			ct, b, err := as2.EncryptEntity(body, pki.Partner.Cert, as2.EncryptAES256CBC)
			if err != nil {
				t.Fatal(err)
			}
			return ct, b, body
		}},
		{"signed", func() (string, []byte, []byte) {
			ct, b, err := as2.SignEntity(body, pki.Sender.Cert, pki.Sender.Key, as2.SignSHA256)
			if err != nil {
				t.Fatal(err)
			}
			return ct, b, body
		}},
		{"compressed", func() (string, []byte, []byte) {
			der, err := as2.Compress(body)
			if err != nil {
				t.Fatal(err)
			}
			return compressedType, der, body
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ct, b, micContent := tt.make()
			o, err := as2.OpenMessage(ct, b, as2.OpenOptions{Cert: pki.Partner.Cert, Key: pki.Partner.Key, SignerCert: pki.Sender.Cert})
			if err != nil {
				t.Fatalf("OpenMessage: %v", err)
			}
			if !o.Bare || o.ContentType != "application/octet-stream" || !bytes.Equal(o.Payload, body) {
				t.Errorf("Opened bare %v type %q payload equal %v", o.Bare, o.ContentType, bytes.Equal(o.Payload, body))
			}
			partner, url := openPartner(t, nil)
			mdn := post(t, url, ct, b)
			wantMIC, _ := as2.ComputeMIC("sha-256", micContent)
			if !mdn.Processed() || mdn.ReceivedContentMIC != wantMIC {
				t.Fatalf("MDN %q MIC %q, want processed with %q", mdn.DispositionField, mdn.ReceivedContentMIC, wantMIC)
			}
			if partner.ControlNumbers()[x12Control] != 1 {
				t.Errorf("control numbers %v", partner.ControlNumbers())
			}
		})
	}
}

// TestSendBoundsResponse: a 2xx answer larger than Config.MaxMDNSize is
// read no further than the bound: delivered, unconfirmed.
func TestSendBoundsResponse(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "multipart/report; report-type=disposition-notification; boundary=x")
		chunk := bytes.Repeat([]byte("x"), 64<<10)
		for range 1024 { // up to 64 MiB, until the client goes away
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}))
	t.Cleanup(srv.Close)
	cfg := as2.Config{URL: srv.URL, From: buyerID, To: supplierID, MaxMDNSize: 4 << 10}
	s, err := as2.NewSender(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err = s.Send(context.Background(), testID, payload(t))
	runtime.ReadMemStats(&after)
	if !errors.Is(err, as2.ErrNoMDN) || !strings.Contains(err.Error(), "larger than 4096 bytes") {
		t.Fatalf("Send = %v, want delivered unconfirmed: response larger than 4096 bytes", err)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 8<<20 {
		t.Errorf("Send allocated %d bytes reading a response bounded at 4 KiB", alloc)
	}
}

// TestPartnerConfigMaxDecompressedSize: a negative bound is a
// configuration error naming the field.
func TestPartnerConfigMaxDecompressedSize(t *testing.T) {
	_, err := as2partner.New(as2partner.Config{MaxDecompressedSize: -1})
	if !errors.Is(err, as2partner.ErrMaxBodySize) || !strings.Contains(err.Error(), "Config.MaxDecompressedSize") {
		t.Fatalf("New = %v, want ErrMaxBodySize naming Config.MaxDecompressedSize", err)
	}
}

// TestOpenOpaqueSigned: application/pkcs7-mime; smime-type=signed-data is
// verified against the pinned certificate, and its content opened.
func TestOpenOpaqueSigned(t *testing.T) {
	pki := testPKI(t)
	body := payload(t)
	entity := append([]byte("Content-Type: application/EDI-X12\r\nContent-Transfer-Encoding: binary\r\n\r\n"), body...)
	sd, err := pkcs7.NewSignedData(entity)
	if err != nil {
		t.Fatal(err)
	}
	sd.SetDigestAlgorithm(pkcs7.OIDDigestAlgorithmSHA256) // the MIC's digest (pkcs7's default is SHA-1)
	if err := sd.AddSigner(pki.Sender.Cert, pki.Sender.Key, pkcs7.SignerInfoConfig{}); err != nil {
		t.Fatal(err)
	}
	der, err := sd.Finish()
	if err != nil {
		t.Fatal(err)
	}
	const ct = `application/pkcs7-mime; smime-type=signed-data; name="smime.p7m"`
	o, err := as2.OpenMessage(ct, der, as2.OpenOptions{SignerCert: pki.Sender.Cert})
	if err != nil || !o.Signed || !bytes.Equal(o.Payload, body) || o.MIC != entityMIC("sha-256", body) {
		t.Fatalf("OpenMessage = %+v, %v", o, err)
	}
	if _, err := as2.OpenMessage(ct, der, as2.OpenOptions{SignerCert: other.Cert}); !errors.Is(err, as2.ErrSignature) {
		t.Fatalf("OpenMessage with another signer's certificate = %v, want ErrSignature", err)
	}
}

// TestOpenOpaqueSignedMICInSignerDigest: with no OpenOptions.MICAlgorithm,
// the MIC of an opaque signed message is in the digest the signer used
// (RFC 4130 §7.3.1), as for multipart/signed; a MICAlgorithm overrides it.
func TestOpenOpaqueSignedMICInSignerDigest(t *testing.T) {
	pki := testPKI(t)
	body := payload(t)
	entity := append([]byte("Content-Type: application/EDI-X12\r\nContent-Transfer-Encoding: binary\r\n\r\n"), body...)
	sd, err := pkcs7.NewSignedData(entity)
	if err != nil {
		t.Fatal(err)
	}
	sd.SetDigestAlgorithm(pkcs7.OIDDigestAlgorithmSHA384)
	if err := sd.AddSigner(pki.Sender.Cert, pki.Sender.Key, pkcs7.SignerInfoConfig{}); err != nil {
		t.Fatal(err)
	}
	der, err := sd.Finish()
	if err != nil {
		t.Fatal(err)
	}
	const ct = `application/pkcs7-mime; smime-type=signed-data; name="smime.p7m"`
	o, err := as2.OpenMessage(ct, der, as2.OpenOptions{SignerCert: pki.Sender.Cert})
	if err != nil || o.MIC != entityMIC("sha-384", body) {
		t.Fatalf("OpenMessage = %+v, %v; want the MIC in sha-384", o, err)
	}
	o, err = as2.OpenMessage(ct, der, as2.OpenOptions{SignerCert: pki.Sender.Cert, MICAlgorithm: "sha-256"})
	if err != nil || o.MIC != entityMIC("sha-256", body) {
		t.Fatalf("OpenMessage with MICAlgorithm sha-256 = %+v, %v; want the MIC in sha-256", o, err)
	}
}
