package retryqueue_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/floodgate-go/floodgate/internal/natstest"
	"github.com/floodgate-go/floodgate/jsq"
	"github.com/floodgate-go/floodgate/retryqueue"
	"github.com/nats-io/nats.go/jetstream"
)

// Streams of the previous release (subject = stream name, an unfiltered
// drainer consumer holding unacked messages) are refused by Provision with
// ErrPreviousLayout; Migrate moves every message to the route's subject,
// none lost, after which Provision accepts the streams and a drainer of the
// route drains them all.
func TestMigratePreviousLayout(t *testing.T) {
	url := natstest.URL(t)
	js := natstest.JetStream(t, natstest.Conn(t, url))
	ctx := testCtx(t)
	retry, dead := natstest.Name(t, "retry"), natstest.Name(t, "dead")
	natstest.DeleteStreams(t, js, retry, dead, "OBJ_"+dead+"_payloads")
	old := jsq.StreamConfig(retry)
	old.Retention = jetstream.WorkQueuePolicy
	if _, err := js.CreateStream(ctx, old); err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(ctx, jsq.StreamConfig(dead)); err != nil {
		t.Fatal(err)
	}
	const n, nd = 25, 5
	for i := range n {
		m := message.NewMessage(fmt.Sprint("r", i), []byte("p"))
		m.Metadata.Set(retryqueue.MetaAttempt, "1")
		m.Metadata.Set("own", "kept")
		if _, err := js.PublishMsg(ctx, jsq.Marshal(retry, m)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range nd {
		if _, err := js.PublishMsg(ctx, jsq.Marshal(dead, message.NewMessage(fmt.Sprint("d", i), nil))); err != nil {
			t.Fatal(err)
		}
	}
	// The previous release's drainer, with messages delivered and not acked.
	oc, err := js.CreateConsumer(ctx, retry, jetstream.ConsumerConfig{Durable: "floodgate_drainer__" + retry, AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	b, err := oc.FetchNoWait(5)
	if err != nil {
		t.Fatal(err)
	}
	for range b.Messages() {
	}

	pub, err := jsq.NewPublisher(jsq.PublisherConfig{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pub.Close() })
	cfg := retryqueue.Config{Publisher: pub, Source: "orders", RetryTopic: retry, DeadLetterTopic: dead}
	err = retryqueue.Provision(ctx, js, cfg)
	if !errors.Is(err, retryqueue.ErrPreviousLayout) || !errors.Is(err, retryqueue.ErrStreamConfig) || !strings.Contains(err.Error(), "retryqueue.Migrate") {
		t.Fatalf("Provision on the previous layout: %v, want ErrPreviousLayout naming Migrate", err)
	}
	res, err := retryqueue.Migrate(ctx, js, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.Moved != n+nd || len(res.DeletedConsumers) != 1 {
		t.Fatalf("Migrate = %+v, want %d moved and the old consumer deleted", res, n+nd)
	}
	if res, err := retryqueue.Migrate(ctx, js, cfg); err != nil || res.Moved != 0 {
		t.Fatalf("Migrate again = %+v, %v; want nothing to do", res, err)
	}
	if err := retryqueue.Provision(ctx, js, cfg); err != nil {
		t.Fatalf("Provision after Migrate: %v", err)
	}
	q, err := retryqueue.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e := env{url: url, js: js, pub: pub, cfg: cfg, q: q}
	if got := subjects(t, e, dead); len(got[q.DeadLetterSubject()]) != nd || len(got) != 1 {
		t.Fatalf("dead letters after Migrate: %v, want %d on %q", got, nd, q.DeadLetterSubject())
	}
	g := &gate{}
	g.budget.Store(1 << 30)
	rec := &recorder{}
	d := startDrainer(t, e, retryqueue.DrainerConfig{Handler: rec.handler(func(m *message.Message) error {
		if m.Metadata.Get("own") != "kept" || m.Metadata.Get(retryqueue.MetaAttempt) != "1" {
			return fmt.Errorf("metadata not kept: %v", m.Metadata)
		}
		return nil
	}), Gate: g, Rate: 1000, PollInterval: 10 * time.Millisecond})
	natstest.Eventually(t, 20*time.Second, func() bool { return d.Stats().Drained == n }, "every migrated message drained")
	if s := d.Stats(); s.DeadLettered != 0 || s.Redelivered != 0 {
		t.Fatalf("stats %+v, want no dead letters or failures", s)
	}
	if c := streamCount(t, js, retry); c != 0 {
		t.Fatalf("%d left in the retry stream", c)
	}
}
