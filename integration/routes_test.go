package integration

import (
	"context"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/internal/natstest"
	"github.com/floodgate-go/floodgate/retryqueue"
)

// Two services wired as the README shows, with every route default (retry
// and dead-letter topics, service name, partner, drainer consumer), on one
// NATS server, on different topics and delivering to different partners,
// each in its own process. Service A's partner goes down and comes back;
// while A drains its backlog, the healthy service B is killed with SIGKILL
// and started again. Every message reaches its own partner: none lost,
// none misdelivered (the previous release's shared retry stream and
// drainer consumer delivered most of A's orders to B's partner).
// Duplicates are counted and reported. It uses NATS_URL when set.
func TestTwoServicesShareDefaults(t *testing.T) {
	skipShort(t)
	url := natstest.URL(t)
	js := natstest.JetStream(t, natstest.Conn(t, url))
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	topicA, topicB := natstest.Name(t, "orders_a"), natstest.Name(t, "orders_b")
	const retry = "floodgate_retry" // retryqueue.Config's default, shared
	consumerOf := func(topic string) string {
		return retryqueue.ConsumerName(retryqueue.ServiceName(topic, serviceHandler), retryqueue.DefaultPartner)
	}
	natstest.DeleteStreams(t, js, topicA, topicB)
	t.Cleanup(func() { // the shared streams stay, as another service's would
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = js.DeleteConsumer(ctx, retry, consumerOf(topicA))
		_ = js.DeleteConsumer(ctx, retry, consumerOf(topicB))
	})
	depthA := func() int {
		n, err := retryqueue.Depth(ctx, js, retry, consumerOf(topicA))
		if err != nil {
			return -1
		}
		return int(n)
	}

	pa, pb := newEndpoint(t), newEndpoint(t)
	cfgA := serviceConfig{NATSURL: url, PartnerURL: pa.srv.URL, Topic: topicA}
	cfgB := serviceConfig{NATSURL: url, PartnerURL: pb.srv.URL, Topic: topicB}
	// Started together: both provision the shared streams at once.
	started := make(chan *consumerProcess)
	go func() { started <- startProcess(t, envService, cfgA) }()
	cpB := startProcess(t, envService, cfgB)
	<-started

	// B delivers live traffic throughout; A's partner is down while its
	// orders arrive, so they all go to the retry stream.
	prodB := newProducer(t, url, topicB)
	bctx, stopB := context.WithCancel(ctx)
	bdone := make(chan struct{})
	go func() { defer close(bdone); prodB.run(bctx, 50) }()
	const n = 400
	pa.down.Store(true)
	prodA := newProducer(t, url, topicA)
	if err := prodA.publish(ctx, n); err != nil {
		t.Fatal(err)
	}
	idsA := prodA.published()
	// Each of A's orders is in A's backlog or (the bug) at B's partner.
	atB := func() int { u, _, _ := pb.tally(idsA); return u }
	natstest.Eventually(t, 30*time.Second, func() bool { return depthA()+atB() == n }, "all %d diverted (backlog %d, at B's partner %d)",
		n, natstest.Now(func() any { return depthA() }), natstest.Now(func() any { return atB() }))

	pa.down.Store(false)
	natstest.Eventually(t, 30*time.Second, func() bool { u, _, _ := pa.tally(idsA); return u >= n/4 }, "A's drain under way (%d of A's orders at B's partner)",
		natstest.Now(func() any { return atB() }))
	cpB.kill(t)
	ua, _, _ := pa.tally(idsA)
	left := depthA()
	t.Logf("B killed with A's drain at %d of %d, A's backlog %d", ua, n, left)
	if left <= 0 || ua >= n {
		t.Fatalf("not mid-drain when B was killed: A delivered %d, backlog %d", ua, left)
	}
	startProcess(t, envService, cfgB)
	natstest.Eventually(t, 45*time.Second, func() bool { _, _, lost := pb.tally(prodB.published()); return lost == 0 }, "B delivers again after its restart")
	stopB()
	<-bdone
	idsB := prodB.published()

	natstest.Eventually(t, 60*time.Second, func() bool {
		_, _, lostA := pa.tally(idsA)
		_, _, lostB := pb.tally(idsB)
		return lostA == 0 && lostB == 0
	}, "every order at its own partner (A lost %d, B lost %d)",
		natstest.Now(func() any { _, _, l := pa.tally(idsA); return l }), natstest.Now(func() any { _, _, l := pb.tally(idsB); return l }))

	misA, fromA := pa.foreign(topicA)
	misB, fromB := pb.foreign(topicB)
	_, dupA, _ := pa.tally(idsA)
	_, dupB, _ := pb.tally(idsB)
	t.Logf("A: %d produced, %d duplicates, %d misdelivered; B: %d produced, %d duplicates, %d misdelivered", len(idsA), dupA, misA, len(idsB), dupB, misB)
	if misA != 0 || misB != 0 || fromA != 0 || fromB != 0 {
		t.Fatalf("misdelivered: %d orders of another service at A's partner, %d at B's (posted by the other service: %d, %d)", misA, misB, fromA, fromB)
	}
	natstest.Eventually(t, 10*time.Second, func() bool { return depthA() == 0 }, "A's backlog empty")
}
