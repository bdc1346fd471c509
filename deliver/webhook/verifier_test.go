package webhook_test

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/deliver/webhook"
	"github.com/floodgate-go/floodgate/internal/configtest"
)

const msgID = "0195a0c2-7e1b-7c3a-9d41-5b2f8e6a1c07"

// standardHeaders returns Standard Webhooks headers for msgID at ts with
// the signatures sigs (none: signed with secret).
func standardHeaders(id string, ts int64, sigs ...string) http.Header {
	if len(sigs) == 0 {
		sigs = []string{webhook.Sign(secret, id, ts, body)}
	}
	h := http.Header{}
	h.Set(webhook.HeaderWebhookID, id)
	h.Set(webhook.HeaderWebhookTimestamp, strconv.FormatInt(ts, 10))
	for _, s := range sigs {
		h.Add(webhook.HeaderWebhookSignature, s)
	}
	return h
}

func floodgateHeaders(ts int64, sigs ...string) http.Header {
	if len(sigs) == 0 {
		sigs = []string{webhook.SignFloodgate(secret, ts, body)}
	}
	h := http.Header{}
	h.Set(webhook.HeaderTimestamp, strconv.FormatInt(ts, 10))
	for _, s := range sigs {
		h.Add(webhook.HeaderSignature, s)
	}
	return h
}

