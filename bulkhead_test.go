package floodgate_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/pubsub/gochannel"

	"github.com/floodgate-go/floodgate"
	"github.com/floodgate-go/floodgate/internal/natstest"
	"github.com/floodgate-go/floodgate/partner"
	"github.com/floodgate-go/floodgate/retryqueue"
)

// A slow partner's drain uses its whole bulkhead: the middleware tells the
// drainer when it admitted a drained message (retryqueue.Admitted), so the
// drainer does not also take that call off the gate's budget. Before, each
// call was counted twice and the drain stopped at half the bulkhead. It
// never exceeds the bulkhead, and every message is delivered once the
// partner answers.
func TestSlowPartnerDrainFillsItsBulkhead(t *testing.T) {
	url := natstest.URL(t)
	js := natstest.JetStream(t, natstest.Conn(t, url))
	retry, dead := natstest.Name(t, "retry"), natstest.Name(t, "dead")
	natstest.DeleteStreams(t, js, retry, dead)
	const bulkhead, backlog = 4, 12

	var (
		mu         sync.Mutex
		inCall     int // drained calls in the partner now
		peak       int
		delivered  = map[string]bool{}
		release    = make(chan struct{})
		releaseOne sync.Once
	)
	unblock := func() { releaseOne.Do(func() { close(release) }) }
	t.Cleanup(unblock)
	router, err := message.NewRouter(message.RouterConfig{CloseTimeout: 20 * time.Second}, watermill.NopLogger{})
	if err != nil {
		t.Fatal(err)
	}
	live := gochannel.NewGoChannel(gochannel.Config{}, watermill.NopLogger{})
	fg, err := floodgate.New(context.Background(), router, floodgate.Config{
		Name: "slow", Topic: natstest.Name(t, "live"), Subscriber: live, JetStream: js,
		PartnerKey: func(m *message.Message) string { return m.Metadata.Get("partner") },
		Partner:    partner.PartnerConfig{MaxInFlight: bulkhead},
		Deliver: func(m *message.Message) error {
			mu.Lock()
			inCall++
			peak = max(peak, inCall)
			mu.Unlock()
			<-release // a partner that answers only when the test lets it
			mu.Lock()
			inCall--
			delivered[m.UUID] = true
			mu.Unlock()
			return nil
		},
		Queue: retryqueue.Config{RetryTopic: retry, DeadLetterTopic: dead},
		Drain: retryqueue.PartnerDrainerConfig{Drainer: retryqueue.DrainerConfig{PollInterval: 20 * time.Millisecond}},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer fg.Close()
	// The backlog is in the retry stream before the router starts.
	for i := range backlog {
		m := message.NewMessage(fmt.Sprintf("m-%02d", i), []byte("order"))
		m.Metadata.Set("partner", "retailer")
		if _, err := fg.Queue().RouteTo(context.Background(), m, "retailer", retryqueue.ReasonOpen, errors.New("partner was open")); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	runDone := startRouter(ctx, router)
	defer func() {
		unblock()
		_ = router.Close()
		<-runDone
	}()

	calls := func() int {
		mu.Lock()
		defer mu.Unlock()
		return inCall
	}
	natstest.Eventually(t, 30*time.Second, func() bool { return calls() == bulkhead },
		"%d drained calls in the partner at once, want its whole bulkhead %d", natstest.Now(func() any { return calls() }), bulkhead)
	unblock()
	natstest.Eventually(t, 30*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(delivered) == backlog
	}, "the whole backlog delivered")
	mu.Lock()
	defer mu.Unlock()
	if peak > bulkhead {
		t.Errorf("peak %d drained calls at once, want <= the bulkhead %d", peak, bulkhead)
	}
}
