package as2_test

import (
	"bytes"
	"errors"
	"fmt"
	"mime"
	"strings"
	"testing"

	"github.com/floodgate-go/floodgate/deliver/as2"
)

const (
	splitInner = "report-boundary"
	splitOuter = "signed-boundary"
)

// splitReport returns a disposition-notification report for messageID: an
// unsigned entity with CRLF line endings, its parts delimited by splitInner.
func splitReport(messageID string) []byte {
	return []byte(strings.ReplaceAll(`Content-Type: multipart/report; report-type=disposition-notification; boundary="`+splitInner+`"

--`+splitInner+`
Content-Type: text/plain

The message was received.
--`+splitInner+`
Content-Type: message/disposition-notification

Reporting-UA: partner
Original-Message-ID: `+messageID+`
Disposition: automatic-action/MDN-sent-automatically; processed

--`+splitInner+`--
`, "\n", "\r\n"))
}

// signReport signs report with the partner's key and returns the
// multipart/signed Content-Type (boundary splitOuter) and the signature
// part (header and body, without the line break before the delimiter).
func signReport(t *testing.T, report []byte) (string, []byte) {
	t.Helper()
	pki := testPKI(t)
	ct, signed, err := as2.SignEntity(report, pki.Partner.Cert, pki.Partner.Key, "sha256")
	if err != nil {
		t.Fatal(err)
	}
	_, params, err := mime.ParseMediaType(ct)
	if err != nil {
		t.Fatal(err)
	}
	b := params["boundary"]
	i := bytes.Index(signed, []byte("\r\n--"+b+"\r\n"))
	end := bytes.LastIndex(signed, []byte("\r\n--"+b+"--"))
	if i < 0 || end < 0 {
		t.Fatalf("no signature part in %q", signed)
	}
	ct = strings.Replace(ct, b, splitOuter, 1)
	return ct, signed[i+len("\r\n--"+b+"\r\n") : end]
}

// TestMDNLookupAndVerificationSplitAlike: the MDN lookup (ParseMDN, which
// reads the Original-Message-ID a receipt is looked up by) and the
// verification (VerifyMDN) read one body with one splitter, so for each
// input they accept the same report or both refuse it. The inputs are a
// genuine signed MDN for order-2, well-formed (CRLF, LF only), and
// re-wrapped around the same signature in the three ways the two former
// parsers split differently, each trying to make the lookup read order-1.
func TestMDNLookupAndVerificationSplitAlike(t *testing.T) {
	genuine := "<order-2@floodgate>"
	report := splitReport(genuine)
	ct, sig := signReport(t, report)
	const o = "--" + splitOuter
	// lfInner is the report with its delimiters after the first on bare LF:
	// the signature still verifies over its CRLF form.
	lfInner := bytes.ReplaceAll(report, []byte("\r\n--"+splitInner), []byte("\n--"+splitInner))
	forged := "\r\n--" + splitInner + "\r\nContent-Type: message/disposition-notification\r\n\r\n" +
		"Original-Message-ID: <order-1@floodgate>\r\nDisposition: automatic-action/MDN-sent-automatically; failed/failure: forged\r\n\r\n--" + splitInner + "--"
	crlf := o + "\r\n" + string(report) + "\r\n" + o + "\r\n" + string(sig) + "\r\n" + o + "--\r\n"
	tests := []struct {
		name, body string
		accept     bool // else both refuse
	}{
		{"CRLF", crlf, true},
		{"LF only", strings.ReplaceAll(crlf, "\r\n", "\n"), true},
		// Delimiters after the first on bare LF, outside and inside.
		{"bare-LF delimiters", o + "\r\n" + string(lfInner) + "\n" + o + "\r\n" + string(sig) + "\n" + o + "--\r\n", true},
		// An LF-only close delimiter, then an epilogue holding a forged
		// notification and a CRLF close.
		{"epilogue after LF-only close", o + "\r\n" + string(lfInner) + "\n" + o + "\r\n" + string(sig) + "\n" + o + "--\r\n" + forged + "\r\n" + o + "--\r\n", true},
		// A line "--B " followed by other text: not a delimiter to one
		// reader, the end of the first part to another.
		{"delimiter line with text after it", o + "\r\n" + string(report) + "\r\n" + o + " x\r\n" + forged + "\r\n" + o + "\r\n" + string(sig) + "\r\n" + o + "--\r\n", false},
		{"close delimiter with text after it", o + "\r\n" + string(report) + "\r\n" + o + "\r\n" + string(sig) + "\r\n" + o + "-- x\r\n" + forged + "\r\n" + o + "--\r\n", false},
	}
	cert := testPKI(t).Partner.Cert
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lookup, lerr := as2.ParseMDN(ct, []byte(tt.body))
			verified, verr := as2.VerifyMDN(ct, []byte(tt.body), cert)
			if !tt.accept {
				if lerr == nil || verr == nil {
					t.Fatalf("lookup %s, %v; verification %s, %v; want both refused", mdnSummary(lookup), lerr, mdnSummary(verified), verr)
				}
				if !errors.Is(lerr, as2.ErrMalformedMDN) || !errors.Is(verr, as2.ErrMalformedMDN) {
					t.Errorf("lookup %v; verification %v; want both ErrMalformedMDN", lerr, verr)
				}
				return
			}
			if lerr != nil || verr != nil {
				t.Fatalf("lookup %v; verification %v; want both to accept", lerr, verr)
			}
			if !verified.Verified || !lookup.Signed {
				t.Errorf("verified %v, signed %v", verified.Verified, lookup.Signed)
			}
			if lookup.OriginalMessageID != genuine || verified.OriginalMessageID != genuine ||
				lookup.DispositionField != verified.DispositionField || lookup.Text != verified.Text {
				t.Errorf("lookup read %q %q %q, verification %q %q %q; want both %q",
					lookup.OriginalMessageID, lookup.DispositionField, lookup.Text,
					verified.OriginalMessageID, verified.DispositionField, verified.Text, genuine)
			}
		})
	}
}

