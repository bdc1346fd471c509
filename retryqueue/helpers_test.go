package retryqueue_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/floodgate-go/floodgate/internal/natstest"
	"github.com/floodgate-go/floodgate/jsq"
	"github.com/floodgate-go/floodgate/retryqueue"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{t: time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

type env struct {
	url string
	nc  *nats.Conn
	js  jetstream.JetStream
	pub *jsq.Publisher
	cfg retryqueue.Config
	q   *retryqueue.Queue
}

// newEnv connects to url, provisions unique retry and dead-letter streams
// and builds a Queue; mod may change the config before New.
func newEnv(t testing.TB, url string, mod func(*retryqueue.Config)) env {
	t.Helper()
	nc := natstest.Conn(t, url)
	e := env{url: url, nc: nc, js: natstest.JetStream(t, nc)}
	pub, err := jsq.NewPublisher(jsq.PublisherConfig{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pub.Close() })
	e.pub = pub
	e.cfg = retryqueue.Config{
		Publisher:       pub,
		Service:         "svc",
		RetryTopic:      natstest.Name(t, "retry"),
		DeadLetterTopic: natstest.Name(t, "dead"),
		PublishTimeout:  2 * time.Second,
	}
	if mod != nil {
		mod(&e.cfg)
	}
	natstest.DeleteStreams(t, e.js, e.cfg.RetryTopic, e.cfg.DeadLetterTopic, "OBJ_"+e.cfg.DeadLetterTopic+"_payloads")
	if err := retryqueue.Provision(testCtx(t), e.js, e.cfg); err != nil {
		t.Fatal(err)
	}
	q, err := retryqueue.New(e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.q = q
	return e
}

func testCtx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return c
}

// streamMsgs reads every message stored in stream, in order.
func streamMsgs(t *testing.T, js jetstream.JetStream, stream string) []*message.Message {
	t.Helper()
	return natstest.StreamMsgs(t, js, stream)
}

func streamCount(t *testing.T, js jetstream.JetStream, stream string) uint64 {
	t.Helper()
	s, err := js.Stream(testCtx(t), stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}

// only returns the single message in stream, failing otherwise.
func last(t *testing.T, js jetstream.JetStream, stream string) *message.Message {
	t.Helper()
	ms := streamMsgs(t, js, stream)
	if len(ms) == 0 {
		t.Fatalf("stream %s is empty", stream)
	}
	return ms[len(ms)-1]
}

func wantMeta(t *testing.T, m *message.Message, want map[string]string) {
	t.Helper()
	for k, v := range want {
		got, ok := m.Metadata[k]
		switch {
		case v == "<absent>" && ok:
			t.Errorf("metadata %s = %q, want absent", k, got)
		case v != "<absent>" && got != v:
			t.Errorf("metadata %s = %q, want %q", k, got, v)
		}
	}
}

// nopJetStream is a JetStream for queues that never publish (configuration
// and metadata tests); any call panics.
type nopJetStream struct{ jetstream.JetStream }

// publishRaw stores m under subject as it is: no route metadata is added.
func publishRaw(t *testing.T, e env, subject string, m *message.Message) {
	t.Helper()
	if _, err := e.js.PublishMsg(testCtx(t), jsq.Marshal(subject, m)); err != nil {
		t.Fatal(err)
	}
}
