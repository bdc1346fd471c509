package partner

import (
	"crypto/sha256"
	"encoding/base32"
	"strings"
)

// MaxTokenLen is the longest token [Token] returns, in bytes (all ASCII).
// It leaves room, inside NATS's 255-byte limit on consumer names
// (nats-server JSMaxNameLen), for a route prefix and a suffix.
const MaxTokenLen = 64

const (
	escapeChar = '='
	hexDigits  = "0123456789ABCDEF"
	// hashMark separates a hashed token's readable prefix from its hash.
	// The escape code never writes it: an escape is "=" and two hex digits.
	hashMark = "=="
	// hashLen is the length of the base32 hash: 20 bytes of SHA-256, 160 bits.
	hashLen = 32
	// prefixLen is the longest readable prefix of a hashed token.
	prefixLen = MaxTokenLen - len(hashMark) - hashLen
	// emptyToken is the token of the empty key: "=" alone is no escape.
	emptyToken = "="
)

var hashEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

// plain reports whether byte c stands for itself in a token.
func plain(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_'
}

// Token returns the token of a partner key: a name for the partner that is
// safe wherever floodgate puts it. Any byte string is a key, including the
// empty string, invalid UTF-8 and keys of any length. Token is a pure
// function, the same in every process and release.
//
// The letters A-Z and a-z, the digits, '-' and '_' stand for themselves;
// every other byte b is written "=XX", XX being b in two upper-case hex
// digits (quoted-printable's escape), so "ACME-RETAIL" stays "ACME-RETAIL"
// and "a.b" becomes "a=2Eb". The empty key is "=". When that text would be
// longer than [MaxTokenLen], the token is instead the longest prefix of it
// (whole escapes only) of at most 30 bytes, then "==", then 32 base32 digits
// of the SHA-256 of the key (160 bits): see [IsHashed] and [Verify].
//
// Distinct keys have distinct tokens: the escaped form is a prefix-free code
// (hence decodable, see [Decode]), a hashed token contains "==", which no
// escaped form does, and two long keys share a token only if their SHA-256
// hashes share 160 bits. A token matches [-_=A-Za-z0-9]{1,64}, so it is a
// valid NATS subject token (no '.', '*', '>' or whitespace), JetStream
// consumer name, JetStream KV key, breaker/natskv fleet name and Prometheus
// label value (ASCII, hence valid UTF-8). Tokens are case-sensitive, as
// NATS subjects are.
//
// Token allocates its result. It is safe for concurrent use.
func Token(key string) string {
	if key == "" {
		return emptyToken
	}
	n := escapedLen(key, MaxTokenLen+1)
	if n <= MaxTokenLen {
		if n == len(key) {
			return key
		}
		var b strings.Builder
		b.Grow(n)
		writeEscaped(&b, key, n)
		return b.String()
	}
	sum := sha256.Sum256([]byte(key))
	var b strings.Builder
	b.Grow(MaxTokenLen)
	writeEscaped(&b, key, prefixLen)
	b.WriteString(hashMark)
	var h [hashLen]byte
	hashEncoding.Encode(h[:], sum[:hashLen*5/8])
	b.Write(h[:])
	return b.String()
}

// escapedLen returns the length of key's escaped form, or a number > limit
// once it exceeds limit.
func escapedLen(key string, limit int) int {
	n := 0
	for i := 0; i < len(key) && n <= limit; i++ {
		if plain(key[i]) {
			n++
		} else {
			n += 3
		}
	}
	return n
}

// writeEscaped writes the escaped form of key, stopping before the escape
// that would take it past limit bytes.
func writeEscaped(b *strings.Builder, key string, limit int) {
	n := 0
	for i := 0; i < len(key); i++ {
		c := key[i]
		if plain(c) {
			if n+1 > limit {
				return
			}
			b.WriteByte(c)
			n++
			continue
		}
		if n+3 > limit {
			return
		}
		b.WriteByte(escapeChar)
		b.WriteByte(hexDigits[c>>4])
		b.WriteByte(hexDigits[c&0xF])
		n += 3
	}
}

// IsHashed reports whether token is a hashed token: the token of a key
// whose escaped form is longer than [MaxTokenLen]. The key of a hashed
// token cannot be recovered from it; carry the key beside it (floodgate
// carries it in a message header) and check it with [Verify].
func IsHashed(token string) bool {
	i := strings.Index(token, hashMark)
	if i < 0 || i > prefixLen || len(token)-i-len(hashMark) != hashLen {
		return false
	}
	for _, c := range []byte(token[i+len(hashMark):]) {
		if !('A' <= c && c <= 'Z' || '2' <= c && c <= '7') {
			return false
		}
	}
	_, err := decodeEscaped(token[:i])
	return err == nil
}

// Decode returns the key whose token is token. It returns an error matching
// [ErrHashedToken] for a hashed token (see [IsHashed]) and [ErrInvalidToken]
// for a string that is not the token of any key: Decode accepts exactly the
// strings [Token] returns, so Token(key) == token whenever it succeeds.
func Decode(token string) (string, error) {
	switch {
	case token == emptyToken:
		return "", nil
	case token == "":
		return "", ErrInvalidToken
	case IsHashed(token):
		return "", ErrHashedToken
	}
	if len(token) > MaxTokenLen {
		return "", ErrInvalidToken
	}
	return decodeEscaped(token)
}

// decodeEscaped decodes an escaped form, accepting only what writeEscaped
// writes.
func decodeEscaped(token string) (string, error) {
	var b strings.Builder
	b.Grow(len(token))
	for i := 0; i < len(token); i++ {
		c := token[i]
		if plain(c) {
			b.WriteByte(c)
			continue
		}
		if c != escapeChar || i+2 >= len(token) {
			return "", ErrInvalidToken
		}
		hi, lo := unhex(token[i+1]), unhex(token[i+2])
		if hi < 0 || lo < 0 || plain(byte(hi<<4|lo)) {
			return "", ErrInvalidToken
		}
		b.WriteByte(byte(hi<<4 | lo))
		i += 2
	}
	return b.String(), nil
}

// unhex returns the value of an upper-case hex digit, or -1.
func unhex(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'A' <= c && c <= 'F':
		return int(c - 'A' + 10)
	}
	return -1
}

// Verify checks that key is the key of token: nil when Token(key) ==
// token, else an error matching [ErrTokenMismatch]. Use it where a hashed
// token arrives with the raw key beside it (a drained message's header), so
// a message whose key and token disagree is dead-lettered rather than
// delivered to another partner. It works for every token, hashed or not.
func Verify(key, token string) error {
	if Token(key) != token {
		return ErrTokenMismatch
	}
	return nil
}
