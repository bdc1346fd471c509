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
// §5.1.1). It is the package's only multipart splitter: the signature check
// ([VerifySigned]), the MDN lookup and the report ([ParseMDN]) all read a
// body through it, so they cannot see different parts.
//
// The rule, RFC 2046 §5.1.1 made liberal in line endings only: a delimiter
// is a line (at the start of the body or after LF) that is "--" boundary,
// optional linear whitespace (space, tab), then CRLF, LF or the end of the
// body; a close delimiter is "--" boundary "--" followed the same way, and
// what comes after it (the epilogue) is dropped, as is the preamble before
// the first delimiter. A line that starts with "--" boundary, then linear
// whitespace or "--", then anything else is neither content nor delimiter:
// the body is refused ([ErrMalformedMIME]), since readers disagree on it. A
// line "--" boundary followed directly by another character ("--Bx") is
// content.
func splitMultipart(body []byte, boundary string) ([][]byte, error) {
	if boundary == "" {
		return nil, fmt.Errorf("%w: multipart without boundary", ErrMalformedMIME)
	}
	delim := []byte("--" + boundary)
	// delimiterAt reports whether a delimiter line starts at i (i is at a
	// line start), where its line ends and whether it closes; err is set
	// for a line that starts like a delimiter but is none.
	delimiterAt := func(i int) (end int, closing, ok bool, err error) {
		if !bytes.HasPrefix(body[i:], delim) {
			return 0, false, false, nil
		}
		j := i + len(delim)
		if bytes.HasPrefix(body[j:], []byte("--")) {
			closing = true
			j += 2
		} else if j < len(body) && body[j] != ' ' && body[j] != '\t' && body[j] != '\r' && body[j] != '\n' {
			return 0, false, false, nil // "--Bx": content
		}
		for j < len(body) && (body[j] == ' ' || body[j] == '\t') {
			j++
		}
		switch {
		case j == len(body):
			return j, closing, true, nil
		case body[j] == '\n':
			return j + 1, closing, true, nil
		case body[j] == '\r' && j+1 < len(body) && body[j+1] == '\n':
			return j + 2, closing, true, nil
		}
		line := body[i:]
		if k := bytes.IndexByte(line, '\n'); k >= 0 {
			line = line[:k]
		}
		if len(line) > 80 {
			line = line[:80]
		}
		return 0, false, false, fmt.Errorf("%w: line %q starts with boundary %q but is no delimiter", ErrMalformedMIME, line, cut80(boundary))
	}
	// Every line start is a delimiter candidate, the first line of a part
	// too (a delimiter right after another is an empty part).
	var parts [][]byte
	partStart := -1 // -1: in the preamble
	for ls := 0; ls < len(body); {
		end, closing, ok, err := delimiterAt(ls)
		if err != nil {
			return nil, err
		}
		if ok {
			switch {
			case partStart < 0 && closing:
				return nil, fmt.Errorf("%w: multipart has no body part", ErrMalformedMIME)
			case partStart >= 0:
				partEnd := ls
				if ls > partStart {
					partEnd = ls - 1 // the LF before the delimiter
					if partEnd > partStart && body[partEnd-1] == '\r' {
						partEnd--
					}
				}
				parts = append(parts, body[partStart:partEnd])
				if closing {
					return parts, nil
				}
			}
			partStart, ls = end, end
			continue
		}
		nl := bytes.IndexByte(body[ls:], '\n')
		if nl < 0 {
			break
		}
		ls += nl + 1
	}
	if partStart < 0 {
		return nil, fmt.Errorf("%w: boundary %q not found", ErrMalformedMIME, cut80(boundary))
	}
	return nil, fmt.Errorf("%w: no closing boundary %q", ErrMalformedMIME, cut80(boundary))
}

// signedParts splits a multipart/signed body (RFC 1847 §2.1) with
// [splitMultipart] into its two parts: the signed content, byte for byte,
// and the signature part. It is the one split that [VerifySigned],
// [ParseMDN] and [VerifyMDN] share. The error wraps [ErrMalformedMIME].
func signedParts(boundary string, body []byte) (content, sig []byte, err error) {
	parts, err := splitMultipart(body, boundary)
	if err != nil {
		return nil, nil, err
	}
	if len(parts) != 2 {
		return nil, nil, fmt.Errorf("%w: multipart/signed has %d parts, want 2", ErrMalformedMIME, len(parts))
	}
	return parts[0], parts[1], nil
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

// cut80 cuts a partner's boundary, quoted in an error, to 80 bytes: it has
// no length limit of its own.
func cut80(s string) string {
	if len(s) > 80 {
		return s[:80]
	}
	return s
}
