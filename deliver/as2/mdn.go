package as2

import (
	"bufio"
	"bytes"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/textproto"
	"strings"
)

// MDN is a Message Disposition Notification (RFC 3798) as returned by an AS2
// partner (RFC 4130 §7.4): the receipt for one message.
type MDN struct {
	// OriginalMessageID is the Message-ID of the message this MDN answers, as
	// received (normally with angle brackets).
	OriginalMessageID string
	// Disposition is the disposition type, lower-cased: "processed" or
	// "failed" (RFC 4130 §7.4.3).
	Disposition string
	// Modifier is the disposition modifier as received, without the leading
	// "/", e.g. "error: authentication-failed", "warning: duplicate-document"
	// or "failure: unsupported format"; "" when there is none.
	Modifier string
	// ActionMode is the disposition mode as received, normally
	// "automatic-action/MDN-sent-automatically".
	ActionMode string
	// DispositionField is the whole Disposition field value as received.
	DispositionField string
	// ReceivedContentMIC is the Received-Content-MIC field as received,
	// "<base64>, <algorithm>", or "" if absent.
	ReceivedContentMIC string
	// ReportingUA, OriginalRecipient and FinalRecipient are the fields of the
	// same names as received, or "".
	ReportingUA       string
	OriginalRecipient string
	FinalRecipient    string
	// Text is the human-readable first part of the report, or "".
	Text string
	// Signed reports that the report came inside multipart/signed. The
	// signature has NOT been verified by ParseMDN; see Verified.
	Signed bool
	// Verified reports that the signature was verified against the
	// partner's MDN certificate, by [VerifyMDN] (and so by [Sender.Send]
	// when Config.MDNCert is set).
	Verified bool
	// Signer is the certificate that signed the MDN when Verified, or nil.
	Signer *x509.Certificate
	// Raw is the response body the MDN was parsed from.
	Raw []byte
}

// Processed reports whether the partner processed the message: the
// disposition is "processed" with no modifier or a warning modifier
// (RFC 4130 §7.4.3: a warning means the message was processed).
func (m *MDN) Processed() bool {
	if m == nil || m.Disposition != "processed" {
		return false
	}
	mod := strings.ToLower(m.Modifier)
	return mod == "" || strings.HasPrefix(mod, "warning")
}

// ParseMDN parses a synchronous MDN: the Content-Type header and the body of
// the HTTP response. The body must be a multipart/report with report-type
// disposition-notification (RFC 3798 §3, RFC 6522) holding a
// message/disposition-notification part, or a multipart/signed whose first
// part is such a report (the signature is not verified; [MDN.Signed] is set).
// CRLF and bare LF line endings, folded fields, quoted-printable and base64
// parts are accepted; field names are case-insensitive. Multipart bodies
// are split by the same rule as [VerifySigned] splits them (RFC 2046
// §5.1.1, liberal in line endings only), and the signed content is read in
// its CRLF form, so that ParseMDN (used to look a receipt up) and
// [VerifyMDN] always read the same report: a body they could read
// differently, such as one with a line that starts with the boundary but
// is no delimiter ("--B x"), is malformed.
//
// It returns an error wrapping [ErrNoMDN] when the content is not a
// disposition-notification report, and [ErrMalformedMDN] when it is but
// cannot be read or lacks a Disposition field. It does not judge the
// disposition: see [MDN.Processed].
func ParseMDN(contentType string, body []byte) (*MDN, error) {
	m := &MDN{Raw: body}
	if err := parseMDNEntity(m, contentType, body, 0); err != nil {
		return nil, err
	}
	return m, nil
}

