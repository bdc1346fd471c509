package as2partner

import (
	"bytes"
	"fmt"
	"mime"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"strings"
	"time"

	"github.com/floodgate-go/floodgate/deliver/as2"
)

// reportingUA names the partner in its MDNs.
const reportingUA = "floodgate-as2partner"

// writeMDN answers with a synchronous MDN, RFC 4130 §7.4 and RFC 3798 §3: a
// multipart/report with a human-readable part and a
// message/disposition-notification part, inside multipart/signed when the
// request asked for a signed receipt and the partner has a key. disposition is what follows the
// disposition mode, e.g. "processed" or "processed/error: authentication-failed".
//
// When the request asked for an asynchronous MDN (Receipt-Delivery-Option,
// already allowed), the MDN is queued for its URL instead, and the request
// answered 200 with no body (async.go).
func (p *Partner) writeMDN(w http.ResponseWriter, req request, disposition, text string) {
	h, out, err := p.buildMDN(req, disposition, text)
	if err != nil {
		http.Error(w, "signing the MDN: "+err.Error(), http.StatusInternalServerError)
		return
	}
	if req.receiptTo != "" {
		p.queueReceipt(w, req.receiptTo, h, out)
		return
	}
	for k, v := range h {
		w.Header()[k] = v
	}
	w.WriteHeader(http.StatusOK)
	w.Write(out)
}

// buildMDN returns the headers and body of the MDN writeMDN sends.
func (p *Partner) buildMDN(req request, disposition, text string) (http.Header, []byte, error) {
	us := req.to
	if p.cfg.AS2ID != "" {
		us = p.cfg.AS2ID
	}
	now := p.clock.Now()

	var fields strings.Builder
	field := func(name, value string) {
		fmt.Fprintf(&fields, "%s: %s\r\n", name, clean(value))
	}
	field("Reporting-UA", reportingUA)
	field("Original-Recipient", "rfc822; "+us)
	field("Final-Recipient", "rfc822; "+us)
	field("Original-Message-ID", req.messageID)
	field("Disposition", "automatic-action/MDN-sent-automatically; "+disposition)
	if req.mic != "" {
		field("Received-Content-MIC", req.mic)
	}

	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	textPart, _ := mw.CreatePart(textproto.MIMEHeader{
		"Content-Type":              {"text/plain; charset=us-ascii"},
		"Content-Transfer-Encoding": {"7bit"},
	})
	fmt.Fprintf(textPart, "%s\r\n", clean(text))
	notePart, _ := mw.CreatePart(textproto.MIMEHeader{
		"Content-Type":              {"message/disposition-notification"},
		"Content-Transfer-Encoding": {"7bit"},
	})
	notePart.Write([]byte(fields.String()))
	mw.Close()

	p.mu.Lock()
	p.mdnSeq++
	seq := p.mdnSeq
	p.mu.Unlock()

	h := http.Header{}
	h["AS2-Version"] = []string{as2.AS2Version}
	h["AS2-From"] = []string{as2.QuoteAS2ID(us)}
	h["AS2-To"] = []string{as2.QuoteAS2ID(req.from)}
	h["Message-ID"] = []string{fmt.Sprintf("<mdn-%d-%d@%s>", p.created, seq, reportingUA)}
	h["MIME-Version"] = []string{"1.0"}
	h.Set("Date", now.Format(time.RFC1123Z))
	contentType := mime.FormatMediaType("multipart/report", map[string]string{
		"report-type": "disposition-notification",
		"boundary":    mw.Boundary(),
	})
	out := body.Bytes()
	if req.signedMDN && p.cfg.Key != nil && !p.cfg.UnsignedMDN {
		// RFC 4130 §7.4: a signed receipt is the report entity inside
		// multipart/signed, signed with the digest the sender asked for.
		alg := req.micalg
		if alg == "" {
			alg = as2.SignSHA256
		}
		entity := append([]byte("Content-Type: "+contentType+"\r\n\r\n"), out...)
		ct, signed, err := as2.SignEntity(entity, p.cfg.Cert, p.cfg.Key, alg)
		if err != nil {
			return nil, nil, err
		}
		contentType, out = ct, signed
		p.count(func(s *Stats) { s.SignedMDNs++ })
	}
	h.Set("Content-Type", contentType)
	return h, out, nil
}

// clean drops control characters so a value cannot break a header line.
func clean(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return -1
		}
		return r
	}, s)
}
