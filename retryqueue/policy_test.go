package retryqueue_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/floodgate-go/floodgate/internal/natstest"
	"github.com/floodgate-go/floodgate/jsq"
	"github.com/floodgate-go/floodgate/retryqueue"
)

// Regression (issue 12): Run called CreateOrUpdateConsumer, which silently
// replaced an existing drain consumer's settings. A drain consumer that
// differs in a field the drainer sets is refused: Run returns the mismatch
// naming the field, and the consumer is left as it was.
func TestDrainerRefusesDifferingConsumerUnchanged(t *testing.T) {
	e := newEnv(t, natstest.URL(t), nil)
	d, err := retryqueue.NewDrainer(retryqueue.DrainerConfig{
		JetStream: e.js, Queue: e.q, Gate: &gate{},
		Handler: func(*message.Message) ([]*message.Message, error) { return nil, nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	existing := d.ConsumerConfig()
	existing.AckWait = 2 * time.Minute
	if _, err := e.js.CreateConsumer(testCtx(t), d.Stream(), existing); err != nil {
		t.Fatal(err)
	}
	// Without the refusal Run drains until ctx is done and returns nil.
	runCtx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err = d.Run(runCtx)
	if !errors.Is(err, jsq.ErrConfigMismatch) || !strings.Contains(err.Error(), "AckWait is 2m0s, want 30s") {
		t.Fatalf("Run = %v, want a config mismatch naming AckWait", err)
	}
	c, err := e.js.Consumer(testCtx(t), d.Stream(), d.Consumer())
	if err != nil {
		t.Fatal(err)
	}
	if got := c.CachedInfo().Config.AckWait; got != 2*time.Minute {
		t.Errorf("AckWait read back %s, want the operator's 2m0s", got)
	}
}

// An existing drain consumer equal to the drainer's (MaxAckPending and
// MaxDeliver unlimited as the server stores them) is bound as it is, with
// the operator's other fields kept: a restarted drainer drains.
func TestDrainerBindsEqualConsumer(t *testing.T) {
	e := newEnv(t, natstest.URL(t), nil)
	ids := seed(t, e, 1)
	var r recorder
	g := &gate{}
	g.budget.Store(10)
	cfg := retryqueue.DrainerConfig{Handler: r.handler(nil), Gate: g, PollInterval: 10 * time.Millisecond}
	probe, err := retryqueue.NewDrainer(retryqueue.DrainerConfig{JetStream: e.js, Queue: e.q, Handler: cfg.Handler, Gate: g})
	if err != nil {
		t.Fatal(err)
	}
	existing := probe.ConsumerConfig()
	existing.Description = "the operator's"
	if _, err := e.js.CreateConsumer(testCtx(t), probe.Stream(), existing); err != nil {
		t.Fatal(err)
	}
	startDrainer(t, e, cfg)
	natstest.Eventually(t, 20*time.Second, func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return len(r.calls) == 1 && r.calls[0] == ids[0]
	}, "the seeded message is drained through the bound consumer")
	c, err := e.js.Consumer(testCtx(t), probe.Stream(), probe.Consumer())
	if err != nil {
		t.Fatal(err)
	}
	if got := c.CachedInfo().Config.Description; got != "the operator's" {
		t.Errorf("description %q, want the operator's, unchanged", got)
	}
}

// Regression (issue 12): Provision accepted an existing stream in another
// storage than the one it creates. It now refuses it, naming the field, and
// leaves it unchanged.
func TestProvisionRefusesDifferingStorage(t *testing.T) {
	url := natstest.URL(t)
	js := natstest.JetStream(t, natstest.Conn(t, url))
	cfg := retryqueue.Config{RetryTopic: natstest.Name(t, "retry"), DeadLetterTopic: natstest.Name(t, "dead")}
	natstest.DeleteStreams(t, js, cfg.RetryTopic, cfg.DeadLetterTopic)
	sc := retryqueue.DeadLetterStreamConfig(cfg.DeadLetterTopic)
	sc.Storage = jetstream.MemoryStorage
	if _, err := js.CreateStream(testCtx(t), sc); err != nil {
		t.Fatal(err)
	}
	err := retryqueue.Provision(testCtx(t), js, cfg)
	if !errors.Is(err, jsq.ErrConfigMismatch) || !strings.Contains(err.Error(), "Storage is Memory, want File") {
		t.Fatalf("Provision = %v, want a config mismatch naming Storage", err)
	}
	st, err := js.Stream(testCtx(t), cfg.DeadLetterTopic)
	if err != nil {
		t.Fatal(err)
	}
	if got := st.CachedInfo().Config.Storage; got != jetstream.MemoryStorage {
		t.Errorf("storage read back %s, want the operator's Memory", got)
	}
}
