package webhook_test

import (
	"errors"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/deliver/webhook"
)

var (
	secret = []byte("whsec_test_secret")
	body   = []byte(`{"fence":"depot-7","event":"enter"}`)
	t0     = time.Date(2025, 3, 14, 9, 30, 0, 0, time.UTC) // Unix 1741944600
)

func TestSignKnownVector(t *testing.T) {
	// printf '%s' '1741944600.{"fence":"depot-7","event":"enter"}' | openssl dgst -sha256 -hmac whsec_test_secret
	const want = "v1=686bb5a964877623fb97a9d05e984705b158fbbfb0da68ae3a9e376fbfd12352"
	if got := webhook.Sign(secret, t0.Unix(), body); got != want {
		t.Fatalf("Sign = %s, want %s", got, want)
	}
}

func TestVerifyAt(t *testing.T) {
	signed := func(ts int64, sigs ...string) http.Header {
		h := http.Header{}
		h.Set(webhook.HeaderTimestamp, strconv.FormatInt(ts, 10))
		for _, s := range sigs {
			h.Add(webhook.HeaderSignature, s)
		}
		return h
	}
	good := webhook.Sign(secret, t0.Unix(), body)
	other := webhook.Sign([]byte("old secret"), t0.Unix(), body)
	tests := []struct {
		name      string
		h         http.Header
		body      []byte
		now       time.Time
		tolerance time.Duration
		want      error
	}{
		{"valid", signed(t0.Unix(), good), body, t0, 0, nil},
		{"valid 4m59s later", signed(t0.Unix(), good), body, t0.Add(4*time.Minute + 59*time.Second), 0, nil},
		{"replayed 5m01s later", signed(t0.Unix(), good), body, t0.Add(5*time.Minute + time.Second), 0, webhook.ErrTimestampTolerance},
		{"from 2 minutes in the future", signed(t0.Unix(), good), body, t0.Add(-2 * time.Minute), time.Minute, webhook.ErrTimestampTolerance},
		{"tolerance disabled", signed(t0.Unix(), good), body, t0.Add(24 * time.Hour), -1, nil},
		{"altered body", signed(t0.Unix(), good), []byte(`{"fence":"depot-7","event":"exit"}`), t0, 0, webhook.ErrSignatureMismatch},
		{"altered timestamp", signed(t0.Unix()+1, good), body, t0, 0, webhook.ErrSignatureMismatch},
		{"other secret", signed(t0.Unix(), other), body, t0, 0, webhook.ErrSignatureMismatch},
		{"rotation: one of two matches", signed(t0.Unix(), other+", "+good), body, t0, 0, nil},
		{"rotation: two headers", signed(t0.Unix(), other, good), body, t0, 0, nil},
		{"unknown scheme only", signed(t0.Unix(), "v0=abcd"), body, t0, 0, webhook.ErrNoSignature},
		{"not hex", signed(t0.Unix(), "v1=zz"), body, t0, 0, webhook.ErrSignatureMismatch},
		{"no signature", signed(t0.Unix()), body, t0, 0, webhook.ErrNoSignature},
		{"no timestamp", http.Header{webhook.HeaderSignature: {good}}, body, t0, 0, webhook.ErrNoSignature},
		{"bad timestamp", http.Header{webhook.HeaderSignature: {good}, webhook.HeaderTimestamp: {"soon"}}, body, t0, 0, webhook.ErrTimestamp},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := webhook.VerifyAt(tt.h, tt.body, secret, tt.tolerance, tt.now)
			if tt.want == nil && err != nil || tt.want != nil && !errors.Is(err, tt.want) {
				t.Fatalf("VerifyAt = %v, want %v", err, tt.want)
			}
		})
	}
}