func newVerifier(t *testing.T, mod func(*webhook.VerifierConfig)) *webhook.Verifier {
	t.Helper()
	cfg := webhook.VerifierConfig{Secret: secret, Now: func() time.Time { return t0 }}
	if mod != nil {
		mod(&cfg)
	}
	v, err := webhook.NewVerifier(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestVerifyAt(t *testing.T) {
	ts := t0.Unix()
	good := webhook.Sign(secret, msgID, ts, body)
	other := webhook.Sign([]byte("the-old-secret-of-24-byte"), msgID, ts, body)
	tests := []struct {
		name      string
		scheme    webhook.Scheme
		tolerance time.Duration
		h         http.Header
		body      []byte
		now       time.Time
		want      error
	}{
		{"valid", 0, 0, standardHeaders(msgID, ts), body, t0, nil},
		{"valid 4m59s later", 0, 0, standardHeaders(msgID, ts), body, t0.Add(4*time.Minute + 59*time.Second), nil},
		{"valid exactly 5m later", 0, 0, standardHeaders(msgID, ts), body, t0.Add(5 * time.Minute), nil},
		{"5m01s later", 0, 0, standardHeaders(msgID, ts), body, t0.Add(5*time.Minute + time.Second), webhook.ErrTimestampTolerance},
		{"2 minutes in the future", 0, time.Minute, standardHeaders(msgID, ts), body, t0.Add(-2 * time.Minute), webhook.ErrTimestampTolerance},
		{"a day later at the largest tolerance", 0, webhook.MaxTolerance, standardHeaders(msgID, ts), body, t0.Add(24 * time.Hour), webhook.ErrTimestampTolerance},
		{"altered body", 0, 0, standardHeaders(msgID, ts), []byte(`{"fence":"depot-7","event":"exit"}`), t0, webhook.ErrSignatureMismatch},
		{"altered timestamp", 0, 0, standardHeaders(msgID, ts+1, good), body, t0, webhook.ErrSignatureMismatch},
		{"altered id", 0, 0, standardHeaders("0195a0c2-7e1b-7c3a-9d41-5b2f8e6a1c08", ts, good), body, t0, webhook.ErrSignatureMismatch},
		{"other secret", 0, 0, standardHeaders(msgID, ts, other), body, t0, webhook.ErrSignatureMismatch},
		{"rotation: one of two matches", 0, 0, standardHeaders(msgID, ts, other+" "+good), body, t0, nil},
		{"rotation: two headers", 0, 0, standardHeaders(msgID, ts, other, good), body, t0, nil},
		{"asymmetric v1a only", 0, 0, standardHeaders(msgID, ts, "v1a,"+strings.TrimPrefix(good, "v1,")), body, t0, webhook.ErrNoSignature},
		{"old-scheme signature in the new header", 0, 0, standardHeaders(msgID, ts, webhook.SignFloodgate(secret, ts, body)), body, t0, webhook.ErrNoSignature},
		{"no webhook-id", 0, 0, func() http.Header { h := standardHeaders(msgID, ts); h.Del(webhook.HeaderWebhookID); return h }(), body, t0, webhook.ErrNoSignature},
		{"no timestamp", 0, 0, func() http.Header { h := standardHeaders(msgID, ts); h.Del(webhook.HeaderWebhookTimestamp); return h }(), body, t0, webhook.ErrNoSignature},
		{"no signature", 0, 0, func() http.Header { h := standardHeaders(msgID, ts); h.Del(webhook.HeaderWebhookSignature); return h }(), body, t0, webhook.ErrNoSignature},
		{"id too long", 0, 0, standardHeaders(strings.Repeat("k", 256), ts), body, t0, webhook.ErrWebhookID},
		{"bad timestamp", 0, 0, func() http.Header {
			h := standardHeaders(msgID, ts)
			h.Set(webhook.HeaderWebhookTimestamp, "soon")
			return h
		}(), body, t0, webhook.ErrTimestamp},
		{"floodgate headers to a standard verifier", 0, 0, floodgateHeaders(ts), body, t0, webhook.ErrNoSignature},

		{"floodgate: valid", webhook.SchemeFloodgate, 0, floodgateHeaders(ts), body, t0, nil},
		{"floodgate: rotation", webhook.SchemeFloodgate, 0, floodgateHeaders(ts, webhook.SignFloodgate([]byte("old"), ts, body)+", "+webhook.SignFloodgate(secret, ts, body)), body, t0, nil},
		{"floodgate: altered body", webhook.SchemeFloodgate, 0, floodgateHeaders(ts), []byte(`{}`), t0, webhook.ErrSignatureMismatch},
		{"floodgate: not hex", webhook.SchemeFloodgate, 0, floodgateHeaders(ts, "v1=zz"), body, t0, webhook.ErrSignatureMismatch},
		{"floodgate: unknown version only", webhook.SchemeFloodgate, 0, floodgateHeaders(ts, "v0=abcd"), body, t0, webhook.ErrNoSignature},
		{"floodgate: stale", webhook.SchemeFloodgate, 0, floodgateHeaders(ts), body, t0.Add(6 * time.Minute), webhook.ErrTimestampTolerance},
		{"floodgate: standard headers", webhook.SchemeFloodgate, 0, standardHeaders(msgID, ts), body, t0, webhook.ErrNoSignature},

		{"both: standard", webhook.SchemeBoth, 0, standardHeaders(msgID, ts), body, t0, nil},
		{"both: floodgate", webhook.SchemeBoth, 0, floodgateHeaders(ts), body, t0, nil},
		{"both: a bad standard signature is not rescued by the old headers", webhook.SchemeBoth, 0,
			func() http.Header {
				h := standardHeaders(msgID, ts, other)
				h.Set(webhook.HeaderTimestamp, strconv.FormatInt(ts, 10))
				h.Set(webhook.HeaderSignature, webhook.SignFloodgate(secret, ts, body))
				return h
			}(),
			body, t0, webhook.ErrSignatureMismatch},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := newVerifier(t, func(c *webhook.VerifierConfig) { c.Scheme, c.Tolerance = tt.scheme, tt.tolerance })
			err := v.VerifyAt(tt.h, tt.body, tt.now)
			if tt.want == nil && err != nil || tt.want != nil && !errors.Is(err, tt.want) {
				t.Fatalf("VerifyAt = %v, want %v", err, tt.want)
			}
			if err != nil && strings.Contains(err.Error(), string(secret)) {
				t.Errorf("error %q quotes the secret", err)
			}
		})
	}
}