// VerifyMDN verifies and parses a signed synchronous MDN: the Content-Type
// header value and body of the HTTP response. The body must be a
// multipart/signed entity (RFC 5751 §3.5.3) whose signature verifies with
// exactly cert, the partner's MDN-signing certificate; its first part, the
// very bytes verified, is then parsed as by [ParseMDN] (so both read the
// same report), and the MDN returned has Signed and Verified set.
// VerifyMDN does not judge the disposition or the MIC: see
// [MDN.Processed] and [Sender.Send].
//
// Errors:
//   - the response is no MDN at all, or an unreadable one: nil and an error
//     wrapping [ErrNoMDN] or [ErrMalformedMDN], as ParseMDN;
//   - an unsigned MDN: the MDN as parsed and [ErrMDNUnsigned];
//   - a signature that does not verify with cert (tampered, or signed by
//     another key): the MDN as parsed without verification, if it can be,
//     and an error wrapping [ErrMDNSignature] and [ErrSignature].
func VerifyMDN(contentType string, body []byte, cert *x509.Certificate) (*MDN, error) {
	mediaType, params, err := mime.ParseMediaType(contentType)
	if err != nil || mediaType != mediaSigned {
		m, err := ParseMDN(contentType, body)
		if err != nil {
			return nil, err
		}
		return m, fmt.Errorf("%w: Content-Type %s", ErrMDNUnsigned, mediaType)
	}
	// One split, one parse: the report read is the content verified (or its
	// CRLF form, which reads the same), as ParseMDN reads it.
	content, sig, err := signedParts(params["boundary"], body)
	if err != nil {
		return nil, fmt.Errorf("%w: multipart/signed: %v", ErrMalformedMDN, err)
	}
	m := &MDN{Raw: body, Signed: true}
	perr := parseSignedContent(m, content, 1)
	if perr != nil {
		m = nil
	}
	_, signer, err := verifySignedParts(content, sig, cert)
	switch {
	case errors.Is(err, ErrMalformedMIME):
		return nil, fmt.Errorf("%w: %v", ErrMalformedMDN, err)
	case err != nil:
		return m, fmt.Errorf("%w: %w", ErrMDNSignature, err)
	case perr != nil:
		return nil, perr
	}
	m.Verified, m.Signer = true, signer
	return m, nil
}

// maxNesting bounds multipart/signed nesting in parseMDNEntity.
const maxNesting = 2

func parseMDNEntity(m *MDN, contentType string, body []byte, depth int) error {
	mediaType, params, err := mime.ParseMediaType(contentType)
	if err != nil {
		return fmt.Errorf("%w: Content-Type %q: %v", ErrNoMDN, contentType, err)
	}
	switch mediaType {
	case mediaSigned:
		if depth >= maxNesting {
			return fmt.Errorf("%w: nested multipart/signed", ErrMalformedMDN)
		}
		content, _, err := signedParts(params["boundary"], body)
		if err != nil {
			return fmt.Errorf("%w: multipart/signed: %v", ErrMalformedMDN, err)
		}
		m.Signed = true
		return parseSignedContent(m, content, depth+1)
	case "multipart/report":
		if rt := params["report-type"]; rt != "" && !strings.EqualFold(rt, "disposition-notification") {
			return fmt.Errorf("%w: report-type %q", ErrNoMDN, rt)
		}
		return parseReport(m, params["boundary"], body)
	default:
		return fmt.Errorf("%w: Content-Type %q", ErrNoMDN, mediaType)
	}
}

// parseSignedContent parses the signed content of a multipart/signed MDN
// (the first part, as [signedParts] returns it) into m. It reads the
// content's CRLF form, which is also the form [verifySignedParts] verifies
// when the content as sent does not verify: so the report read by
// [ParseMDN] (to look a receipt up) and the one [VerifyMDN] verifies are
// the same bytes, parsed by the same code.
func parseSignedContent(m *MDN, content []byte, depth int) error {
	canon, _ := toCRLF(content)
	h, b, err := parseEntity(canon)
	if err != nil {
		return fmt.Errorf("%w: multipart/signed: %v", ErrMalformedMDN, err)
	}
	return parseMDNEntity(m, h.Get("Content-Type"), b, depth)
}

