package webhook_test

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/deliver/webhook"
)

// TestVerifierBothDistinctMessagesSameBody: under SchemeBoth, two distinct
// messages (two webhook-ids) with the same body in the same second are no
// replay (a replay is the same webhook-id and timestamp), whether their
// sender sends the Standard Webhooks headers alone or both sets; the
// stripped replay of either is still refused.
func TestVerifierBothDistinctMessagesSameBody(t *testing.T) {
	for _, withOld := range []bool{false, true} {
		name := map[bool]string{false: "standard sender", true: "both sender"}[withOld]
		t.Run(name, func(t *testing.T) {
			now := t0
			v := newVerifier(t, func(c *webhook.VerifierConfig) { c.Scheme, c.Now = webhook.SchemeBoth, func() time.Time { return now } })
			headers := func(id string) http.Header {
				h := standardHeaders(id, t0.Unix())
				if withOld {
					for k, vs := range floodgateHeaders(t0.Unix()) {
						h[k] = vs
					}
				}
				return h
			}
			first, second := headers("msg-1"), headers("msg-2")
			if err := v.Verify(first, body); err != nil {
				t.Fatalf("msg-1: %v", err)
			}
			if err := v.Verify(second, body); err != nil {
				t.Fatalf("msg-2, another message with the same body and second: Verify = %v, want nil", err)
			}
			if !withOld {
				return
			}
			stripped := first.Clone()
			stripped.Del(webhook.HeaderWebhookSignature)
			now = t0.Add(time.Second)
			if err := v.Verify(stripped, body); !errors.Is(err, webhook.ErrReplay) {
				t.Fatalf("msg-1 replayed without webhook-signature: Verify = %v, want ErrReplay", err)
			}
		})
	}
}
