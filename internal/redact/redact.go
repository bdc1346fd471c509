// Package redact keeps credentials out of printed NATS URLs and errors.
package redact

import "strings"

// URL returns urls (one URL or a comma-separated list, with or without a
// scheme) with the user information of each, everything from after its
// "://" (or the start of a part without one) to its last '@', replaced by
// "REDACTED", and its query, which can carry a token, by "REDACTED", so a
// user, password or token is never printed, even one holding a comma (a
// list separator) or a bad escape. Parts are returned trimmed.
func URL(urls string) string {
	var b strings.Builder
	last := 0
	for _, sp := range secretSpans(urls) {
		b.WriteString(urls[last:sp[0]])
		b.WriteString("REDACTED")
		last = sp[1]
	}
	b.WriteString(urls[last:])
	parts := strings.Split(b.String(), ",")
	for i, p := range parts {
		parts[i] = strings.TrimSpace(p)
	}
	return strings.Join(parts, ",")
}

// secretSpans returns the byte ranges of urls that hold credentials: each
// URL's user information and query, in order. A URL starts at a scheme's
// "://" (its scheme after the last ',' before it); text before the first
// scheme is a part of its own. A user information runs to the last '@'
// of its URL, so a password holding ',' or '@' is covered whole.
func secretSpans(urls string) [][2]int {
	type part struct{ auth, end int }
	var parts []part
	start := 0 // of the current part's text
	auth := 0  // where the current part's authority starts
	for i := 0; ; {
		j := strings.Index(urls[i:], "://")
		if j < 0 {
			break
		}
		p := i + j
		// The next URL's scheme starts after the last ',' before "://".
		if c := strings.LastIndex(urls[start:p], ","); c >= 0 && p > auth {
			parts = append(parts, part{auth, start + c})
			start = start + c + 1
		}
		auth = p + 3
		i = auth
	}
	parts = append(parts, part{auth, len(urls)})
	var spans [][2]int
	for _, pt := range parts {
		text := urls[pt.auth:pt.end]
		host := 0
		if at := strings.LastIndex(text, "@"); at >= 0 {
			if at > 0 {
				spans = append(spans, [2]int{pt.auth, pt.auth + at})
			}
			host = at + 1
		}
		if q := strings.IndexByte(text[host:], '?'); q >= 0 && host+q+1 < len(text) {
			spans = append(spans, [2]int{pt.auth + host + q + 1, pt.end})
		}
	}
	return spans
}

// Error returns err with every credential of urls removed from its text:
// each user information and query (see [URL]), the pieces of it between
// commas (a client splitting the list quotes them apart) and colons, of 3
// bytes or more, and its percent escapes (a parse error quotes a bad one). errors.Is and errors.As still
// see err. It returns nil for a nil err.
func Error(err error, urls string) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	for _, sp := range secretSpans(urls) {
		secret := urls[sp[0]:sp[1]]
		msg = strings.ReplaceAll(msg, secret, "REDACTED")
		// Longest first: the pieces between commas, then their user and
		// password apart (a parse error quotes ":password" as a port).
		pieces := strings.Split(secret, ",")
		for _, p := range pieces {
			pieces = append(pieces, strings.Split(p, ":")...)
		}
		for _, piece := range pieces {
			if piece = strings.TrimSpace(piece); len(piece) >= 3 {
				msg = strings.ReplaceAll(msg, piece, "REDACTED")
			}
		}
		for i := strings.IndexByte(secret, '%'); i >= 0; {
			esc := secret[i:min(i+3, len(secret))]
			if len(esc) > 1 {
				msg = strings.ReplaceAll(msg, esc, "%REDACTED")
			}
			next := strings.IndexByte(secret[i+1:], '%')
			if next < 0 {
				break
			}
			i += 1 + next
		}
	}
	if msg == err.Error() {
		return err
	}
	return &redacted{msg: msg, err: err}
}

type redacted struct {
	msg string
	err error
}

func (r *redacted) Error() string { return r.msg }
func (r *redacted) Unwrap() error { return r.err }
