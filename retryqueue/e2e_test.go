package retryqueue_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/floodgate-go/floodgate/internal/natstest"
	"github.com/floodgate-go/floodgate/jsq"
	"github.com/floodgate-go/floodgate/retryqueue"
)

// pipeline is a source topic consumed by a Watermill router whose handler
// diverts every message, as the breaker middleware does while open.
type pipeline struct {
	e      env
	source string
	ids    []string
	subCfg jsq.SubscriberConfig
}

// newPipeline stores n messages on a new source topic. Its queue's
// PublishTimeout is publishTimeout, or 500 ms if 0: short, for tests that
// stop the server or close the router mid-diversion.
func newPipeline(t *testing.T, url string, n int, publishTimeout time.Duration) *pipeline {
	t.Helper()
	if publishTimeout == 0 {
		publishTimeout = 500 * time.Millisecond
	}
	p := &pipeline{e: newEnv(t, url, func(c *retryqueue.Config) { c.PublishTimeout = publishTimeout })}
	p.source = natstest.Name(t, "src")
	natstest.DeleteStreams(t, p.e.js, p.source)
	if _, err := jsq.EnsureStream(testCtx(t), p.e.js, p.source); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		id := fmt.Sprintf("po-%04d", i)
		p.ids = append(p.ids, id)
		if err := p.e.pub.Publish(p.source, message.NewMessage(id, []byte(id))); err != nil {
			t.Fatal(err)
		}
	}
	p.subCfg = jsq.SubscriberConfig{
		URL:         url,
		AckWait:     time.Second,
		Concurrency: 4,
		NakDelay:    staticDelay(100 * time.Millisecond),
	}
	return p
}

// run starts a router diverting every source message; h runs first if set.
// It returns the router's close function.
func (p *pipeline) run(t *testing.T, h func(*message.Message)) func() error {
	t.Helper()
	sub, err := jsq.NewSubscriber(p.subCfg)
	if err != nil {
		t.Fatal(err)
	}
	r, err := message.NewRouter(message.RouterConfig{CloseTimeout: 200 * time.Millisecond}, watermill.NopLogger{})
	if err != nil {
		t.Fatal(err)
	}
	r.AddConsumerHandler("divert", p.source, sub, func(m *message.Message) error {
		if h != nil {
			h(m)
		}
		return p.e.q.Divert(m.Context(), m, retryqueue.ReasonOpen, errOpen)
	})
	done := make(chan struct{})
	go func() { _ = r.Run(context.Background()); close(done) }()
	<-r.Running()
	var once sync.Once
	closeFn := func() error {
		var err error
		once.Do(func() { err = r.Close(); <-done })
		return err
	}
	t.Cleanup(func() { _ = closeFn() })
	return closeFn
}

// complete reports whether every source message is in the retry stream and
// the source consumer has acked everything. It returns the duplicates.
func (p *pipeline) complete(t *testing.T) (bool, int) {
	c, err := p.e.js.Consumer(testCtx(t), p.source, jsq.DefaultConsumerName(p.source))
	if err != nil {
		return false, 0
	}
	info, err := c.Info(testCtx(t))
	if err != nil || info.NumPending != 0 || info.NumAckPending != 0 {
		return false, 0
	}
	got := map[string]int{}
	for _, m := range streamMsgs(t, p.e.js, p.e.q.RetryTopic()) {
		got[m.UUID]++
		if m.Metadata.Get(retryqueue.MetaOriginalTopic) != p.source {
			t.Fatalf("%s: original topic %q, want %q", m.UUID, m.Metadata.Get(retryqueue.MetaOriginalTopic), p.source)
		}
	}
	dups := 0
	for _, id := range p.ids {
		if got[id] == 0 {
			return false, 0
		}
		dups += got[id] - 1
	}
	return true, dups
}

func (p *pipeline) waitComplete(t *testing.T, timeout time.Duration) {
	t.Helper()
	var dups int
	natstest.Eventually(t, timeout, func() bool {
		var ok bool
		ok, dups = p.complete(t)
		return ok
	}, "every source message in the retry stream and acked at the source")
	t.Logf("%d source messages, %d duplicates in the retry stream, queue stats %+v", len(p.ids), dups, p.e.q.Stats())
}

// The NATS server stops while diversions are in flight and restarts with
// the same store: every source message ends up in the retry stream (some
// twice), none is lost.
func TestServerRestartMidDiversionLosesNothing(t *testing.T) {
	srv := natstest.Server(t)
	p := newPipeline(t, srv.ClientURL(), 300, 0)
	var handled atomic.Int64
	stopped := make(chan struct{})
	p.run(t, func(*message.Message) {
		if handled.Add(1) == 100 { // this diversion and those in flight fail
			srv.Stop()
			close(stopped)
		}
	})
	select {
	case <-stopped:
	case <-time.After(20 * time.Second):
		t.Fatal("diversions never reached 100")
	}
	natstest.Eventually(t, 10*time.Second, func() bool { return p.e.q.Stats().PublishErrors >= 1 }, "diversions failing while the server is down")
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	p.waitComplete(t, 30*time.Second)
}

// The router closes while a diversion is in flight (its publish completes
// after the close): the source message was not acked, so it is redelivered
// to the next router and diverted again, a duplicate, not a loss.
func TestRouterCloseMidDiversionLosesNothing(t *testing.T) {
	p := newPipeline(t, natstest.URL(t), 60, 0)
	var handled atomic.Int64
	closing := make(chan struct{})
	var blocked atomic.Bool
	closeRouter := p.run(t, func(m *message.Message) {
		if handled.Add(1) == 20 {
			blocked.Store(true)
			<-closing // diverts after the router closed
			<-m.Context().Done()
		}
	})
	natstest.Eventually(t, 10*time.Second, blocked.Load, "a handler held mid-diversion")
	close(closing)
	_ = closeRouter()
	if n := p.e.q.Stats().Diverted; n >= 60 {
		t.Fatalf("all %d diverted before the close: nothing in flight", n)
	}
	p.run(t, nil)
	p.waitComplete(t, 20*time.Second)
}

func staticDelay(d time.Duration) func(uint64) time.Duration {
	return func(uint64) time.Duration { return d }
}

// With MaxAckPending 2 on the source consumer and every message diverted
// (the breaker open), 500 messages are all diverted, each delivered once: a
// diversion never leaves the source message pending. (A pending one would
// hold one of the 2 slots until AckWait, 30 s here, and come back as a
// redelivery; the hang guard is well below the stall that 250 such pairs
// would cause.) The diversion's PublishTimeout is a hang guard well below
// AckWait: a publish that timed out on a loaded machine would fail its
// diversion, and the nacked message would come back as a redelivery this
// test does not mean.
func TestLowMaxAckPendingDivertsQuickly(t *testing.T) {
	p := newPipeline(t, natstest.URL(t), 500, 10*time.Second)
	p.subCfg.MaxAckPending = 2
	p.subCfg.Concurrency = 2
	p.subCfg.AckWait = 30 * time.Second
	var mu sync.Mutex
	seen := map[string]int{}
	start := time.Now()
	p.run(t, func(m *message.Message) { mu.Lock(); seen[m.UUID]++; mu.Unlock() })
	p.waitComplete(t, 2*time.Minute)
	elapsed := time.Since(start)
	t.Logf("500 diversions with MaxAckPending 2 in %s (%.0f msgs/s)", elapsed, 500/elapsed.Seconds())
	mu.Lock()
	defer mu.Unlock()
	for _, id := range p.ids {
		if seen[id] != 1 {
			t.Errorf("%s delivered %d times, want 1: a diversion left it pending", id, seen[id])
		}
	}
}
