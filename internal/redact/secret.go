package redact

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
)

// Marker replaces every secret value in printed output.
const Marker = "REDACTED"

// Bytes returns "" for an empty secret, else [Marker]. Neither the value
// nor its length is printed.
func Bytes(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return Marker
}

// String is [Bytes] of a string secret.
func String(s string) string {
	if s == "" {
		return ""
	}
	return Marker
}

// Key returns "" for a nil private key, else [Marker] followed by its Go
// type (for example "REDACTED *rsa.PrivateKey"): never a part of the key.
func Key(k any) string {
	if k == nil {
		return ""
	}
	return fmt.Sprintf("%s %T", Marker, k)
}

// Cert describes a certificate by its subject and the first 8 bytes of its
// SHA-256 fingerprint (public data), "" for nil.
func Cert(c *x509.Certificate) string {
	if c == nil {
		return ""
	}
	sum := sha256.Sum256(c.Raw)
	return fmt.Sprintf("%s sha256:%s", c.Subject.String(), hex.EncodeToString(sum[:8]))
}

// Header returns the names of h, each with the value [Marker]: extra
// request headers often carry an API key.
func Header(h http.Header) map[string]string {
	if len(h) == 0 {
		return nil
	}
	out := make(map[string]string, len(h))
	for k := range h {
		out[k] = Marker
	}
	return out
}

// HTTPURL returns the http(s) URL s with its user information, the
// values of its query and every path segment that may be a secret
// ([Path]) replaced by [Marker], and its fragment dropped; a URL that does
// not parse is replaced whole. Scheme, host and port are kept.
func HTTPURL(s string) string {
	if s == "" {
		return ""
	}
	u, err := url.Parse(s)
	if err != nil {
		return Marker
	}
	if u.User != nil {
		u.User = url.User(Marker)
	}
	if u.RawQuery != "" {
		q := u.Query()
		for k := range q {
			q[k] = []string{Marker}
		}
		u.RawQuery = q.Encode()
	}
	u.Fragment, u.RawFragment = "", ""
	if u.Opaque != "" {
		u.Opaque = Marker
	}
	// The kept segments are plain words and Marker: nothing to escape.
	u.Path, u.RawPath = Path(u.EscapedPath()), ""
	return u.String()
}

// Format prints view, the redacted stand-in of a value holding secrets,
// with the verb and flags f was given: the body of a Format method.
func Format(f fmt.State, verb rune, view any) {
	fmt.Fprintf(f, fmt.FormatString(f, verb), view)
}
