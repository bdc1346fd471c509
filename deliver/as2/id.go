package as2

import (
	"fmt"
	"strings"
)

// MessageID returns the Message-ID header value for the message with the
// given id: "<" + id + "@" + domain + ">" (RFC 5322 §3.6.4). The same id gives
// the same Message-ID on every attempt, so the partner can recognise a
// duplicate. MessageID does not validate; [Sender.Build] does.
func MessageID(id, domain string) string {
	return "<" + id + "@" + domain + ">"
}

// maxAS2IDLen is the longest AS2 ID, RFC 4130 §6.2.
const maxAS2IDLen = 128

// ValidAS2ID reports whether id can be an AS2 ID: 1 to 128 printable ASCII
// characters (0x20 to 0x7E), RFC 4130 §6.2. IDs with a space, a double quote
// or a backslash are valid but are sent quoted ([QuoteAS2ID]).
func ValidAS2ID(id string) bool {
	if len(id) == 0 || len(id) > maxAS2IDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] < 0x20 || id[i] > 0x7e {
			return false
		}
	}
	return true
}

// isAS2Text reports whether c may appear in an unquoted AS2 ID: printable
// ASCII except space, double quote and backslash (RFC 4130 §6.2 AS2-text).
func isAS2Text(c byte) bool {
	return c > 0x20 && c < 0x7f && c != '"' && c != '\\'
}

// QuoteAS2ID returns id as it goes in an AS2-From or AS2-To header: as is when
// every character is AS2-text, otherwise as a quoted string with '"' and '\'
// escaped by a backslash (RFC 4130 §6.2 AS2-quoted-name). id should satisfy
// [ValidAS2ID].
func QuoteAS2ID(id string) string {
	plain := id != ""
	for i := 0; i < len(id); i++ {
		if !isAS2Text(id[i]) {
			plain = false
			break
		}
	}
	if plain {
		return id
	}
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(id); i++ {
		if id[i] == '"' || id[i] == '\\' {
			b.WriteByte('\\')
		}
		b.WriteByte(id[i])
	}
	b.WriteByte('"')
	return b.String()
}

// ParseAS2ID parses an AS2-From or AS2-To header value, quoted or not, and
// returns the AS2 ID. It returns an error wrapping [ErrAS2ID] when the value
// is not an AS2-name of RFC 4130 §6.2.
func ParseAS2ID(v string) (string, error) {
	v = strings.TrimSpace(v)
	if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
		var b strings.Builder
		inner := v[1 : len(v)-1]
		for i := 0; i < len(inner); i++ {
			c := inner[i]
			switch {
			case c == '\\':
				if i+1 >= len(inner) || (inner[i+1] != '"' && inner[i+1] != '\\') {
					return "", fmt.Errorf("%w: bad escape in %q", ErrAS2ID, v)
				}
				i++
				b.WriteByte(inner[i])
			case c == '"':
				return "", fmt.Errorf("%w: unescaped quote in %q", ErrAS2ID, v)
			default:
				b.WriteByte(c)
			}
		}
		id := b.String()
		if !ValidAS2ID(id) {
			return "", fmt.Errorf("%w: %q", ErrAS2ID, v)
		}
		return id, nil
	}
	if len(v) == 0 || len(v) > maxAS2IDLen {
		return "", fmt.Errorf("%w: %q", ErrAS2ID, v)
	}
	for i := 0; i < len(v); i++ {
		if !isAS2Text(v[i]) {
			return "", fmt.Errorf("%w: %q must be quoted", ErrAS2ID, v)
		}
	}
	return v, nil
}

// isAtext reports whether c is RFC 5322 §3.2.3 atext.
func isAtext(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-/=?^_`{|}~", c) >= 0
}

// isDotAtom reports whether s is RFC 5322 §3.2.3 dot-atom-text: atext runs
// separated by single dots, no leading or trailing dot.
func isDotAtom(s string) bool {
	if s == "" || s[0] == '.' || s[len(s)-1] == '.' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] == '.' {
			if s[i-1] == '.' {
				return false
			}
			continue
		}
		if !isAtext(s[i]) {
			return false
		}
	}
	return true
}

// normalizeMessageID returns a Message-ID without surrounding whitespace and
// angle brackets, for comparing an MDN's Original-Message-ID with the one
// sent: some receivers echo it without brackets.
func normalizeMessageID(s string) string {
	s = strings.TrimSpace(s)
	s = strings.TrimPrefix(s, "<")
	s = strings.TrimSuffix(s, ">")
	return strings.TrimSpace(s)
}
