package partner_test

import (
	"errors"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/prometheus/client_golang/prometheus"
	"pgregory.net/rapid"

	"github.com/floodgate-go/floodgate/breaker/natskv"
	"github.com/floodgate-go/floodgate/partner"
)

// The rules a token must pass, from the code that enforces them.
var (
	// nats.go v1.55.0 jetstream/kv.go validKeyRe and keyValid.
	kvKeyRe = regexp.MustCompile(`^[-/_=\.a-zA-Z0-9]+$`)
	// A gauge vector: label values must be valid UTF-8 (client_golang
	// validateLabelValues; WithLabelValues panics on a bad one).
	labelVec = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "t"}, []string{"partner"})
)

// tokenProblem returns why tok is not valid in one of its roles, or "".
func tokenProblem(tok string) string {
	switch {
	case len(tok) == 0 || len(tok) > partner.MaxTokenLen:
		return "length"
	// A subject token: one token (no '.'), valid and literal, also when
	// embedded in a subject (nats-server sublist.go).
	case strings.Contains(tok, "."), !server.IsValidSubject(tok), !server.IsValidLiteralSubject(tok),
		!server.IsValidSubject("retry.svc." + tok), !server.IsValidLiteralSubject("retry.svc." + tok + ".x"):
		return "subject token"
	// A consumer name: nats-server consumer.go checks len(Durable) <=
	// JSMaxNameLen and isValidAssetName (jetstream.go: non-empty, none of
	// " \t\r\n\f.*>\\/"); nats.go jetstream validateConsumerName refuses
	// ">*. /\\\t\r\n".
	case len(tok) > server.JSMaxNameLen, strings.ContainsAny(tok, " \t\r\n\f.*>\\/"):
		return "consumer name"
	// A KV key: nats.go jetstream keyValid.
	case tok[0] == '.' || tok[len(tok)-1] == '.' || strings.Contains(tok, "..") || !kvKeyRe.MatchString(tok):
		return "KV key"
	case natskv.ValidateName(tok) != nil:
		return "natskv fleet name"
	case !utf8.ValidString(tok):
		return "UTF-8"
	}
	if _, err := labelVec.GetMetricWithLabelValues(tok); err != nil {
		return "label value: " + err.Error()
	}
	labelVec.DeleteLabelValues(tok)
	return ""
}

// keyGen draws keys likely to break an encoding: any bytes, keys built from
// the escape's own characters and the bytes NATS treats specially, tokens
// of other keys used as keys, and long keys around the hashing threshold.
func keyGen() *rapid.Generator[string] {
	special := rapid.SampledFrom([]string{
		"=", "==", "=2E", "=3D", "=5F", "=2e", ".", "*", ">", " ", "\t", "\n", "\r", "\f", "\x00",
		"_", "-", "/", "\\", "A", "2", "E", "F", "a", "\xff", "\xc3", "é", "..",
	})
	crafted := rapid.Custom(func(t *rapid.T) string {
		parts := rapid.SliceOfN(special, 0, 40).Draw(t, "parts")
		return strings.Join(parts, "")
	})
	bytes := rapid.Custom(func(t *rapid.T) string {
		return string(rapid.SliceOfN(rapid.Byte(), 0, 100).Draw(t, "bytes"))
	})
	long := rapid.Custom(func(t *rapid.T) string {
		// Long keys sharing a prefix, differing late: the hash must cover
		// the whole key.
		head := strings.Repeat(rapid.SampledFrom([]string{"a", ".", "AB-"}).Draw(t, "unit"), rapid.IntRange(10, 1500).Draw(t, "n"))
		return head + crafted.Draw(t, "tail")
	})
	tokenOf := rapid.Custom(func(t *rapid.T) string {
		return partner.Token(rapid.OneOf(crafted, bytes).Draw(t, "inner"))
	})
	return rapid.OneOf(crafted, bytes, long, tokenOf, rapid.String())
}

func TestTokenValidInEveryRole(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		key := keyGen().Draw(t, "key")
		tok := partner.Token(key)
		if p := tokenProblem(tok); p != "" {
			t.Fatalf("Token(%q) = %q: invalid as %s", key, tok, p)
		}
	})
}

func TestTokenInjective(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		keys := rapid.SliceOfN(keyGen(), 2, 30).Draw(t, "keys")
		seen := map[string]string{}
		for _, k := range keys {
			tok := partner.Token(k)
			if other, ok := seen[tok]; ok && other != k {
				t.Fatalf("keys %q and %q share token %q", other, k, tok)
			}
			seen[tok] = k
		}
	})
}

// TestTokenRoundTrip: Decode inverts Token on every key that is not
// hashed, which proves Token injective there; hashed tokens are told apart
// and verified against their key.
func TestTokenRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		key := keyGen().Draw(t, "key")
		tok := partner.Token(key)
		if partner.Token(key) != tok {
			t.Fatal("Token is not a function")
		}
		if err := partner.Verify(key, tok); err != nil {
			t.Fatalf("Verify(%q, %q) = %v", key, tok, err)
		}
		if got, want := partner.IsHashed(tok), escapedLen(key) > partner.MaxTokenLen; got != want {
			t.Fatalf("IsHashed(Token(%q) = %q) = %v, escaped length %d", key, tok, got, escapedLen(key))
		}
		got, err := partner.Decode(tok)
		switch {
		case partner.IsHashed(tok):
			if !errors.Is(err, partner.ErrHashedToken) {
				t.Fatalf("Decode(hashed %q) = %q, %v", tok, got, err)
			}
		case err != nil || got != key:
			t.Fatalf("Decode(Token(%q) = %q) = %q, %v", key, tok, got, err)
		}
	})
}

