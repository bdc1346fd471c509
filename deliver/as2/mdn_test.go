package as2_test

import (
	"encoding/base64"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/floodgate-go/floodgate/deliver/as2"
)

// rawMDN is a synchronous MDN written the way some AS2 servers write them:
// CRLF line endings, a preamble, folded fields, quoted parameters, header
// names in odd case, and an extra blank line before the fields.
const rawMDN = "This is a multi-part message in MIME format.\r\n" +
	"\r\n" +
	"------=_Part_17_1690273381.1710408600123\r\n" +
	"Content-Type: text/plain; charset=us-ascii\r\n" +
	"Content-Transfer-Encoding: 7bit\r\n" +
	"\r\n" +
	"The message sent to Recipient BLUEWATERHG on Thu, 14 Mar 2025 09:30:00 GMT\r\n" +
	"with Subject Purchase order has been received, the EDI Interchange was\r\n" +
	"successfully decrypted and its integrity was verified.\r\n" +
	"\r\n" +
	"------=_Part_17_1690273381.1710408600123\r\n" +
	"Content-Type: message/disposition-notification\r\n" +
	"Content-Transfer-Encoding: 7bit\r\n" +
	"\r\n" +
	"\r\n" +
	"Reporting-UA: Bluewater AS2 Gateway 4.2 (build 1193)\r\n" +
	"Original-Recipient: rfc822; BLUEWATERHG\r\n" +
	"final-recipient: rfc822;\r\n" +
	" BLUEWATERHG\r\n" +
	"ORIGINAL-MESSAGE-ID:\r\n" +
	"  <5f0c1a7e-2b7d-4c51-9a57-6f2f3d1e9b10@floodgate>\r\n" +
	"Disposition: automatic-action/MDN-sent-automatically;\r\n" +
	"\tprocessed\r\n" +
	"Received-Content-MIC: 7v7F++fQaNWYUbkMzPh1H4Qgw0bJz0TG5S3RpU6L2QE=,\r\n" +
	" sha-256\r\n" +
	"\r\n" +
	"------=_Part_17_1690273381.1710408600123--\r\n"

const rawMDNType = `multipart/report; Report-Type="disposition-notification"; boundary="----=_Part_17_1690273381.1710408600123"`

func TestParseMDNRaw(t *testing.T) {
	m, err := as2.ParseMDN(rawMDNType, []byte(rawMDN))
	if err != nil {
		t.Fatal(err)
	}
	want := as2.MDN{
		OriginalMessageID:  "<5f0c1a7e-2b7d-4c51-9a57-6f2f3d1e9b10@floodgate>",
		Disposition:        "processed",
		ActionMode:         "automatic-action/MDN-sent-automatically",
		DispositionField:   "automatic-action/MDN-sent-automatically; processed",
		ReceivedContentMIC: "7v7F++fQaNWYUbkMzPh1H4Qgw0bJz0TG5S3RpU6L2QE=, sha-256",
		ReportingUA:        "Bluewater AS2 Gateway 4.2 (build 1193)",
		OriginalRecipient:  "rfc822; BLUEWATERHG",
		FinalRecipient:     "rfc822; BLUEWATERHG",
	}
	check(t, m, want)
	if !m.Processed() {
		t.Error("Processed() = false")
	}
	if !strings.HasPrefix(m.Text, "The message sent to Recipient BLUEWATERHG") || !strings.HasSuffix(m.Text, "verified.") {
		t.Errorf("Text = %q", m.Text)
	}
	if string(m.Raw) != rawMDN {
		t.Error("Raw is not the body")
	}

	// The same with bare LF line endings.
	lf := strings.ReplaceAll(rawMDN, "\r\n", "\n")
	m, err = as2.ParseMDN(rawMDNType, []byte(lf))
	if err != nil {
		t.Fatalf("LF: %v", err)
	}
	check(t, m, want)
}

func check(t *testing.T, got *as2.MDN, want as2.MDN) {
	t.Helper()
	g := *got
	g.Raw, g.Text = nil, ""
	want.Raw, want.Text = nil, ""
	if !reflect.DeepEqual(g, want) {
		t.Errorf("MDN =\n%+v\nwant\n%+v", g, want)
	}
}

func TestParseMDNDispositions(t *testing.T) {
	tests := []struct {
		field          string
		typ, mod, mode string
		processed      bool
	}{
		{"automatic-action/MDN-sent-automatically; processed", "processed", "", "automatic-action/MDN-sent-automatically", true},
		{"automatic-action/MDN-sent-automatically;processed", "processed", "", "automatic-action/MDN-sent-automatically", true},
		{"Automatic-Action/MDN-Sent-Automatically; Processed", "processed", "", "Automatic-Action/MDN-Sent-Automatically", true},
		{"automatic-action/MDN-sent-automatically; processed/warning: duplicate-document", "processed", "warning: duplicate-document", "automatic-action/MDN-sent-automatically", true},
		{"automatic-action/MDN-sent-automatically; processed/Error: authentication-failed", "processed", "Error: authentication-failed", "automatic-action/MDN-sent-automatically", false},
		{"automatic-action/MDN-sent-automatically; processed/error: integrity-check-failed", "processed", "error: integrity-check-failed", "automatic-action/MDN-sent-automatically", false},
		{"automatic-action/MDN-sent-automatically; failed/Failure: unsupported format", "failed", "Failure: unsupported format", "automatic-action/MDN-sent-automatically", false},
		{"automatic-action/MDN-sent-automatically (by gateway); processed", "processed", "", "automatic-action/MDN-sent-automatically", true},
		{"manual-action/MDN-sent-manually; displayed", "displayed", "", "manual-action/MDN-sent-manually", false},
	}
	for _, tt := range tests {
		t.Run(tt.field, func(t *testing.T) {
			body := "--b\r\nContent-Type: message/disposition-notification\r\n\r\n" +
				"Original-Message-ID: <x@y>\r\nDisposition: " + tt.field + "\r\n--b--\r\n"
			m, err := as2.ParseMDN(`multipart/report; report-type=disposition-notification; boundary=b`, []byte(body))
			if err != nil {
				t.Fatal(err)
			}
			if m.Disposition != tt.typ || m.Modifier != tt.mod || m.ActionMode != tt.mode || m.Processed() != tt.processed {
				t.Errorf("got %q %q %q processed=%v", m.Disposition, m.Modifier, m.ActionMode, m.Processed())
			}
			if m.DispositionField != tt.field {
				t.Errorf("DispositionField = %q", m.DispositionField)
			}
		})
	}
}

