package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/deliver/as2"
	"github.com/floodgate-go/floodgate/internal/natstest"
	"github.com/floodgate-go/floodgate/retryqueue"
)

// Two services with every default (retry and dead-letter topics, drainer
// consumer, partner key) on one NATS server, on different topics and
// delivering to different partners, each in its own process. Service A's
// partner goes down and comes back; while A drains its backlog, the healthy
// service B is killed with SIGKILL and started again. Every message
// reaches its own partner: none lost, none misdelivered (the previous
// release's shared retry stream and drainer consumer delivered most of A's
// orders to B's partner). Duplicates are counted and reported.
func TestTwoServicesShareDefaults(t *testing.T) {
	skipShort(t)
	srv := natstest.Server(t)
	url := srv.ClientURL()
	js := natstest.JetStream(t, natstest.Conn(t, url))
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	// Retry and Dead left empty: retryqueue's defaults, shared.
	ta := topics{Source: natstest.Name(t, "orders_a")}
	tb := topics{Source: natstest.Name(t, "orders_b")}
	pa, pb := newPartner(t), newPartner(t)
	cfgA := consumerConfig{NATSURL: url, PartnerURL: pa.srv.URL, Topics: ta, DrainRate: 40}
	cfgB := consumerConfig{NATSURL: url, PartnerURL: pb.srv.URL, Topics: tb, DrainRate: 40}
	startConsumerProcess(t, cfgA)
	cpB := startConsumerProcess(t, cfgB)
	depthA := func() int {
		n, err := retryqueue.Depth(ctx, js, "floodgate_retry", retryqueue.ConsumerName(retryqueue.ServiceName(ta.Source, "deliver"), retryqueue.DefaultPartner))
		if err != nil {
			return -1
		}
		return int(n)
	}

	// B delivers live traffic throughout; A's partner is down while its
	// orders arrive, so they all go to the shared retry stream.
	prodB := newProducer(t, url, tb.Source)
	bctx, stopB := context.WithCancel(ctx)
	bdone := make(chan struct{})
	go func() { defer close(bdone); prodB.run(bctx, 50) }()
	const n = 300
	pa.down.Store(true)
	prodA := newProducer(t, url, ta.Source)
	if err := prodA.publish(ctx, n); err != nil {
		t.Fatal(err)
	}
	idsA := prodA.published()
	// Each of A's orders is in A's backlog, or (the bug) already at B's
	// partner.
	atB := func() int { u, _, _ := pb.tally(idsA); return u }
	natstest.Eventually(t, 30*time.Second, func() bool { return depthA()+atB() == n }, "all %d diverted (backlog %d, at B's partner %d)", n, natstest.Now(func() any { return depthA() }), natstest.Now(func() any { return atB() }))

	pa.setCapacity(80) // the drain takes a few seconds
	pa.down.Store(false)
	natstest.Eventually(t, 30*time.Second, func() bool { u, _, _ := pa.tally(idsA); return u >= n/4 }, "A's drain under way")
	cpB.kill(t)
	ua, _, _ := pa.tally(idsA)
	t.Logf("B killed with A's drain at %d of %d, A's backlog %d", ua, n, depthA())
	startConsumerProcess(t, cfgB)
	natstest.Eventually(t, 30*time.Second, func() bool { _, _, lost := pb.tally(prodB.published()); return lost == 0 }, "B delivers again after its restart")
	stopB()
	<-bdone
	idsB := prodB.published()

	natstest.Eventually(t, 60*time.Second, func() bool {
		_, _, lostA := pa.tally(idsA)
		_, _, lostB := pb.tally(idsB)
		return lostA == 0 && lostB == 0
	}, "every order at its own partner (A lost %d, B lost %d)", natstest.Now(func() any { _, _, l := pa.tally(idsA); return l }), natstest.Now(func() any { _, _, l := pb.tally(idsB); return l }))

	misA, misB := misdelivered(pa, ta.Source), misdelivered(pb, tb.Source)
	_, dupA, _ := pa.tally(idsA)
	_, dupB, _ := pb.tally(idsB)
	t.Logf("A: %d produced, %d duplicates, %d misdelivered; B: %d produced, %d duplicates, %d misdelivered", len(idsA), dupA, misA, len(idsB), dupB, misB)
	if misA != 0 || misB != 0 {
		t.Fatalf("misdelivered: %d orders of another service at A's partner, %d at B's", misA, misB)
	}
	natstest.Eventually(t, 10*time.Second, func() bool { return depthA() == 0 }, "A's backlog empty")
}

// misdelivered counts the messages p received that another service
// produced: a producer's ids are "<its topic>-<n>" (newProducer), so an id
// with another prefix is a misdelivery. (An id with p's own prefix that
// published() lacks is an order whose publish was confirmed to the server
// but not to the producer, cut short when its context ended: p's own.)
func misdelivered(p *partner, ownTopic string) int {
	prefix := as2.MessageID(ownTopic+"-", "")
	prefix = prefix[:len(prefix)-len("@>")]
	n := 0
	for mid, count := range p.as2.Received() {
		if !strings.HasPrefix(mid, prefix) || !strings.HasSuffix(mid, "@"+idDomain+">") {
			n += count
		}
	}
	return n
}
