// Package redact keeps credentials out of printed NATS URLs and errors.
package redact

import (
	"slices"
	"strings"
)

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
		b.WriteString(urls[last:sp.start])
		b.WriteString("REDACTED")
		last = sp.end
	}
	b.WriteString(urls[last:])
	parts := strings.Split(b.String(), ",")
	for i, p := range parts {
		parts[i] = strings.TrimSpace(p)
	}
	return strings.Join(parts, ",")
}

// secretSpans returns the byte ranges of urls that hold credentials: each
// URL's user information and query, in order, with for each the pieces an
// error may quote apart (see Error). A URL starts at a scheme ("nats://")
// at the start of urls or after a ',' (spaces allowed); a "://" elsewhere
// (in a password or a query) starts nothing. Text before the first scheme
// is a part of its own. A user information runs to the last '@' of its
// part, so a password holding ',' or '@' is covered whole.
func secretSpans(urls string) []span {
	type part struct{ auth, end int }
	var parts []part
	auth := 0 // where the current part's authority starts
	for i := 0; ; {
		j := strings.Index(urls[i:], "://")
		if j < 0 {
			break
		}
		p := i + j
		i = p + 3
		k := p
		for k > 0 && schemeByte(urls[k-1]) {
			k--
		}
		b := k
		for b > 0 && urls[b-1] == ' ' {
			b--
		}
		switch {
		case k == p: // no scheme name
			continue
		case b == 0: // the first part's scheme
		case urls[b-1] != ',':
			continue // inside a password or a query
		default: // a new URL: the part before ends at the ','
			parts = append(parts, part{auth, b - 1})
		}
		auth = p + 3
	}
	parts = append(parts, part{auth, len(urls)})
	var spans []span
	for _, pt := range parts {
		text := urls[pt.auth:pt.end]
		host := 0
		if at := strings.LastIndex(text, "@"); at >= 0 {
			if at > 0 {
				spans = append(spans, span{start: pt.auth, end: pt.auth + at, password: passwordOf(text[:at])})
			}
			host = at + 1
		}
		if q := strings.IndexByte(text[host:], '?'); q >= 0 && host+q+1 < len(text) {
			query := text[host+q+1:]
			var values []string
			for _, kv := range strings.Split(query, "&") {
				_, v, _ := strings.Cut(kv, "=")
				values = append(values, v)
			}
			spans = append(spans, span{start: pt.auth + host + q + 1, end: pt.end, pieces: values})
		}
	}
	return spans
}

// span is a credential's byte range in a URL list; password is the
// password of a user information ("" for none), pieces the values of a
// query.
type span struct {
	start, end int
	password   string
	pieces     []string
}

// passwordOf returns the password of a user information, "" for none.
func passwordOf(userinfo string) string {
	_, pw, _ := strings.Cut(userinfo, ":")
	return pw
}

func schemeByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '+' || c == '-' || c == '.'
}

// Error returns err with every credential of urls removed from its text:
// each user information and query (see [URL]); a password's pieces
// between commas (a client splitting the list quotes them apart), of 3
// bytes or more, and its percent escapes (a parse error quotes a bad
// one); a query's values of 3 bytes or more. A user name alone is left
// where it appears outside its URL (it is often a word such as "nats").
// errors.Is and errors.As still see err. It returns nil for a nil err.
func Error(err error, urls string) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	for _, sp := range secretSpans(urls) {
		msg = strings.ReplaceAll(msg, urls[sp.start:sp.end], "REDACTED")
		pieces := slices.Clone(sp.pieces)
		if sp.password != "" {
			pieces = append(pieces, sp.password)
			pieces = append(pieces, strings.Split(sp.password, ",")...)
		}
		slices.SortFunc(pieces, func(a, b string) int { return len(b) - len(a) })
		for _, piece := range pieces {
			if piece = strings.TrimSpace(piece); len(piece) >= 3 {
				msg = strings.ReplaceAll(msg, piece, "REDACTED")
			}
		}
		for pw := sp.password; ; {
			i := strings.IndexByte(pw, '%')
			if i < 0 {
				break
			}
			if esc := pw[i:min(i+3, len(pw))]; len(esc) > 1 {
				msg = strings.ReplaceAll(msg, esc, "%REDACTED")
			}
			pw = pw[i+1:]
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