// mdnSummary names what an MDN says, for test messages.
func mdnSummary(m *as2.MDN) string {
	if m == nil {
		return "no MDN"
	}
	return fmt.Sprintf("MDN for %s (%s)", m.OriginalMessageID, m.DispositionField)
}

// TestOpenSSLMDNLookupAndVerificationAgree: an MDN signed by OpenSSL "cms
// -sign", written with CRLF (-crlfeol) and with LF line ends (its default
// for the MIME structure; the content signed stays CRLF with -binary),
// reads the same to the lookup (ParseMDN) and to the verification
// (VerifyMDN), and verifies.
func TestOpenSSLMDNLookupAndVerificationAgree(t *testing.T) {
	needOpenSSL(t)
	dir, files := interopDir(t)
	genuine := "<openssl-mdn@floodgate>"
	writeFile(t, dir, "report.txt", splitReport(genuine))
	cert := testPKI(t).Partner.Cert
	for _, eol := range []string{"-crlfeol", ""} {
		name := map[string]string{"-crlfeol": "CRLF", "": "LF"}[eol]
		t.Run(name, func(t *testing.T) {
			args := []string{"cms", "-sign", "-in", "report.txt", "-signer", files.PartnerCert, "-inkey", files.PartnerKey,
				"-md", "sha256", "-binary", "-out", "mdn-" + name + ".eml"}
			if eol != "" {
				args = append(args, eol)
			}
			openssl(t, dir, args...)
			ct, body := smimeFile(t, readFile(t, dir, "mdn-"+name+".eml"))
			_, params, err := mime.ParseMediaType(ct)
			if err != nil {
				t.Fatal(err)
			}
			end := []byte("\n--" + params["boundary"] + "--")
			i := bytes.LastIndex(body, end)
			if crlf := i > 0 && body[i-1] == '\r' && bytes.HasPrefix(body[i+len(end):], []byte("\r\n")); i < 0 || crlf != (eol != "") {
				t.Fatalf("OpenSSL wrote a CRLF close delimiter: %v, with %q", crlf, eol)
			}
			lookup, lerr := as2.ParseMDN(ct, body)
			verified, verr := as2.VerifyMDN(ct, body, cert)
			if lerr != nil || verr != nil {
				t.Fatalf("lookup %v; verification %v", lerr, verr)
			}
			if !verified.Verified || lookup.OriginalMessageID != genuine || verified.OriginalMessageID != genuine ||
				lookup.DispositionField != verified.DispositionField {
				t.Errorf("lookup %s, verification %s (verified %v); want both for %s", mdnSummary(lookup), mdnSummary(verified), verified.Verified, genuine)
			}
		})
	}
}
