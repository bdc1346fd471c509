package retryqueue_test

import (
	"errors"
	"testing"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/floodgate-go/floodgate/internal/natstest"
	"github.com/floodgate-go/floodgate/jsq"
	"github.com/floodgate-go/floodgate/retryqueue"
)

// divertedMessage diverts one message of 800 bytes to a partner and
// returns it as the drain reads it back from the retry stream.
func divertedMessage(t testing.TB) (*retryqueue.Queue, *message.Message) {
	e := newEnv(t, natstest.URL(t), nil)
	ctx := testCtx(t)
	m := message.NewMessage("11111111-2222-3333-4444-555555555555", make([]byte, 800))
	m.Metadata.Set("x12_control_number", "000000001")
	if _, err := e.q.RouteTo(ctx, m, "retailer-042", retryqueue.ReasonOpen, errors.New("breaker: open")); err != nil {
		t.Fatal(err)
	}
	s, err := e.js.Stream(ctx, e.cfg.RetryTopic)
	if err != nil {
		t.Fatal(err)
	}
	c, err := s.CreateConsumer(ctx, jetstream.ConsumerConfig{AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		t.Fatal(err)
	}
	jm, err := c.Next()
	if err != nil {
		t.Fatal(err)
	}
	return e.q, jsq.Unmarshal(jm)
}

// The drain checks every message's metadata (Queue.Malformed); a message
// as floodgate diverted it passes without allocating.
func TestMalformedCheckDoesNotAllocate(t *testing.T) {
	q, m := divertedMessage(t)
	if why, bad := q.Malformed(m); bad {
		t.Fatalf("Malformed = %q on a diverted message", why)
	}
	if n := testing.AllocsPerRun(100, func() { q.Malformed(m) }); n != 0 {
		t.Errorf("Malformed allocates %v times per message, want 0", n)
	}
}

// BenchmarkMalformed is the metadata check the drain makes on every
// message it reads, on a message as floodgate diverted it.
//
//	go test -run '^$' -bench Malformed -benchmem ./retryqueue/
func BenchmarkMalformed(b *testing.B) {
	q, m := divertedMessage(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, bad := q.Malformed(m); bad {
			b.Fatal("malformed")
		}
	}
}
