package retryqueue

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/floodgate-go/floodgate/internal/natstest"
	"github.com/floodgate-go/floodgate/jsq"
)

var errRefused = errors.New("bulkhead full")

// The calls' pace (fetchBound's latency estimate) follows only the calls
// that reached the partner: a drained message the handler diverts as not
// attempted (a bulkhead's refusal) leaves it unknown, a delivered one sets
// it; and a drain the gate paused starts over from the first bound (pace
// unknown) when the gate reopens, since the partner's latency before says
// nothing about it now. Against a real JetStream server.
func TestPaceFromPartnerCallsOnlyAndResetAfterPause(t *testing.T) {
	url := natstest.URL(t)
	js := natstest.JetStream(t, natstest.Conn(t, url))
	pub, err := jsq.NewPublisher(jsq.PublisherConfig{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pub.Close() })
	cfg := Config{Publisher: pub, Service: "svc", RetryTopic: natstest.Name(t, "retry"), DeadLetterTopic: natstest.Name(t, "dead"),
		PublishTimeout: 2 * time.Second, Backoff: func(int) time.Duration { return 10 * time.Millisecond }}
	natstest.DeleteStreams(t, js, cfg.RetryTopic, cfg.DeadLetterTopic, "OBJ_"+cfg.DeadLetterTopic+"_payloads")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := Provision(ctx, js, cfg); err != nil {
		t.Fatal(err)
	}
	q, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	seed := func(from, n int) {
		for i := from; i < from+n; i++ {
			if err := q.Divert(ctx, message.NewMessage(fmt.Sprintf("m%d", i), nil), ReasonOpen, errors.New("open")); err != nil {
				t.Fatal(err)
			}
		}
	}
	var budget atomic.Int64
	budget.Store(1 << 20)
	var deliver atomic.Bool // false: the bulkhead refuses every call
	d, err := NewDrainer(DrainerConfig{JetStream: js, Queue: q, Rate: 1000, FixedRate: true, PollInterval: 10 * time.Millisecond,
		Gate: GateFunc(func() int { return int(budget.Load()) }),
		Handler: func(m *message.Message) ([]*message.Message, error) {
			if deliver.Load() {
				return nil, nil
			}
			return nil, q.Divert(m.Context(), m, ReasonNotAttempted, errRefused)
		}})
	if err != nil {
		t.Fatal(err)
	}
	seed(0, 5)
	natstest.Run(t, d.Run)

	natstest.Eventually(t, 20*time.Second, func() bool { return d.Stats().Drained >= 5 }, "5 refusals settled, stats %+v", natstest.Now(func() any { return d.Stats() }))
	if p := d.pace.Load(); p != 0 {
		t.Fatalf("pace %v after refused calls only, want 0 (unknown)", time.Duration(p))
	}

	deliver.Store(true)
	natstest.Eventually(t, 20*time.Second, func() bool {
		bctx, stop := context.WithTimeout(context.Background(), 2*time.Second)
		defer stop()
		n, err := d.Backlog(bctx)
		return err == nil && n == 0 && d.handlersIdle() && d.pace.Load() > 0
	}, "the refused copies delivered, pace set: pace %v, stats %+v", natstest.Now(func() any { return time.Duration(d.pace.Load()) }), natstest.Now(func() any { return d.Stats() }))

	budget.Store(0)
	natstest.Eventually(t, 20*time.Second, d.paused.Load, "drain paused on the closed gate")
	if d.pace.Load() == 0 {
		t.Fatal("pace reset while paused, want it kept until the gate reopens")
	}
	budget.Store(1 << 20)
	d.Wake()
	natstest.Eventually(t, 20*time.Second, func() bool { return !d.paused.Load() && d.pace.Load() == 0 },
		"pace reset when the gate reopened: pace %v", natstest.Now(func() any { return time.Duration(d.pace.Load()) }))
}
