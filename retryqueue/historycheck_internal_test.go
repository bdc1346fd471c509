package retryqueue

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestCanonicalHistory: what encodeEntry writes takes the fast path, and
// the fast path accepts nothing encoding/json rejects: every truncation and
// every one-byte change of those values, accepted by canonicalHistory,
// parses with History.
func TestCanonicalHistory(t *testing.T) {
	at := time.Date(2026, 12, 1, 21, 0, 0, 123456789, time.FixedZone("", 3600))
	entries := []HistoryEntry{
		{At: at, Event: EventDiverted, Reason: string(ReasonFailure), Attempt: 1, Error: "partner said 503", RetryAfter: 2 * time.Second},
		{At: at.UTC(), Event: EventReplayed, Attempt: 0},
		{At: at, Event: EventDeadLettered, Reason: "max-attempts", Attempt: 12, Error: "x"},
	}
	var values []string
	b := []byte{'['}
	for i, e := range entries {
		if i > 0 {
			b = append(b, ',')
		}
		b = encodeEntry(b, e)
		values = append(values, string(append(encodeEntry([]byte{'['}, e), ']')))
	}
	values = append(values, string(append(b, ']')))
	for _, v := range values {
		if !canonicalHistory(v) {
			t.Errorf("encodeEntry's %s: not canonical", v)
		}
	}
	parses := func(v string) bool {
		var h []HistoryEntry
		return json.Unmarshal([]byte(v), &h) == nil
	}
	bytesTried := "\x00 \"\\-0159:,.ZT+[]{}ae\x7f\xc3"
	accepted, rejected := 0, 0
	for _, v := range values {
		for n := 0; n <= len(v); n++ {
			for _, c := range append([]byte{0}, bytesTried...) {
				w := v[:n]
				if c != 0 && n < len(v) {
					w = v[:n] + string(c) + v[n+1:] // one byte changed
				} else if c != 0 {
					continue
				}
				if canonicalHistory(w) {
					accepted++
					if !parses(w) {
						t.Errorf("canonicalHistory accepts %q, which encoding/json rejects", w)
					}
				} else {
					rejected++
				}
			}
		}
	}
	if accepted == 0 || rejected == 0 {
		t.Fatalf("accepted %d, rejected %d: the mutations test nothing", accepted, rejected)
	}
	for _, v := range []string{`[]`, ` []`, `[{"AT":"2026-12-01T21:00:00Z","event":"diverted","attempt":1}]`, `[{"at":"2026-12-01T21:00:00Z","event":"diverted","attempt":01}]`, `[{"at":"2026-12-01T21:00:00Z","event":"diverted","attempt":1234567890123456789012}]`, `[{"at":"2026-12-01 21:00:00Z","event":"diverted","attempt":1}]`, strings.Repeat("[", 3)} {
		if canonicalHistory(v) {
			t.Errorf("canonicalHistory accepts %q", v)
		}
	}
}