// parseReport reads the parts of a multipart/report body, split by
// [splitMultipart]: the first message/disposition-notification part gives
// the fields, a first text/plain part (or one without Content-Type) the
// text.
func parseReport(m *MDN, boundary string, body []byte) error {
	if boundary == "" {
		return fmt.Errorf("%w: multipart/report without boundary", ErrMalformedMDN)
	}
	parts, err := splitMultipart(body, boundary)
	if err != nil {
		return fmt.Errorf("%w: multipart/report: %v", ErrMalformedMDN, err)
	}
	found := false
	for i, part := range parts {
		h, raw, err := parseEntity(part)
		if err != nil {
			return fmt.Errorf("%w: part %d: %v", ErrMalformedMDN, i+1, err)
		}
		b, err := decodeBody(h.Get("Content-Transfer-Encoding"), raw)
		if err != nil {
			return fmt.Errorf("%w: part %d: %v", ErrMalformedMDN, i+1, err)
		}
		mediaType, _, _ := mime.ParseMediaType(h.Get("Content-Type"))
		switch {
		case mediaType == "message/disposition-notification" && !found:
			if err := parseNotification(m, b); err != nil {
				return err
			}
			found = true
		case i == 0 && (mediaType == "" || mediaType == "text/plain"):
			m.Text = strings.TrimSpace(string(b))
		}
	}
	if !found {
		return fmt.Errorf("%w: no message/disposition-notification part", ErrMalformedMDN)
	}
	return nil
}

// newlineStripper drops CR and LF so base64 lines decode as one stream.
type newlineStripper struct{ r io.Reader }

func (s newlineStripper) Read(b []byte) (int, error) {
	n, err := s.r.Read(b)
	j := 0
	for _, c := range b[:n] {
		if c != '\r' && c != '\n' {
			b[j] = c
			j++
		}
	}
	return j, err
}

// parseNotification reads the fields of a message/disposition-notification
// body (RFC 3798 §3.1): header-style fields, possibly folded.
func parseNotification(m *MDN, b []byte) error {
	b = bytes.TrimLeft(b, "\r\n")
	// The fields end at a blank line or at the end of the part; add the blank
	// line so that both read alike.
	r := textproto.NewReader(bufio.NewReader(io.MultiReader(bytes.NewReader(b), strings.NewReader("\r\n\r\n"))))
	h, err := r.ReadMIMEHeader()
	if err != nil {
		return fmt.Errorf("%w: disposition-notification fields: %v", ErrMalformedMDN, err)
	}
	m.ReportingUA = strings.TrimSpace(h.Get("Reporting-UA"))
	m.OriginalRecipient = strings.TrimSpace(h.Get("Original-Recipient"))
	m.FinalRecipient = strings.TrimSpace(h.Get("Final-Recipient"))
	m.OriginalMessageID = strings.TrimSpace(h.Get("Original-Message-ID"))
	m.ReceivedContentMIC = strings.TrimSpace(h.Get("Received-Content-MIC"))
	m.DispositionField = strings.TrimSpace(h.Get("Disposition"))
	if m.DispositionField == "" {
		return fmt.Errorf("%w: no Disposition field", ErrMalformedMDN)
	}
	mode, typ, mod, err := parseDisposition(m.DispositionField)
	if err != nil {
		return err
	}
	m.ActionMode, m.Disposition, m.Modifier = mode, typ, mod
	return nil
}

// parseDisposition splits a Disposition field (RFC 3798 §3.2.6, RFC 4130
// §7.4.3) into mode, lower-cased type and modifier:
//
//	automatic-action/MDN-sent-automatically; processed/error: authentication-failed
//
// gives "automatic-action/MDN-sent-automatically", "processed",
// "error: authentication-failed". Comments in parentheses are dropped.
func parseDisposition(v string) (mode, typ, modifier string, err error) {
	v = stripComments(v)
	mode, rest, ok := strings.Cut(v, ";")
	if !ok {
		return "", "", "", fmt.Errorf("%w: Disposition %q has no disposition type", ErrMalformedMDN, v)
	}
	typ, modifier, _ = strings.Cut(rest, "/")
	mode, typ, modifier = strings.TrimSpace(mode), strings.ToLower(strings.TrimSpace(typ)), strings.TrimSpace(modifier)
	if typ == "" {
		return "", "", "", fmt.Errorf("%w: Disposition %q has no disposition type", ErrMalformedMDN, v)
	}
	return mode, typ, modifier, nil
}

// stripComments removes RFC 5322 comments, "(...)", possibly nested.
func stripComments(s string) string {
	if !strings.ContainsRune(s, '(') {
		return s
	}
	var b strings.Builder
	depth := 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\' && depth > 0:
			i++
		case c == '(':
			depth++
		case c == ')' && depth > 0:
			depth--
		case depth == 0:
			b.WriteByte(c)
		}
	}
	return b.String()
}
