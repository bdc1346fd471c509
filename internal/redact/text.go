package redact

import "strings"

// names are the lower-case ends of sensitive header or field names: the
// credential headers (Authorization, Proxy-Authorization, Cookie,
// Set-Cookie), every *signature header (webhook-signature,
// X-Floodgate-Signature, X-Hub-Signature-256, ...), API keys, and *token,
// *secret, *password fields. A prefix such as "X-Floodgate-" needs no
// match.
var names = []string{"authorization", "cookie", "signature", "api-key", "api_key", "apikey", "token", "secret", "password"}

// Headers returns s with the value of every sensitive header or field
// (see names) replaced by [Marker]. A name counts when it is followed,
// optionally after a quote (", ' or Go's \") and spaces, by ':' or '=';
// the value is then a quoted string up to its closing quote, or else the
// rest of its line. Partner responses quoted in errors go through it
// before they are logged or stored, so an echoed Authorization, Cookie or
// signature never is. It allocates only when it redacts.
func Headers(s string) string {
	var b strings.Builder
	last := 0
	for i := 0; i < len(s); i++ {
		switch s[i] | 0x20 {
		case 'a', 'c', 's', 't', 'p':
		default:
			continue
		}
		n := nameAt(s, i)
		if n == 0 {
			continue
		}
		v := valueStart(s, i+n)
		if v < 0 {
			continue
		}
		if b.Len() == 0 {
			b.Grow(len(s))
		}
		b.WriteString(s[last:v])
		b.WriteString(Marker)
		last = valueEnd(s, v)
		i = last - 1
	}
	if last == 0 {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
}

// nameAt returns the length of the sensitive name at s[i:], 0 if none.
func nameAt(s string, i int) int {
	for _, n := range names {
		if n[0] == s[i]|0x20 && hasFold(s[i:], n) {
			j := i + len(n)
			if n == "signature" { // X-Hub-Signature-256
				if k := j; k+1 < len(s) && s[k] == '-' && '0' <= s[k+1] && s[k+1] <= '9' {
					for k++; k < len(s) && '0' <= s[k] && s[k] <= '9'; k++ {
					}
					j = k
				}
			}
			return j - i
		}
	}
	return 0
}

// valueStart returns where the value after the name ending at i begins,
// or -1 if no separator follows the name.
func valueStart(s string, i int) int {
	switch {
	case strings.HasPrefix(s[i:], `\"`):
		i += 2
	case i < len(s) && (s[i] == '"' || s[i] == '\''):
		i++
	}
	for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
		i++
	}
	if i >= len(s) || (s[i] != ':' && s[i] != '=') {
		return -1
	}
	for i++; i < len(s) && (s[i] == ' ' || s[i] == '\t'); i++ {
	}
	return i
}

// valueEnd returns the end of the value starting at i: at its closing
// quote (", ' or \") if quoted, else the end of the line.
func valueEnd(s string, i int) int {
	quote := ""
	switch {
	case strings.HasPrefix(s[i:], `\"`):
		quote = `\"`
	case strings.HasPrefix(s[i:], `"`), strings.HasPrefix(s[i:], `'`):
		quote = s[i : i+1]
	}
	if quote != "" {
		if j := strings.Index(s[i+len(quote):], quote); j >= 0 {
			return i + len(quote) + j
		}
		return len(s)
	}
	if j := strings.IndexAny(s[i:], "\r\n"); j >= 0 {
		return i + j
	}
	return len(s)
}

// hasFold reports whether s starts with the lower-case ASCII name n, ASCII
// case-insensitively.
func hasFold(s, n string) bool {
	if len(s) < len(n) {
		return false
	}
	for k := 0; k < len(n); k++ {
		c := s[k]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != n[k] {
			return false
		}
	}
	return true
}
