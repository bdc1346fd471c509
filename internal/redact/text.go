package redact

import (
	"regexp"
	"strings"
)

// sensitiveName matches a sensitive header or field name followed by its
// separator, optionally quoted (JSON, or Go %q quoting with \"): the
// credential headers (Authorization, Proxy-Authorization, Cookie,
// Set-Cookie), every *signature header (webhook-signature,
// X-Floodgate-Signature, X-Hub-Signature-256, ...), API keys, and *token,
// *secret, *password fields.
var sensitiveName = regexp.MustCompile(`(?i)\b((?:proxy-)?authorization|(?:set-)?cookie|[a-z0-9_-]*signature(?:-[0-9]+)?|[a-z0-9_-]*api[_-]?key|[a-z0-9_-]*(?:token|secret|password))(?:\\?["'])?[ \t]*[:=][ \t]*`)

// hints are lower-case substrings one of which every sensitiveName match
// holds: a cheap test before the regular expression.
var hints = []string{"authorization", "cookie", "signature", "key", "token", "secret", "password"}

// Headers returns s with the value of every sensitive header or field
// (see sensitiveName) replaced by [Marker]: a quoted value up to its
// closing quote, an unquoted one up to the end of its line. Partner
// responses quoted in errors go through it before they are logged or
// stored, so an echoed Authorization, Cookie or signature never is.
func Headers(s string) string {
	if !mayHold(s) {
		return s
	}
	locs := sensitiveName.FindAllStringIndex(s, -1)
	if locs == nil {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	last := 0
	for _, loc := range locs {
		if loc[0] < last {
			continue // inside a value already redacted
		}
		b.WriteString(s[last:loc[1]])
		b.WriteString(Marker)
		last = valueEnd(s, loc[1])
	}
	b.WriteString(s[last:])
	return b.String()
}

// valueEnd returns the end of the value starting at i: after its closing
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

// mayHold reports whether s holds one of hints, ASCII case-insensitively.
func mayHold(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i] | 0x20
		switch c {
		case 'a', 'c', 's', 'k', 't', 'p':
		default:
			continue
		}
		for _, h := range hints {
			if c == h[0] && len(s)-i >= len(h) && strings.EqualFold(s[i:i+len(h)], h) {
				return true
			}
		}
	}
	return false
}
