package redact

import (
	"bytes"
	"cmp"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"unicode/utf8"
)

// minEcho is the shortest string [EchoSecrets] lists: shorter ones are no
// secret, and hiding them would mangle ordinary text.
const minEcho = 4

// EchoSecrets returns the strings of a request that a partner's error
// page may echo back and that printed forms hide: the user information,
// the query values and the path segments [Path] hides of rawURL (decoded
// and as escaped), and the values of h (each whole, and each of their
// space- or comma-separated words, such as a bearer token, but for the
// authentication scheme of an Authorization, Proxy-Authorization or
// Cookie value). Strings
// shorter than 4 bytes are left out. The list is sorted longest first, for
// [Scrub].
func EchoSecrets(rawURL string, h http.Header) []string {
	var out []string
	add := func(ss ...string) {
		for _, s := range ss {
			if len(s) >= minEcho {
				out = append(out, s)
			}
		}
	}
	if u, err := url.Parse(rawURL); err == nil {
		if u.User != nil {
			p, _ := u.User.Password()
			add(u.User.Username(), p, u.User.String())
		}
		add(u.RawQuery)
		for _, vs := range u.Query() {
			add(vs...)
		}
		for _, kv := range strings.Split(u.RawQuery, "&") {
			if _, v, ok := strings.Cut(kv, "="); ok {
				add(v)
			}
		}
		for _, p := range []string{u.Path, u.EscapedPath()} {
			for _, s := range strings.Split(p, "/") {
				if !wordLike(s) {
					add(s)
				}
			}
		}
	}
	for name, vs := range h {
		auth := authHeader(name)
		for _, v := range vs {
			add(v)
			words := strings.FieldsFunc(v, func(r rune) bool { return r == ' ' || r == '\t' || r == ',' })
			for i, w := range words {
				// The authentication scheme before a credential ("Bearer",
				// RFC 9110 §11.1) is no secret: hiding it would mangle the
				// partner's error text. Every other word is listed, even a
				// lowercase one (a token may be one).
				if auth && i == 0 && len(words) > 1 && letters(w) {
					continue
				}
				add(w)
			}
		}
	}
	slices.SortFunc(out, func(a, b string) int { return cmp.Or(cmp.Compare(len(b), len(a)), strings.Compare(a, b)) })
	return slices.Compact(out)
}

// Scrub returns s with every occurrence of each of secrets (longest
// first, as [EchoSecrets] sorts them) replaced by [Marker].
func Scrub(s string, secrets []string) string {
	for _, x := range secrets {
		if x != "" && strings.Contains(s, x) {
			s = strings.ReplaceAll(s, x, Marker)
		}
	}
	return s
}

// Longest returns the length of the longest of secrets, 0 for none: read
// this many bytes past a quote's limit, so that a secret that starts
// inside it is hidden whole ([Scrub]) before the quote is cut.
func Longest(secrets []string) int {
	n := 0
	for _, s := range secrets {
		n = max(n, len(s))
	}
	return n
}

// Snippet returns the start of a partner's response body b, for an error
// message: at most limit bytes of it as one line of printable text
// (whitespace runs as one space, control characters dropped), after the
// values of sensitive headers it echoes ([Headers]) and every one of
// secrets it echoes ([Scrub], with [EchoSecrets] of the request) became
// [Marker]. A secret the limit would cut is left out whole; it is found
// only whole, so give b at least limit + [Longest](secrets) bytes when
// the body has them.
func Snippet(b []byte, limit int, secrets []string) string {
	// The cut is chosen in b's own bytes, before any secret is replaced
	// (a replacement changes the text's length): never inside a secret,
	// so a secret straddling it is left out whole.
	cut := min(limit, len(b))
	for moved := true; moved; {
		moved = false
		for _, x := range secrets {
			for i := 0; x != "" && i < cut; {
				j := bytes.Index(b[i:], []byte(x))
				if j < 0 {
					break
				}
				if start := i + j; start < cut && start+len(x) > cut {
					cut, moved = start, true
				}
				i += j + 1
			}
		}
	}
	s := Headers(Scrub(string(b[:cut]), secrets))
	if len(s) > limit {
		s = s[:limit] // secrets shorter than Marker grew: cut text or a Marker only
	}
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	s = strings.Join(strings.Fields(s), " ")
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return -1
		}
		return r
	}, s)
}

// letters reports whether s is ASCII letters only.
func letters(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i] | 0x20; c < 'a' || c > 'z' {
			return false
		}
	}
	return s != ""
}

// authHeader reports whether a header of this name carries credentials
// after an authentication scheme.
func authHeader(name string) bool {
	switch http.CanonicalHeaderKey(name) {
	case "Authorization", "Proxy-Authorization", "Cookie":
		return true
	}
	return false
}
