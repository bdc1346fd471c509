package retryqueue_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/floodgate-go/floodgate/internal/natstest"
	"github.com/floodgate-go/floodgate/retryqueue"
)

// errRefused is a handler's own bulkhead refusing a call.
var errRefused = errors.New("bulkhead full")

// A not-attempted diversion counts no attempt, increments its own counter
// and sets not_before from it; a malformed counter dead-letters the
// message; a replay resets the counter with the attempts, so a replayed
// message starts its backoff afresh.
func TestNotAttemptedCounterAndReplay(t *testing.T) {
	clock := newFakeClock()
	e := newEnv(t, natstest.URL(t), func(c *retryqueue.Config) { c.Clock = clock; c.MaxAge = time.Minute })
	ctx := context.Background()
	msg := message.NewMessage("uuid-na", []byte("p"))
	for i := 1; i <= 3; i++ {
		if err := e.q.Divert(ctx, msg, retryqueue.ReasonNotAttempted, errRefused); err != nil {
			t.Fatal(err)
		}
		msg = last(t, e.js, e.q.RetryTopic())
		if a, n := retryqueue.Attempt(msg), retryqueue.NotAttempted(msg); a != 0 || n != i {
			t.Fatalf("refusal %d: attempt %d, not attempted %d; want 0, %d", i, a, n, i)
		}
		nb, ok := retryqueue.NotBefore(msg)
		if want := clock.Now().Add(retryqueue.DefaultBackoff(i)); !ok || !nb.Equal(want) {
			t.Fatalf("refusal %d: not_before %v, want %v", i, nb, want)
		}
		if le := msg.Metadata.Get(retryqueue.MetaLastError); le != "" {
			t.Errorf("last_error %q, want none: nothing was attempted", le)
		}
		clock.Advance(retryqueue.DefaultBackoff(i))
	}

	bad := message.NewMessage("uuid-bad", []byte("p"))
	bad.Metadata.Set(retryqueue.MetaNotAttempted, "-1")
	if why, isBad := e.q.Malformed(bad); !isBad || !strings.Contains(why, retryqueue.MetaNotAttempted) {
		t.Errorf("Malformed = %q, %v; want it to name %s", why, isBad, retryqueue.MetaNotAttempted)
	}

	// Past MaxAge: dead-lettered, then replayed with a fresh counter.
	clock.Advance(time.Minute)
	if err := e.q.Divert(ctx, msg, retryqueue.ReasonNotAttempted, errRefused); err != nil {
		t.Fatal(err)
	}
	dead := last(t, e.js, e.q.DeadLetterTopic())
	if r := dead.Metadata.Get(retryqueue.MetaDeadReason); r != retryqueue.DeadReasonMaxAge {
		t.Fatalf("dead reason %q, want %q", r, retryqueue.DeadReasonMaxAge)
	}
	if _, err := e.q.Replay(ctx, e.js, retryqueue.ReplayFilter{}); err != nil {
		t.Fatal(err)
	}
	replayed := last(t, e.js, e.q.RetryTopic())
	if _, ok := replayed.Metadata[retryqueue.MetaNotAttempted]; ok || replayed.UUID != msg.UUID {
		t.Errorf("replayed %s with %s = %q, want it removed", replayed.UUID, retryqueue.MetaNotAttempted, replayed.Metadata.Get(retryqueue.MetaNotAttempted))
	}
}