// TestDecodeAcceptsOnlyTokens: a string Decode accepts is the token of what
// it decodes to, so Decode cannot map two strings to one key.
func TestDecodeAcceptsOnlyTokens(t *testing.T) {
	alphabet := rapid.SampledFrom([]string{"=", "A", "z", "0", "F", "f", "2", "E", "-", "_", ".", "3", "D"})
	rapid.Check(t, func(t *rapid.T) {
		s := strings.Join(rapid.SliceOfN(alphabet, 0, 80).Draw(t, "s"), "")
		key, err := partner.Decode(s)
		switch {
		case errors.Is(err, partner.ErrHashedToken) != partner.IsHashed(s):
			t.Fatalf("Decode(%q) = %v, IsHashed %v", s, err, partner.IsHashed(s))
		case err != nil:
			if !errors.Is(err, partner.ErrInvalidToken) && !errors.Is(err, partner.ErrHashedToken) {
				t.Fatalf("Decode(%q) = %v", s, err)
			}
			return
		}
		if tok := partner.Token(key); tok != s {
			t.Fatalf("Decode(%q) = %q, whose token is %q", s, key, tok)
		}
	})
}

func TestVerifyMismatch(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		a, b := keyGen().Draw(t, "a"), keyGen().Draw(t, "b")
		if a == b {
			return
		}
		if err := partner.Verify(b, partner.Token(a)); !errors.Is(err, partner.ErrTokenMismatch) {
			t.Fatalf("Verify(%q, Token(%q)) = %v", b, a, err)
		}
	})
}

// escapedLen is the length of a key's escaped form, written independently
// of the package: three bytes for a byte outside [-_A-Za-z0-9], else one.
func escapedLen(key string) int {
	n := 0
	for _, c := range []byte(key) {
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' {
			n++
		} else {
			n += 3
		}
	}
	return n
}

func TestTokenExamples(t *testing.T) {
	long := strings.Repeat("x", 4096)
	for _, tc := range []struct{ key, want string }{
		{"ACME-RETAIL", "ACME-RETAIL"},
		{"acme_as2", "acme_as2"},
		{"a.b", "a=2Eb"},
		{"a_b", "a_b"},
		{"a=2Eb", "a=3D2Eb"},
		{"", "="},
		{".", "=2E"},
		{"*", "=2A"},
		{">", "=3E"},
		{" ", "=20"},
		{"\t", "=09"},
		{"ZZ:123456789", "ZZ=3A123456789"},
		{"\xff\xfe", "=FF=FE"},
		{"é", "=C3=A9"},
		{strings.Repeat("a", 64), strings.Repeat("a", 64)},
	} {
		if got := partner.Token(tc.key); got != tc.want {
			t.Errorf("Token(%q) = %q, want %q", tc.key, got, tc.want)
		}
	}
	for _, key := range []string{strings.Repeat("a", 65), strings.Repeat(".", 22), long, long + ".", "https://example.com/" + long} {
		tok := partner.Token(key)
		if !partner.IsHashed(tok) || len(tok) != partner.MaxTokenLen {
			t.Errorf("Token(%.40q…) = %q: want a hashed token of %d bytes", key, tok, partner.MaxTokenLen)
		}
		if p := tokenProblem(tok); p != "" {
			t.Errorf("Token(%.40q…) = %q: invalid as %s", key, tok, p)
		}
	}
	if a, b := partner.Token(long), partner.Token(long+"."); a == b || a[:30] != b[:30] {
		t.Errorf("long keys differing at the end: %q, %q", a, b)
	}
	if got := partner.Token("https://" + long)[:30]; got != "https=3A=2F=2F"+strings.Repeat("x", 16) {
		t.Errorf("hashed prefix %q", got)
	}
	// A prefix cut before an escape that would not fit: 29 bytes.
	if tok := partner.Token(strings.Repeat("ab", 14) + "a." + long); len(tok) != 63 || !partner.IsHashed(tok) {
		t.Errorf("hashed token %q (%d bytes)", tok, len(tok))
	}
}

func TestDecodeRejects(t *testing.T) {
	for _, s := range []string{"", "a.b", "=2e", "=41", "=2", "=", "=G0", "a b", strings.Repeat("a", partner.MaxTokenLen+1),
		"a==b", "==" + strings.Repeat("A", 31), "==" + strings.Repeat("a", 32), "=2==" + strings.Repeat("A", 32)} {
		if s == "=" {
			continue // the empty key's token
		}
		if k, err := partner.Decode(s); !errors.Is(err, partner.ErrInvalidToken) {
			t.Errorf("Decode(%q) = %q, %v; want ErrInvalidToken", s, k, err)
		}
	}
	if k, err := partner.Decode("="); err != nil || k != "" {
		t.Errorf(`Decode("=") = %q, %v`, k, err)
	}
}
