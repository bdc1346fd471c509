package as2

import (
	"errors"
	"fmt"
)

// maxBERDepth bounds the nesting berToDER follows, so hostile input cannot
// exhaust the stack.
const maxBERDepth = 32

var errBER = errors.New("malformed BER")

// berToDER re-encodes a BER value (X.690 §8) in the DER form that
// encoding/asn1 reads: indefinite lengths become definite ones, and
// constructed OCTET STRINGs (X.690 §8.7.3) become primitive ones. CMS
// producers that stream, such as BouncyCastle's CMSCompressedDataGenerator
// (used by OpenAS2 and other Java AS2 products) and "openssl cms -stream",
// write compressed-data this way. Other BER freedoms (non-minimal lengths,
// unsorted SETs) are left as they are. The result is never more than about
// twice the input.
func berToDER(b []byte) ([]byte, error) {
	n, rest, err := berNode(b, 0)
	if err != nil {
		return nil, err
	}
	if len(rest) != 0 {
		return nil, fmt.Errorf("%w: %d bytes after the value", errBER, len(rest))
	}
	return n.der(), nil
}

// berValue is a value read by berNode: its identifier octets and its DER
// content.
type berValue struct {
	tag     []byte
	content []byte
}

func (v berValue) der() []byte {
	out := append([]byte{}, v.tag...)
	out = appendDERLength(out, len(v.content))
	return append(out, v.content...)
}

func appendDERLength(out []byte, n int) []byte {
	if n < 0x80 {
		return append(out, byte(n))
	}
	var l []byte
	for ; n > 0; n >>= 8 {
		l = append([]byte{byte(n)}, l...)
	}
	out = append(out, 0x80|byte(len(l)))
	return append(out, l...)
}

// berNode reads one BER value from b and returns it with the bytes after it.
func berNode(b []byte, depth int) (berValue, []byte, error) {
	if depth > maxBERDepth {
		return berValue{}, nil, fmt.Errorf("%w: nested more than %d deep", errBER, maxBERDepth)
	}
	if len(b) < 2 {
		return berValue{}, nil, fmt.Errorf("%w: truncated", errBER)
	}
	tagLen := 1
	if b[0]&0x1f == 0x1f { // high tag number form
		for tagLen < len(b) && b[tagLen]&0x80 != 0 {
			tagLen++
		}
		tagLen++
		if tagLen >= len(b) || tagLen > 6 {
			return berValue{}, nil, fmt.Errorf("%w: tag", errBER)
		}
	}
	v := berValue{tag: b[:tagLen]}
	constructed := b[0]&0x20 != 0
	b = b[tagLen:]

	var children []berValue
	if b[0] == 0x80 { // indefinite length: children up to end-of-contents
		if !constructed {
			return berValue{}, nil, fmt.Errorf("%w: indefinite length on a primitive value", errBER)
		}
		b = b[1:]
		for {
			if len(b) >= 2 && b[0] == 0 && b[1] == 0 {
				b = b[2:]
				break
			}
			c, rest, err := berNode(b, depth+1)
			if err != nil {
				return berValue{}, nil, err
			}
			children, b = append(children, c), rest
		}
	} else {
		n, lenLen, err := berLength(b)
		if err != nil {
			return berValue{}, nil, err
		}
		if n > len(b)-lenLen {
			return berValue{}, nil, fmt.Errorf("%w: length %d beyond the data", errBER, n)
		}
		content := b[lenLen : lenLen+n]
		b = b[lenLen+n:]
		if !constructed {
			v.content = content
			return v, b, nil
		}
		for len(content) > 0 {
			c, rest, err := berNode(content, depth+1)
			if err != nil {
				return berValue{}, nil, err
			}
			children, content = append(children, c), rest
		}
	}
	if len(v.tag) == 1 && v.tag[0] == 0x24 { // constructed OCTET STRING
		v.tag = []byte{0x04}
		for _, c := range children {
			if len(c.tag) != 1 || c.tag[0] != 0x04 {
				return berValue{}, nil, fmt.Errorf("%w: constructed OCTET STRING holds tag %x", errBER, c.tag)
			}
			v.content = append(v.content, c.content...)
		}
		return v, b, nil
	}
	for _, c := range children {
		v.content = append(v.content, c.der()...)
	}
	return v, b, nil
}

// berLength reads a definite length: its value and how many bytes it took.
// b is the rest of the input from the length's first byte; a length past
// its end is an error.
func berLength(b []byte) (n, size int, err error) {
	if b[0] < 0x80 {
		return int(b[0]), 1, nil
	}
	k := int(b[0] & 0x7f)
	// A 4-byte length from 0x80000000 would overflow a 32-bit int.
	if k == 0 || k > 4 || len(b) < 1+k || (k == 4 && b[1] >= 0x80) {
		return 0, 0, fmt.Errorf("%w: length", errBER)
	}
	for _, c := range b[1 : 1+k] {
		n = n<<8 | int(c)
	}
	if n > len(b)-(1+k) {
		return 0, 0, fmt.Errorf("%w: length %d beyond the data", errBER, n)
	}
	return n, 1 + k, nil
}
