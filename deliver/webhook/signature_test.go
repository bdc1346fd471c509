package webhook_test

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/deliver/webhook"
)

var (
	secret = []byte("floodgate-test-secret-32-bytes!!") // 32 bytes
	body   = []byte(`{"fence":"depot-7","event":"enter"}`)
	t0     = time.Date(2025, 3, 14, 9, 30, 0, 0, time.UTC) // Unix 1741944600
)

// vector is one entry of testdata/standard-webhooks-vectors.json (see
// testdata/README.md for its source).
type vector struct {
	Name      string `json:"name"`
	Secret    string `json:"secret"`
	ID        string `json:"id"`
	Timestamp int64  `json:"timestamp"`
	Payload   string `json:"payload"`
	Signature string `json:"signature"`
	Valid     bool   `json:"valid"`
	Sign      bool   `json:"sign"`
}

// TestStandardWebhooksVectors checks Sign, ParseSecret and Verifier
// against the Standard Webhooks reference libraries' test vectors.
func TestStandardWebhooksVectors(t *testing.T) {
	raw, err := os.ReadFile("testdata/standard-webhooks-vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Commit  string   `json:"commit"`
		Vectors []vector `json:"vectors"`
	}
	if err := json.Unmarshal(raw, &file); err != nil {
		t.Fatal(err)
	}
	if len(file.Vectors) < 10 || file.Commit == "" {
		t.Fatalf("%d vectors, commit %q", len(file.Vectors), file.Commit)
	}
	var signed, valid, invalid int
	for _, v := range file.Vectors {
		t.Run(v.Name, func(t *testing.T) {
			key, err := webhook.ParseSecret(v.Secret)
			if err != nil {
				t.Fatal(err)
			}
			if v.Sign {
				signed++
				if got := webhook.Sign(key, v.ID, v.Timestamp, []byte(v.Payload)); got != v.Signature {
					t.Errorf("Sign = %s, want %s", got, v.Signature)
				}
			}
			vf, err := webhook.NewVerifier(webhook.VerifierConfig{Secret: key})
			if err != nil {
				t.Fatal(err)
			}
			h := http.Header{}
			h.Set(webhook.HeaderWebhookID, v.ID)
			h.Set(webhook.HeaderWebhookTimestamp, strconv.FormatInt(v.Timestamp, 10))
			h.Set(webhook.HeaderWebhookSignature, v.Signature)
			err = vf.VerifyAt(h, []byte(v.Payload), time.Unix(v.Timestamp, 0))
			if v.Valid {
				valid++
				if err != nil {
					t.Errorf("VerifyAt = %v, want nil", err)
				}
			} else {
				invalid++
				if !errors.Is(err, webhook.ErrSignatureMismatch) {
					t.Errorf("VerifyAt = %v, want %v", err, webhook.ErrSignatureMismatch)
				}
			}
		})
	}
	if signed < 2 || valid < 3 || invalid < 5 {
		t.Errorf("%d sign, %d valid, %d invalid vectors", signed, valid, invalid)
	}
}

func TestSignFloodgateKnownVector(t *testing.T) {
	// printf '%s' '1741944600.{"fence":"depot-7","event":"enter"}' | openssl dgst -sha256 -hmac whsec_test_secret
	const want = "v1=686bb5a964877623fb97a9d05e984705b158fbbfb0da68ae3a9e376fbfd12352"
	if got := webhook.SignFloodgate([]byte("whsec_test_secret"), t0.Unix(), body); got != want {
		t.Fatalf("SignFloodgate = %s, want %s", got, want)
	}
}

func TestParseSecret(t *testing.T) {
	// Unpadded secrets, from the Python reference library's
	// test_signature_verification_with_unpadded_secret: it decodes them as
	// if padded, ignoring the unused trailing bits.
	for _, s := range []string{"MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaS", "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSwBr"} {
		padded := s + strings.Repeat("=", (4-len(s)%4)%4)
		want, err := base64.StdEncoding.DecodeString(padded)
		if err != nil {
			t.Fatal(err)
		}
		for _, in := range []string{s, padded, "whsec_" + s, "whsec_" + padded} {
			got, err := webhook.ParseSecret(in)
			if err != nil || string(got) != string(want) {
				t.Errorf("ParseSecret(%q) = %x, %v; want %x", in, got, err, want)
			}
		}
	}
	if got, err := webhook.ParseSecret(webhook.FormatSecret(secret)); err != nil || string(got) != string(secret) {
		t.Errorf("ParseSecret(FormatSecret) = %q, %v", got, err)
	}
	if f := webhook.FormatSecret([]byte{0xfb, 0xff}); f != "whsec_+/8=" {
		t.Errorf("FormatSecret = %s", f)
	}
	for _, bad := range []string{"", "whsec_", "whsec_not base64!", "whsec_canary*secret"} {
		_, err := webhook.ParseSecret(bad)
		if rest := strings.TrimPrefix(bad, "whsec_"); !errors.Is(err, webhook.ErrSecret) || rest != "" && strings.Contains(err.Error(), rest) {
			t.Errorf("ParseSecret(%q) = %v, want %v not quoting the secret", bad, err, webhook.ErrSecret)
		}
	}
}

func TestSchemeString(t *testing.T) {
	for s, want := range map[webhook.Scheme]string{
		webhook.SchemeStandardWebhooks: "standard-webhooks", webhook.SchemeFloodgate: "floodgate",
		webhook.SchemeBoth: "both", webhook.Scheme(9): "Scheme(9)",
	} {
		if s.String() != want {
			t.Errorf("%d: %s, want %s", int(s), s, want)
		}
	}
}
