package as2

import (
	"fmt"
	"mime"
	"net/http"
	"net/textproto"
	"time"
)

// entity is a MIME entity (RFC 2045): its header fields (Content-Type and,
// when present, Content-Transfer-Encoding and Content-Disposition) and its
// body as it goes on the wire.
type entity struct {
	Header textproto.MIMEHeader
	Body   []byte
}

// bodyStep wraps the entity built so far: a signer returns multipart/signed,
// an encryptor application/pkcs7-mime. The sender runs its steps in order;
// the last entity's headers become HTTP headers and its body the HTTP body
// (RFC 4130 §5.2, §6).
type bodyStep func(entity) (entity, error)

// Outbound is one AS2 message ready to POST, built by [Sender.Build].
type Outbound struct {
	// MessageID is the Message-ID header value, "<id@domain>".
	MessageID string
	// Header holds the HTTP request headers: the AS2 headers and the outer
	// entity's MIME headers. Keys are in canonical form (use Header.Get).
	Header http.Header
	// Body is the HTTP request body.
	Body []byte
	// MIC is the Received-Content-MIC the partner should return,
	// "<base64>, <alg>" (RFC 4130 §7.3.1), in the digest of
	// Config.SignAlgorithm ("sha-256" by default).
	MIC string

	// micContent is what the MIC covers: the payload alone for an unsigned,
	// unencrypted message; the canonical payload entity (headers and content)
	// once signing or encryption wraps it.
	micContent []byte
}

// Build turns payload into the [Outbound] that Send would POST for the
// message id, with the current time in the Date header: the payload entity
// (Content-Type Config.ContentType), compressed before or after signing as
// Config.Compression says (application/pkcs7-mime compressed-data), signed
// (multipart/signed) when the Config has a signing key, then encrypted
// (application/pkcs7-mime) when it has the partner's encryption
// certificate; the outermost entity's header
// fields become HTTP headers. It returns an error
// wrapping [ErrMessageID] if id is not a dot-atom (a UUID is), or
// [ErrEmptyPayload]. Build is safe for concurrent use.
func (s *Sender) Build(id string, payload []byte) (*Outbound, error) {
	return s.buildAt(id, payload, s.cfg.Filename, time.Now())
}

// buildAt is Build with the payload's filename ("" for none) and the time.
func (s *Sender) buildAt(id string, payload []byte, filename string, now time.Time) (*Outbound, error) {
	if !isDotAtom(id) {
		return nil, fmt.Errorf("%w: %q", ErrMessageID, id)
	}
	if len(payload) == 0 {
		return nil, ErrEmptyPayload
	}
	content := entity{Header: textproto.MIMEHeader{}, Body: payload}
	content.Header.Set("Content-Type", s.cfg.ContentType)
	if filename != "" {
		content.Header.Set("Content-Disposition", contentDisposition(filename))
	}

	// RFC 4130 §7.3.1: for an unsigned, unencrypted message the MIC covers
	// the content without MIME headers. For a signed message it covers the
	// signed entity, and for an encrypted unsigned one the entity before
	// encryption. RFC 5402 §4 keeps this with compression: a signed
	// message's MIC covers what was signed (the compressed entity under
	// compress-sign, the payload entity under sign-compress), an unsigned
	// one's the uncompressed payload entity with its MIME header fields.
	micContent := payload
	if len(s.steps) > 0 {
		content = s.encodePayload(content)
		micContent = content.canonical()
	}
	var err error
	outer := content
	for i, step := range s.steps {
		if i == s.signAt {
			micContent = outer.canonical()
		}
		if outer, err = step(outer); err != nil {
			return nil, err
		}
	}
	mic, err := ComputeMIC(s.sign.micalg, micContent)
	if err != nil {
		return nil, err
	}

	msgID := MessageID(id, s.cfg.MessageIDDomain)
	h := http.Header{}
	h.Set("AS2-Version", AS2Version)
	h.Set("AS2-From", QuoteAS2ID(s.cfg.From))
	h.Set("AS2-To", QuoteAS2ID(s.cfg.To))
	h.Set("Message-ID", msgID)
	h.Set("Subject", mime.QEncoding.Encode("utf-8", s.cfg.Subject))
	h.Set("Date", now.Format(time.RFC1123Z))
	if s.cfg.MDNMode != MDNNone {
		h.Set("Disposition-Notification-To", s.cfg.MDNTo)
	}
	if s.cfg.MDNMode == MDNAsync {
		h.Set("Receipt-Delivery-Option", s.cfg.AsyncMDNURL) // RFC 4130 §7.3
	}
	if s.cfg.signedMDN() {
		// RFC 4130 §7.3: ask for a signed receipt with a MIC in our digest,
		// "required" when the profile demands it (RFC 3798 §2.2).
		importance := "optional"
		if s.cfg.RequireSignedMDN {
			importance = "required"
		}
		h.Set("Disposition-Notification-Options",
			"signed-receipt-protocol="+importance+", pkcs7-signature; signed-receipt-micalg="+importance+", "+s.micalgName())
	}
	h.Set("MIME-Version", "1.0")
	h.Set("User-Agent", userAgent)
	for k, v := range outer.Header {
		h[k] = v
	}
	return &Outbound{MessageID: msgID, Header: h, Body: outer.Body, MIC: mic, micContent: micContent}, nil
}

// signStep returns the body step that signs the entity with our key.
func (s *Sender) signStep() bodyStep {
	return func(e entity) (entity, error) {
		signed, err := signEntity(e.canonical(), s.cfg.SigningCert, s.cfg.SigningKey, s.sign)
		if err != nil {
			return signed, err
		}
		return s.spellMicalg(signed), nil
	}
}

// encryptStep returns the body step that encrypts the entity to the partner.
func (s *Sender) encryptStep() bodyStep {
	return func(e entity) (entity, error) {
		return s.encrypt(e.canonical())
	}
}

const userAgent = "floodgate-as2"

// wireNames spells headers as RFC 4130 does. HTTP header names are
// case-insensitive (RFC 9110 §5.1), but some AS2 servers are not.
var wireNames = map[string]string{
	"As2-Version":                 "AS2-Version",
	"As2-From":                    "AS2-From",
	"As2-To":                      "AS2-To",
	"Message-Id":                  "Message-ID",
	"Mime-Version":                "MIME-Version",
	"Disposition-Notification-To": "Disposition-Notification-To",
}

// wireHeader returns h with the AS2 header names spelled as in RFC 4130.
func wireHeader(h http.Header) http.Header {
	out := make(http.Header, len(h))
	for k, v := range h {
		if w, ok := wireNames[k]; ok {
			k = w
		}
		out[k] = v
	}
	return out
}
