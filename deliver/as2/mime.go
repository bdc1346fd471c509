package as2

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"mime/quotedprintable"
	"net/textproto"
	"sort"
	"strings"
)

// headerOrder is the order in which entity header fields are written; other
// fields follow in sorted order.
var headerOrder = []string{"Mime-Version", "Content-Type", "Content-Transfer-Encoding", "Content-Disposition"}

// canonical returns the entity in canonical form (RFC 5751 §3.1.1): header
// fields each ending in CRLF, in a fixed order, an empty line, then the body
// unchanged. The body is binary (Content-Transfer-Encoding: binary) and is
// not rewritten: what is signed is exactly what is sent.
func (e entity) canonical() []byte {
	var b bytes.Buffer
	keys := make([]string, 0, len(e.Header))
	for k := range e.Header {
		keys = append(keys, k)
	}
	rank := func(k string) int {
		for i, o := range headerOrder {
			if k == o {
				return i
			}
		}
		return len(headerOrder)
	}
	sort.Slice(keys, func(i, j int) bool {
		ri, rj := rank(keys[i]), rank(keys[j])
		if ri != rj {
			return ri < rj
		}
		return keys[i] < keys[j]
	})
	for _, k := range keys {
		name := k
		if w, ok := wireNames[k]; ok {
			name = w
		}
		for _, v := range e.Header[k] {
			b.WriteString(name)
			b.WriteString(": ")
			b.WriteString(v)
			b.WriteString("\r\n")
		}
	}
	b.WriteString("\r\n")
	b.Write(e.Body)
	return b.Bytes()
}

// parseEntity splits a MIME entity into its header and its body (still
// transfer-encoded). The header ends at the first empty line, CRLF or bare
// LF; an entity that starts with an empty line has no header fields.
func parseEntity(raw []byte) (textproto.MIMEHeader, []byte, error) {
	var headerLen, bodyStart int
	switch {
	case bytes.HasPrefix(raw, []byte("\r\n")):
		return textproto.MIMEHeader{}, raw[2:], nil
	case bytes.HasPrefix(raw, []byte("\n")):
		return textproto.MIMEHeader{}, raw[1:], nil
	}
	crlf := bytes.Index(raw, []byte("\r\n\r\n"))
	lf := bytes.Index(raw, []byte("\n\n"))
	switch {
	case crlf >= 0 && (lf < 0 || crlf < lf):
		headerLen, bodyStart = crlf+2, crlf+4
	case lf >= 0:
		headerLen, bodyStart = lf+1, lf+2
	default:
		return nil, nil, fmt.Errorf("%w: no empty line after the header", ErrMalformedMIME)
	}
	r := textproto.NewReader(bufio.NewReader(io.MultiReader(bytes.NewReader(raw[:headerLen]), strings.NewReader("\r\n"))))
	h, err := r.ReadMIMEHeader()
	if err != nil {
		return nil, nil, fmt.Errorf("%w: header: %v", ErrMalformedMIME, err)
	}
	return h, raw[bodyStart:], nil
}

// decodeBody undoes a Content-Transfer-Encoding: base64 and
// quoted-printable are decoded; 7bit, 8bit, binary and none are returned as
// they are.
func decodeBody(cte string, body []byte) ([]byte, error) {
	switch strings.ToLower(strings.TrimSpace(cte)) {
	case "base64":
		b, err := io.ReadAll(base64.NewDecoder(base64.StdEncoding, newlineStripper{bytes.NewReader(bytes.TrimSpace(body))}))
		if err != nil {
			return nil, fmt.Errorf("%w: base64 body: %v", ErrMalformedMIME, err)
		}
		return b, nil
	case "quoted-printable":
		b, err := io.ReadAll(quotedprintable.NewReader(bytes.NewReader(body)))
		if err != nil {
			return nil, fmt.Errorf("%w: quoted-printable body: %v", ErrMalformedMIME, err)
		}
		return b, nil
	}
	return body, nil
}

