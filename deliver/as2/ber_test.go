package as2_test

import (
	"bytes"
	"compress/zlib"
	"errors"
	"strings"
	"testing"

	"github.com/floodgate-go/floodgate/deliver/as2"
)

// berIndef is a constructed BER value of indefinite length (X.690 §8.1.3.6).
func berIndef(tag byte, children ...[]byte) []byte {
	out := []byte{tag, 0x80}
	for _, c := range children {
		out = append(out, c...)
	}
	return append(out, 0, 0)
}

// derTLV is a definite-length value.
func derTLV(tag byte, content []byte) []byte {
	out := []byte{tag}
	switch n := len(content); {
	case n < 0x80:
		out = append(out, byte(n))
	case n < 0x100:
		out = append(out, 0x81, byte(n))
	default:
		out = append(out, 0x82, byte(n>>8), byte(n))
	}
	return append(out, content...)
}

// streamedCompressedData is content as a streaming CMS producer writes
// compressed-data (BouncyCastle's CMSCompressedDataGenerator, "openssl cms
// -compress -stream"): indefinite lengths, and the zlib stream in a
// constructed OCTET STRING of 100-byte chunks.
func streamedCompressedData(t *testing.T, content []byte) []byte {
	t.Helper()
	var z bytes.Buffer
	w := zlib.NewWriter(&z)
	w.Write(content)
	w.Close()
	var chunks [][]byte
	for b := z.Bytes(); len(b) > 0; {
		n := min(len(b), 100)
		chunks = append(chunks, derTLV(0x04, b[:n]))
		b = b[n:]
	}
	oid := func(b ...byte) []byte { return derTLV(0x06, b) }
	compressedData := oid(0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x09, 0x10, 0x01, 0x09)
	zlibAlg := oid(0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x09, 0x10, 0x03, 0x08)
	data := oid(0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x07, 0x01)
	return berIndef(0x30, compressedData,
		berIndef(0xa0,
			berIndef(0x30,
				derTLV(0x02, []byte{0}),
				derTLV(0x30, zlibAlg),
				berIndef(0x30, data,
					berIndef(0xa0, berIndef(0x24, chunks...))))))
}

// TestDecompressBER: compressed-data in BER with indefinite lengths and a
// chunked OCTET STRING, as Java AS2 products stream it, is read; OpenSSL's
// CMS parser accepts the same bytes, so the vector is valid CMS.
func TestDecompressBER(t *testing.T) {
	body := payload(t)
	ber := streamedCompressedData(t, body)
	got, err := as2.Decompress(ber, 0)
	if err != nil || !bytes.Equal(got, body) {
		t.Fatalf("Decompress(BER) = %d bytes, %v; want the payload", len(got), err)
	}
	o, err := as2.OpenMessage("application/pkcs7-mime", ber, as2.OpenOptions{}) // no smime-type: sniffed
	if err != nil || !o.Compressed || !o.Bare || !bytes.Equal(o.Payload, body) {
		t.Fatalf("OpenMessage(BER, no smime-type) = %+v, %v", o, err)
	}
	if testing.Short() {
		return
	}
	needOpenSSL(t)
	dir := t.TempDir()
	writeFile(t, dir, "ber.der", ber)
	info := string(openssl(t, dir, "cms", "-cmsout", "-print", "-inform", "DER", "-in", "ber.der"))
	if !strings.Contains(info, "id-smime-ct-compressedData") || !strings.Contains(info, "zlib compression") {
		t.Errorf("OpenSSL does not read the BER vector as zlib compressed-data:\n%s", info[:min(len(info), 800)])
	}
}

// FuzzDecompress: hostile compressed-data never panics, never returns
// more than the bound, and every failure wraps ErrDecompression.
func FuzzDecompress(f *testing.F) {
	good, _ := as2.Compress([]byte("Content-Type: text/plain\r\n\r\nhello"))
	f.Add(good)
	f.Add(berIndef(0x30, berIndef(0x30, berIndef(0x30))))
	f.Add(bytes.Repeat([]byte{0x30, 0x80}, 100))
	f.Add([]byte{0x30, 0x84, 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte("MIAGCyqGSIb3DQEJEAEJoIA="))
	f.Fuzz(func(t *testing.T, b []byte) {
		out, err := as2.Decompress(b, 1<<16)
		if err != nil && !errors.Is(err, as2.ErrDecompression) {
			t.Fatalf("error %v does not wrap ErrDecompression", err)
		}
		if len(out) > 1<<16 {
			t.Fatalf("%d bytes out", len(out))
		}
	})
}
