package redact

import (
	"strings"
	"testing"
)

func TestHeaders(t *testing.T) {
	const c = "CANARY42"
	for _, in := range []string{
		"Authorization: Bearer " + c,
		"authorization: Basic " + c + "\r\nX: y",
		"Cookie: a=" + c + "; b=2",
		"Set-Cookie: sid=" + c + "; HttpOnly",
		"webhook-signature: v1," + c,
		"X-Floodgate-Signature: " + c,
		`{"headers":{"Authorization":"Bearer ` + c + `","x":1}}`,
		`body "{\"Authorization\":\"` + c + `\"}"`,
		"x-api-key=" + c,
		`{'client_secret': '` + c + `'}`,
		"password=" + c,
		"Proxy-Authorization:" + c,
	} {
		got := Headers(in)
		if strings.Contains(got, c) || !strings.Contains(got, Marker) {
			t.Errorf("Headers(%q) = %q", in, got)
		}
	}
	for _, keep := range []string{"", "webhook send: HTTP 503: upstream down", "signature does not match", "partner token \"a\" differs"} {
		if got := Headers(keep); got != keep {
			t.Errorf("Headers(%q) = %q, want it unchanged", keep, got)
		}
	}
	if got := Headers(`{"Authorization":"x","ok":"` + "visible" + `"}`); !strings.Contains(got, "visible") {
		t.Errorf("a quoted value must end at its quote: %q", got)
	}
}

func BenchmarkHeaders(b *testing.B) {
	for name, s := range map[string]string{
		"plain":     "webhook send: HTTP 503: " + strings.Repeat("upstream unavailable, retry later ", 14),
		"sensitive": "webhook send: HTTP 400: Authorization: Bearer abc\nCookie: x=1\n" + strings.Repeat("bad request ", 36),
	} {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				_ = Headers(s)
			}
		})
	}
}