func TestParseMDNEncodings(t *testing.T) {
	fields := "Original-Message-ID: <abc@floodgate>\r\nDisposition: automatic-action/MDN-sent-automatically; processed\r\nReceived-Content-MIC: ungWv48Bz+pBQUDeXa4iI7ADYaOWF3qctBD/YfIAFa0=, sha-256\r\n"
	b64 := base64.StdEncoding.EncodeToString([]byte(fields))
	b64 = b64[:40] + "\r\n" + b64[40:] // wrapped lines
	qp := strings.ReplaceAll(fields, "=, sha", "=3D, sha")

	ct := "multipart/report; report-type=disposition-notification; boundary=XYZ"
	for name, body := range map[string]string{
		"base64":                            "--XYZ\r\nContent-Type: message/disposition-notification\r\nContent-Transfer-Encoding: base64\r\n\r\n" + b64 + "\r\n--XYZ--",
		"quoted-printable":                  "--XYZ\r\nContent-Type: message/disposition-notification\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n" + qp + "\r\n--XYZ--",
		"no text part, no trailing newline": "--XYZ\r\nContent-Type: message/disposition-notification\r\n\r\n" + strings.TrimSuffix(fields, "\r\n") + "\r\n--XYZ--",
	} {
		t.Run(name, func(t *testing.T) {
			m, err := as2.ParseMDN(ct, []byte(body))
			if err != nil {
				t.Fatal(err)
			}
			if m.OriginalMessageID != "<abc@floodgate>" || !m.Processed() ||
				m.ReceivedContentMIC != "ungWv48Bz+pBQUDeXa4iI7ADYaOWF3qctBD/YfIAFa0=, sha-256" {
				t.Errorf("MDN = %+v", m)
			}
		})
	}
}

func TestParseMDNSigned(t *testing.T) {
	// A signed MDN (RFC 4130 §7.4.2): multipart/signed around the report. The
	// signature is not verified.
	inner := strings.ReplaceAll(rawMDN, "------=_Part_17_1690273381.1710408600123", "--inner")
	body := "--outer\r\n" +
		"Content-Type: multipart/report; report-type=disposition-notification;\r\n\tboundary=\"inner\"\r\n" +
		"\r\n" + inner +
		"\r\n--outer\r\n" +
		"Content-Type: application/pkcs7-signature; name=smime.p7s\r\n" +
		"Content-Transfer-Encoding: base64\r\n\r\nMIAGCSqGSIb3DQEHAqCAMIACAQExDzANBglghkgBZQMEAgEFADCABgkqhkiG9w0BBwEAAKCAMIIC\r\n" +
		"--outer--\r\n"
	m, err := as2.ParseMDN(`multipart/signed; protocol="application/pkcs7-signature"; micalg=sha-256; boundary="outer"`, []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	if !m.Signed || !m.Processed() || m.OriginalMessageID != "<5f0c1a7e-2b7d-4c51-9a57-6f2f3d1e9b10@floodgate>" {
		t.Errorf("MDN = %+v", m)
	}
}

func TestParseMDNRejects(t *testing.T) {
	tests := []struct {
		name, ct, body string
		want           error
	}{
		{"html error page", "text/html", "<html>Service Temporarily Unavailable</html>", as2.ErrNoMDN},
		{"no content type", "", "", as2.ErrNoMDN},
		{"delivery status report", "multipart/report; report-type=delivery-status; boundary=b", "--b\r\n\r\nx\r\n--b--", as2.ErrNoMDN},
		{"no boundary", "multipart/report; report-type=disposition-notification", "x", as2.ErrMalformedMDN},
		{"no notification part", "multipart/report; report-type=disposition-notification; boundary=b", "--b\r\nContent-Type: text/plain\r\n\r\nhello\r\n--b--\r\n", as2.ErrMalformedMDN},
		{"no Disposition field", "multipart/report; report-type=disposition-notification; boundary=b", "--b\r\nContent-Type: message/disposition-notification\r\n\r\nOriginal-Message-ID: <x@y>\r\n--b--\r\n", as2.ErrMalformedMDN},
		{"Disposition without type", "multipart/report; report-type=disposition-notification; boundary=b", "--b\r\nContent-Type: message/disposition-notification\r\n\r\nDisposition: automatic-action/MDN-sent-automatically\r\n--b--\r\n", as2.ErrMalformedMDN},
		{"truncated", rawMDNType, rawMDN[:300], as2.ErrMalformedMDN},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := as2.ParseMDN(tt.ct, []byte(tt.body))
			if !errors.Is(err, tt.want) || m != nil {
				t.Errorf("ParseMDN = %+v, %v; want %v", m, err, tt.want)
			}
		})
	}
}