// TestVerifierReplay: a request replayed within the tolerance is refused;
// the sender's retry of the same message (same webhook id, new timestamp)
// passes; once the tolerance has passed a replay fails the timestamp check
// and the seen-set has let the entry go.
func TestVerifierReplay(t *testing.T) {
	for _, scheme := range []webhook.Scheme{webhook.SchemeStandardWebhooks, webhook.SchemeFloodgate} {
		t.Run(scheme.String(), func(t *testing.T) {
			now := t0
			v := newVerifier(t, func(c *webhook.VerifierConfig) { c.Scheme, c.Now = scheme, func() time.Time { return now } })
			first := standardHeaders(msgID, t0.Unix())
			retry := standardHeaders(msgID, t0.Unix()+30)
			if scheme == webhook.SchemeFloodgate {
				first, retry = floodgateHeaders(t0.Unix()), floodgateHeaders(t0.Unix()+30)
			}
			step := func(at time.Duration, h http.Header, want error) {
				t.Helper()
				now = t0.Add(at)
				if err := v.Verify(h, body); want == nil && err != nil || want != nil && !errors.Is(err, want) {
					t.Fatalf("at +%v: Verify = %v, want %v", at, err, want)
				}
			}
			step(0, first, nil)
			step(time.Second, first, webhook.ErrReplay)
			step(30*time.Second, retry, nil)
			step(4*time.Minute, first, webhook.ErrReplay)
			step(5*time.Minute, first, webhook.ErrReplay) // the last instant within the tolerance
			step(5*time.Minute+time.Second, first, webhook.ErrTimestampTolerance)
			step(5*time.Minute+30*time.Second, retry, webhook.ErrReplay)
			if n := v.Seen(); n != 1 {
				t.Errorf("Seen = %d after the first entry expired, want 1 (the retry)", n)
			}
		})
	}
}

// TestVerifierBothReplayStripped: under SchemeBoth, a captured request of a
// SchemeBoth sender replayed without its webhook-signature (so that the
// floodgate scheme checks it) is still a replay.
func TestVerifierBothReplayStripped(t *testing.T) {
	now := t0
	v := newVerifier(t, func(c *webhook.VerifierConfig) { c.Scheme, c.Now = webhook.SchemeBoth, func() time.Time { return now } })
	both := standardHeaders(msgID, t0.Unix())
	for k, vs := range floodgateHeaders(t0.Unix()) {
		both[k] = vs
	}
	if err := v.Verify(both, body); err != nil {
		t.Fatalf("first delivery: %v", err)
	}
	stripped := both.Clone()
	stripped.Del(webhook.HeaderWebhookSignature)
	now = t0.Add(time.Second)
	if err := v.Verify(stripped, body); !errors.Is(err, webhook.ErrReplay) {
		t.Fatalf("replay without webhook-signature: Verify = %v, want ErrReplay", err)
	}
	if err := v.Verify(both, body); !errors.Is(err, webhook.ErrReplay) {
		t.Fatalf("replay as sent: Verify = %v, want ErrReplay", err)
	}
}

// TestVerifierSeenFull: a full seen-set refuses new requests (fail closed)
// until its entries expire; failed verifications take no room.
func TestVerifierSeenFull(t *testing.T) {
	now := t0
	v := newVerifier(t, func(c *webhook.VerifierConfig) {
		c.MaxSeen, c.Tolerance, c.Now = 2, time.Minute, func() time.Time { return now }
	})
	ts := t0.Unix()
	for i := range 2 {
		if err := v.Verify(standardHeaders(fmt.Sprint("m", i), ts), body); err != nil {
			t.Fatal(err)
		}
	}
	if err := v.Verify(standardHeaders("m9", ts, "v1,AAAA"), body); !errors.Is(err, webhook.ErrSignatureMismatch) {
		t.Fatalf("forged = %v", err)
	}
	if err := v.Verify(standardHeaders("m2", ts), body); !errors.Is(err, webhook.ErrSeenFull) {
		t.Fatalf("third = %v, want %v", err, webhook.ErrSeenFull)
	}
	if err := v.Verify(standardHeaders("m0", ts), body); !errors.Is(err, webhook.ErrReplay) {
		t.Fatalf("replay while full = %v, want %v", err, webhook.ErrReplay)
	}
	now = t0.Add(time.Minute + time.Second) // both entries expired
	if err := v.Verify(standardHeaders("m2", now.Unix()), body); err != nil {
		t.Fatalf("after expiry = %v", err)
	}
	if n := v.Seen(); n != 1 {
		t.Errorf("Seen = %d, want 1", n)
	}
}

