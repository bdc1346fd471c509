package as2

import (
	"bytes"
	"compress/zlib"
	"crypto/x509/pkix"
	"encoding/asn1"
	"errors"
	"testing"

	"github.com/smallstep/pkcs7"
)

const testCompressedType = `application/pkcs7-mime; smime-type=compressed-data`

// storedCompressed is a compressed-data ContentInfo whose zlib stream uses
// stored (uncompressed) blocks: as large as its content, and as
// compressible, so an outer layer shrinks it again.
func storedCompressed(t *testing.T, content []byte) []byte {
	t.Helper()
	var z bytes.Buffer
	w, err := zlib.NewWriterLevel(&z, zlib.NoCompression)
	if err != nil {
		t.Fatal(err)
	}
	w.Write(content)
	w.Close()
	inner, err := asn1.Marshal(cmsCompressedData{
		CompressionAlgorithm: pkix.AlgorithmIdentifier{Algorithm: oidZlib},
		EncapContentInfo:     cmsEncapContentInfo{EContentType: pkcs7.OIDData, EContent: z.Bytes()},
	})
	if err != nil {
		t.Fatal(err)
	}
	der, err := asn1.Marshal(cmsContentInfo{ContentType: oidCompressedData,
		Content: asn1.RawValue{Class: asn1.ClassContextSpecific, Tag: 0, IsCompound: true, Bytes: inner}})
	if err != nil {
		t.Fatal(err)
	}
	return der
}

// TestNestedCompressionBoundInAll: a message nesting compressed-data in
// compressed-data, each layer holding almost MaxDecompressedSize bytes
// (stored zlib blocks of zeros, which the next layer out compresses
// again), is refused with ErrTooLarge: the bound holds for the content
// decompressed in all layers together, not for each, so nesting cannot
// multiply the work and memory of a small message by the layer count.
func TestNestedCompressionBoundInAll(t *testing.T) {
	const limit = 256 << 10
	const header = "Content-Type: application/pkcs7-mime; smime-type=compressed-data\r\nContent-Transfer-Encoding: binary\r\n\r\n"
	entity := append([]byte("Content-Type: text/plain\r\n\r\n"), make([]byte, limit*9/10)...)
	for range maxLayers - 2 {
		entity = append([]byte(header), storedCompressed(t, entity)...)
	}
	body, err := Compress(entity) // the outer layer: small on the wire
	if err != nil {
		t.Fatal(err)
	}
	if len(body) > limit/20 {
		t.Fatalf("the message is %d bytes", len(body))
	}
	_, err = OpenMessage(testCompressedType, body, OpenOptions{MaxDecompressedSize: limit})
	if !errors.Is(err, ErrDecompression) || !errors.Is(err, ErrTooLarge) {
		t.Fatalf("OpenMessage of %d bytes opening %d layers of %d bytes = %v, want ErrTooLarge", len(body), maxLayers-1, len(entity), err)
	}
	// One layer of the same size passes.
	one, err := Compress(append([]byte("Content-Type: text/plain\r\n\r\n"), make([]byte, limit*9/10)...))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := OpenMessage(testCompressedType, one, OpenOptions{MaxDecompressedSize: limit}); err != nil {
		t.Fatalf("one layer: %v", err)
	}
}
