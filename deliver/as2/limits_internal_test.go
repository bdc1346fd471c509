package as2

import (
	"errors"
	"strings"
	"testing"
)

// A 4-byte BER length from 0x80000000 (which overflows a 32-bit int) and
// any length past the end of the input are refused by berLength itself.
func TestBERLengthBounds(t *testing.T) {
	for _, tc := range []struct {
		b  []byte
		ok bool
	}{
		{[]byte{0x02, 0xaa, 0xbb}, true},
		{[]byte{0x81, 0x01, 0xaa}, true},
		{[]byte{0x81, 0x02, 0xaa}, false},             // one byte short
		{[]byte{0x84, 0x7f, 0xff, 0xff, 0xff}, false}, // past the end
		{[]byte{0x84, 0x80, 0x00, 0x00, 0x00}, false}, // overflows int32
		{[]byte{0x84, 0xff, 0xff, 0xff, 0xff}, false},
		{[]byte{0x85, 0x00, 0x00, 0x00, 0x00, 0x01}, false},
	} {
		_, _, err := berLength(tc.b)
		if (err == nil) != tc.ok {
			t.Errorf("berLength(% x): error %v, want ok=%v", tc.b, err, tc.ok)
		}
		if err != nil && !errors.Is(err, errBER) {
			t.Errorf("berLength(% x): error %v, want errBER", tc.b, err)
		}
	}
}

// nestCompressed wraps inner (a MIME entity) in n compressed-data layers
// and returns the outermost body.
func nestCompressed(t *testing.T, inner []byte, n int) []byte {
	t.Helper()
	for range n {
		der, err := Compress(inner)
		if err != nil {
			t.Fatal(err)
		}
		inner = append([]byte("Content-Type: application/pkcs7-mime; smime-type=compressed-data\r\nContent-Transfer-Encoding: binary\r\n\r\n"), der...)
	}
	_, body, err := parseEntity(inner)
	if err != nil {
		t.Fatal(err)
	}
	return body
}

// OpenMessage opens exactly maxLayers S/MIME layers and refuses one more
// before opening it (the extra layer here is not even valid).
func TestOpenMessageLayerLimit(t *testing.T) {
	const ct = "application/pkcs7-mime; smime-type=compressed-data"
	payload := []byte("Content-Type: text/plain\r\n\r\nhello")
	o, err := OpenMessage(ct, nestCompressed(t, payload, maxLayers), OpenOptions{MaxDecompressedSize: 1 << 20})
	if err != nil {
		t.Fatalf("%d layers: %v", maxLayers, err)
	}
	if string(o.Payload) != "hello" {
		t.Fatalf("payload %q", o.Payload)
	}
	garbage := []byte("Content-Type: application/pkcs7-mime; smime-type=compressed-data\r\n\r\nnot cms")
	_, err = OpenMessage(ct, nestCompressed(t, garbage, maxLayers), OpenOptions{MaxDecompressedSize: 1 << 20})
	if !errors.Is(err, ErrMalformedMIME) || !strings.Contains(err.Error(), "S/MIME layers") {
		t.Fatalf("%d layers: error %v, want the layer limit", maxLayers+1, err)
	}
}
