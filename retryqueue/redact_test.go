package retryqueue_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/floodgate-go/floodgate/internal/natstest"
	"github.com/floodgate-go/floodgate/retryqueue"
)

// TestStoredErrorsRedactHeaders: a partner response quoted in a delivery
// error, echoing credentials, reaches neither the retry nor the
// dead-letter stream's last_error and history; the stored text is bounded.
func TestStoredErrorsRedactHeaders(t *testing.T) {
	const canary = "CANARY-cred-7f3a"
	cause := errors.New(`webhook send: HTTP 500: {"echo":{"Authorization":"Bearer ` + canary + `","Cookie":"sid=` + canary +
		`"}} Set-Cookie: a=` + canary + "\nwebhook-signature: v1," + canary + "\n" + strings.Repeat("x", 2000))
	e := newEnv(t, natstest.URL(t), func(c *retryqueue.Config) { c.MaxAttempts = 2; c.MaxErrorLen = 256 })
	msg := message.NewMessage("uuid-redact", []byte("p"))
	if err := e.q.Divert(context.Background(), msg, retryqueue.ReasonFailure, cause); err != nil {
		t.Fatal(err)
	}
	retried := last(t, e.js, e.q.RetryTopic())
	if err := e.q.Divert(context.Background(), retried, retryqueue.ReasonFailure, cause); err != nil {
		t.Fatal(err)
	}
	dead := last(t, e.js, e.q.DeadLetterTopic())
	for name, m := range map[string]*message.Message{"retry": retried, "dead letter": dead} {
		for k, v := range m.Metadata {
			if strings.Contains(v, canary) {
				t.Errorf("%s metadata %s holds the canary: %q", name, k, v)
			}
		}
		le := m.Metadata.Get(retryqueue.MetaLastError)
		if len(le) > 256 || !strings.Contains(le, "REDACTED") || !strings.HasPrefix(le, "webhook send: HTTP 500") {
			t.Errorf("%s last_error %q (%d bytes): want <= 256 bytes, redacted, starting with the error", name, le, len(le))
		}
		h, err := retryqueue.History(m)
		if err != nil || len(h) == 0 || !strings.Contains(h[len(h)-1].Error, "REDACTED") || len(h[len(h)-1].Error) > 256 {
			t.Errorf("%s history %+v, %v: want the last entry's error redacted and bounded", name, h, err)
		}
	}
}