// splitMultipart returns the body parts of a multipart body exactly as they
// are on the wire: each part's header and body, without the line break that
// precedes the next delimiter (it belongs to the delimiter, RFC 2046
// §5.1.1). Delimiter lines may end in CRLF or bare LF and carry transport
// padding. The preamble and epilogue are dropped.
func splitMultipart(body []byte, boundary string) ([][]byte, error) {
	if boundary == "" {
		return nil, fmt.Errorf("%w: multipart without boundary", ErrMalformedMIME)
	}
	delim := []byte("--" + boundary)
	// isDelimiterAt reports whether a delimiter line starts at i (i is at a
	// line start) and returns where its line ends and whether it closes.
	isDelimiterAt := func(i int) (end int, closing, ok bool) {
		if !bytes.HasPrefix(body[i:], delim) {
			return 0, false, false
		}
		j := i + len(delim)
		if bytes.HasPrefix(body[j:], []byte("--")) {
			closing = true
			j += 2
		}
		if closing {
			return len(body), true, true // the rest is the epilogue
		}
		for j < len(body) && (body[j] == ' ' || body[j] == '\t') {
			j++
		}
		switch {
		case j == len(body):
			return j, false, true
		case body[j] == '\n':
			return j + 1, false, true
		case body[j] == '\r' && j+1 < len(body) && body[j+1] == '\n':
			return j + 2, false, true
		}
		return 0, false, false
	}
	// Find the first delimiter: at the start, or after a line break.
	start := -1
	for i := 0; i < len(body); {
		if end, closing, ok := isDelimiterAt(i); ok {
			if closing {
				return nil, fmt.Errorf("%w: multipart has no body part", ErrMalformedMIME)
			}
			start = end
			break
		}
		nl := bytes.IndexByte(body[i:], '\n')
		if nl < 0 {
			break
		}
		i += nl + 1
	}
	if start < 0 {
		return nil, fmt.Errorf("%w: boundary %q not found", ErrMalformedMIME, boundary)
	}
	var parts [][]byte
	partStart := start
	for i := start; i < len(body); {
		nl := bytes.IndexByte(body[i:], '\n')
		if nl < 0 {
			break
		}
		lineStart := i + nl + 1
		if lineStart >= len(body) {
			break
		}
		if end, closing, ok := isDelimiterAt(lineStart); ok {
			partEnd := i + nl // the LF
			if partEnd > partStart && body[partEnd-1] == '\r' {
				partEnd--
			}
			if partEnd < partStart {
				partEnd = partStart
			}
			parts = append(parts, body[partStart:partEnd])
			if closing {
				return parts, nil
			}
			partStart = end
			i = end
			continue
		}
		i = lineStart
	}
	return nil, fmt.Errorf("%w: no closing boundary %q", ErrMalformedMIME, boundary)
}

// newBoundary returns a random multipart boundary that does not occur in
// content.
func newBoundary(content []byte) (string, error) {
	for {
		var r [16]byte
		if _, err := rand.Read(r[:]); err != nil {
			return "", err
		}
		b := "----=_Part_" + hex.EncodeToString(r[:])
		if !bytes.Contains(content, []byte(b)) {
			return b, nil
		}
	}
}

// base64Lines encodes b in base64 lines of 76 characters, each ending in
// CRLF (RFC 2045 §6.8).
func base64Lines(b []byte) []byte {
	enc := base64.StdEncoding.EncodeToString(b)
	var out bytes.Buffer
	for len(enc) > 76 {
		out.WriteString(enc[:76])
		out.WriteString("\r\n")
		enc = enc[76:]
	}
	out.WriteString(enc)
	out.WriteString("\r\n")
	return out.Bytes()
}

// toCRLF returns b with every bare LF turned into CRLF, and whether it
// changed anything.
func toCRLF(b []byte) ([]byte, bool) {
	n := 0
	for i, c := range b {
		if c == '\n' && (i == 0 || b[i-1] != '\r') {
			n++
		}
	}
	if n == 0 {
		return b, false
	}
	out := make([]byte, 0, len(b)+n)
	for i, c := range b {
		if c == '\n' && (i == 0 || b[i-1] != '\r') {
			out = append(out, '\r')
		}
		out = append(out, c)
	}
	return out, true
}

var errNotDER = errors.New("not DER")

// derOrBase64 returns body as DER: as is if it starts like a DER SEQUENCE,
// otherwise base64-decoded (S/MIME tools write base64).
func derOrBase64(body []byte) ([]byte, error) {
	if len(body) > 0 && body[0] == 0x30 {
		return body, nil
	}
	b, err := decodeBody("base64", body)
	if err != nil || len(b) == 0 || b[0] != 0x30 {
		return nil, errNotDER
	}
	return b, nil
}