// TestVerifierConcurrentReplay: the same request verified from many
// goroutines at once passes exactly once.
func TestVerifierConcurrentReplay(t *testing.T) {
	v := newVerifier(t, nil)
	h := standardHeaders(msgID, t0.Unix())
	const n = 32
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- v.Verify(h.Clone(), body)
		}()
	}
	wg.Wait()
	close(errs)
	var ok, replays int
	for err := range errs {
		switch {
		case err == nil:
			ok++
		case errors.Is(err, webhook.ErrReplay):
			replays++
		default:
			t.Errorf("Verify = %v", err)
		}
	}
	if ok != 1 || replays != n-1 {
		t.Errorf("%d passed, %d replays; want 1 and %d", ok, replays, n-1)
	}
}

// TestVerifierConfigValidate: a configuration that would disable the
// timestamp check (a negative tolerance, or one beyond an hour) is refused,
// naming the field and its range.
func TestVerifierConfigValidate(t *testing.T) {
	base := webhook.VerifierConfig{Secret: secret}
	with := func(mod func(*webhook.VerifierConfig)) webhook.VerifierConfig { return configtest.With(base, mod) }
	configtest.Run(t, nil, []configtest.Case[webhook.VerifierConfig]{
		{Name: "minimal", Cfg: base},
		{Name: "short legacy secret", Cfg: with(func(c *webhook.VerifierConfig) { c.Secret, c.Scheme = []byte("k"), webhook.SchemeFloodgate })},
		{Name: "smallest tolerance", Cfg: with(func(c *webhook.VerifierConfig) { c.Tolerance = time.Second })},
		{Name: "largest tolerance", Cfg: with(func(c *webhook.VerifierConfig) { c.Tolerance = time.Hour })},
		{Name: "negative tolerance", Cfg: with(func(c *webhook.VerifierConfig) { c.Tolerance = -1 }), Err: webhook.ErrTolerance, Want: "VerifierConfig.Tolerance -1ns: webhook: tolerance must be within [1s, 1h]"},
		{Name: "sub-second tolerance", Cfg: with(func(c *webhook.VerifierConfig) { c.Tolerance = 500 * time.Millisecond }), Err: webhook.ErrTolerance, Want: "VerifierConfig.Tolerance 500ms"},
		{Name: "tolerance beyond an hour", Cfg: with(func(c *webhook.VerifierConfig) { c.Tolerance = 24 * time.Hour }), Err: webhook.ErrTolerance, Want: "VerifierConfig.Tolerance 24h0m0s"},
		{Name: "no secret", Cfg: webhook.VerifierConfig{}, Err: webhook.ErrSecret, Want: "VerifierConfig.Secret"},
		{Name: "unknown scheme", Cfg: with(func(c *webhook.VerifierConfig) { c.Scheme = 3 }), Err: webhook.ErrScheme, Want: "VerifierConfig.Scheme Scheme(3)"},
		{Name: "negative MaxSeen", Cfg: with(func(c *webhook.VerifierConfig) { c.MaxSeen = -1 }), Err: webhook.ErrMaxSeen, Want: "VerifierConfig.MaxSeen -1"},
	}, &configtest.Options[webhook.VerifierConfig]{
		Snapshot: func(c webhook.VerifierConfig) any {
			return fmt.Sprint(c.Secret, c.Scheme, c.Tolerance, c.MaxSeen, c.Now != nil)
		},
		New: func(c webhook.VerifierConfig) error { _, err := webhook.NewVerifier(c); return err },
	})
	if _, err := webhook.NewVerifier(webhook.VerifierConfig{Secret: secret, Tolerance: -time.Second}); err == nil || !strings.HasPrefix(err.Error(), "invalid config: VerifierConfig.Tolerance") {
		t.Errorf("NewVerifier = %v, want invalid config naming VerifierConfig.Tolerance", err)
	}
}
