package integration

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/floodgate-go/floodgate/internal/natstest"
	"github.com/floodgate-go/floodgate/jsq"
	"github.com/floodgate-go/floodgate/retryqueue"
	"github.com/floodgate-go/floodgate/wmnats"
)

// The README's "Using watermill-nats": watermill-nats' pkg/jetstream
// subscriber made safe for floodgate's middleware by package wmnats. The
// tests below run the same checks as jsq's with it: outage and drain,
// close mid-diversion, restart, a multi-valued header, the retry stream
// away.

// wmnatsPublishTimeout is the diversions' PublishTimeout in these tests:
// a hang guard, not the harness's 2 s. On a loaded machine a diversion
// publish that times out after the server stored it is nacked, redelivered
// and diverted again: an extra copy in the retry stream that no restart
// caused, which the bound of TestWatermillNATSCloseMidDiversion would
// count.
const wmnatsPublishTimeout = 5 * time.Second

// wmnatsAckWait is the subscriber's AckWait. It must exceed 2 × the
// longest handler call: the middleware's Timeout plus the diversion's
// PublishTimeout (3 s + 5 s in these tests): 2 × 8 s < 20 s.
const wmnatsAckWait = 20 * time.Second

// wmnatsDurable names the durable consumer on topic's stream.
func wmnatsDurable(topic string) string { return "floodgate_wmnats_" + jsq.StreamName(topic) }

// newWatermillNATSSubscriber is the README's usage: a wmnats.Subscriber
// on the durable consumer named durable, for handlers router handlers.
func newWatermillNATSSubscriber(url, durable string, handlers int) (*wmnats.Subscriber, error) {
	return wmnats.NewSubscriber(wmnats.Config{URL: url, Durable: durable, Handlers: handlers, AckWait: wmnatsAckWait})
}

// maxAckPending is the consumer's MaxAckPending of c's wmnats subscriber:
// the most messages delivered and not yet acked, so the most a restart
// may deliver again.
func maxAckPending(t *testing.T, c *consumer) int {
	t.Helper()
	return c.sub.(*wmnats.Subscriber).ConsumerConfig().MaxAckPending
}

// wmnatsSetup is one test's server, streams, partner and consumer config.
func wmnatsSetup(t *testing.T) (consumerConfig, *partner, jetstream.JetStream, context.Context) {
	t.Helper()
	skipShort(t)
	t.Parallel()
	url := natstest.URL(t)
	tp := newTopics(t)
	js := natstest.JetStream(t, natstest.Conn(t, url))
	natstest.DeleteStreams(t, js, tp.Source, tp.Retry, tp.Dead)
	p := newPartner(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	if _, err := jsq.EnsureStream(ctx, js, tp.Source); err != nil { // as the publishing side would
		t.Fatal(err)
	}
	return consumerConfig{NATSURL: url, PartnerURL: p.srv.URL, Topics: tp, WatermillNATS: true, PublishTimeout: wmnatsPublishTimeout}, p, js, ctx
}

// retryCopies counts the messages of ids in the retry stream: unique ones
// and the extra copies (a message diverted again after a redelivery).
func retryCopies(t *testing.T, js jetstream.JetStream, stream string, ids []string) (unique, extra int) {
	t.Helper()
	n := map[string]int{}
	for _, m := range natstest.StreamMsgs(t, js, stream) {
		n[m.UUID]++
	}
	for _, id := range ids {
		if n[id] > 0 {
			unique++
			extra += n[id] - 1
		}
	}
	return unique, extra
}

// allInRetryStream reports whether every message of ids is in the retry
// stream. It reads the messages only once the stream holds at least as
// many as ids: a poll reads a count (one request), not every stored
// message (one request each), while the stream fills.
func allInRetryStream(t *testing.T, js jetstream.JetStream, stream string, ids []string) bool {
	t.Helper()
	if natstest.StreamCount(t, js, stream) < uint64(len(ids)) {
		return false
	}
	unique, _ := retryCopies(t, js, stream, ids)
	return unique == len(ids)
}

// TestWatermillNATSOutageAndDrain: through wmnats, a partner outage
// and the drain after it lose nothing; duplicates are counted and logged.
func TestWatermillNATSOutageAndDrain(t *testing.T) {
	cfg, p, _, ctx := wmnatsSetup(t)
	c, err := startConsumer(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.stop()
	prod := newProducer(t, cfg.NATSURL, cfg.Topics.Source)
	if err := prod.publish(ctx, 50); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, time.Minute, func() bool { return c.events.delivered.Load() >= 50 }, "healthy phase")
	p.down.Store(true)
	const outage = 300
	if err := prod.publish(ctx, outage); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 2*time.Minute, func() bool { return c.events.diverted.Load() >= outage },
		"outage: %d of %d diverted", natstest.Now(func() any { return c.events.diverted.Load() }), outage)
	peak := backlog(c)
	p.down.Store(false)
	if err := prod.publish(ctx, 50); err != nil { // live traffic during the drain
		t.Fatal(err)
	}
	ids := prod.published()
	natstest.Eventually(t, 2*time.Minute, func() bool { _, _, lost := p.tally(ids); return lost == 0 && backlog(c) == 0 },
		"everything delivered (backlog %d)", natstest.Now(func() any { return backlog(c) }))
	unique, dups, lost := p.tally(ids)
	t.Logf("wmnats: produced %d, delivered %d unique, duplicates %d, lost %d; backlog at recovery %d; drainer %+v",
		len(ids), unique, dups, lost, peak, c.drainer.Stats())
	if lost != 0 || unique != len(ids) {
		t.Errorf("lost %d of %d", lost, len(ids))
	}
}

// TestWatermillNATSCloseMidDiversion: closing the router (and so the
// watermill-nats subscriber) while messages are being diverted loses
// nothing: after a restart on the same durable every message is in the
// retry stream. A message diverted but not acked at the close is
// redelivered and diverted again: at most MaxAckPending extra copies.
func TestWatermillNATSCloseMidDiversion(t *testing.T) {
	cfg, _, js, ctx := wmnatsSetup(t)
	cfg.ForceOpen = true
	const n = 1000 // stored first, so the consumer runs ahead of no producer
	prod := newProducer(t, cfg.NATSURL, cfg.Topics.Source)
	if err := prod.publish(ctx, n); err != nil {
		t.Fatal(err)
	}
	c, err := startConsumer(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, time.Minute, func() bool { return c.events.diverted.Load() >= 50 }, "diverting")
	c.stop()
	first := c.events.diverted.Load()
	if first >= n {
		t.Log("all diverted before the close; the close raced nothing")
	}
	c2, err := startConsumer(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.stop()
	ids := prod.published()
	natstest.Eventually(t, 2*time.Minute, func() bool { return allInRetryStream(t, js, cfg.Topics.Retry, ids) },
		"every message in the retry stream")
	_, extra := retryCopies(t, js, cfg.Topics.Retry, ids)
	bound := maxAckPending(t, c2) // 16: the harness runs 8 handlers
	t.Logf("closed after %d of %d diversions; %d diverted twice (bound %d)", first, n, extra, bound)
	if extra > bound {
		t.Errorf("%d messages diverted again after the restart, more than MaxAckPending %d: acked messages were redelivered", extra, bound)
	}
}

// TestWatermillNATSRestartResendsOnlyUnacked: a second run on the same
// durable consumer does not re-deliver acked messages. The first run is
// closed while delivering; only the messages delivered but not yet acked
// at the close (at most MaxAckPending) may reach the partner twice, where
// the adapter's default consumer, deleted on Close, re-sends the stream.
func TestWatermillNATSRestartResendsOnlyUnacked(t *testing.T) {
	cfg, p, _, ctx := wmnatsSetup(t)
	const n = 1000 // stored first, so the consumer runs ahead of no producer
	prod := newProducer(t, cfg.NATSURL, cfg.Topics.Source)
	if err := prod.publish(ctx, n); err != nil {
		t.Fatal(err)
	}
	c, err := startConsumer(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, time.Minute, func() bool { return c.events.delivered.Load() >= 100 }, "first run delivering")
	c.stop()
	first := c.events.delivered.Load()
	c2, err := startConsumer(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.stop()
	if err := prod.publish(ctx, 20); err != nil { // the second run's own traffic
		t.Fatal(err)
	}
	ids := prod.published()
	natstest.Eventually(t, 2*time.Minute, func() bool { _, _, lost := p.tally(ids); return lost == 0 && backlog(c2) == 0 },
		"everything delivered")
	unique, dups, lost := p.tally(ids)
	bound := maxAckPending(t, c2) // 16: the harness runs 8 handlers
	t.Logf("first run delivered %d of %d; after the restart: %d unique, %d re-sent (bound %d), %d lost",
		first, n, unique, dups, bound, lost)
	if lost != 0 {
		t.Errorf("lost %d of %d", lost, len(ids))
	}
	if dups > bound {
		t.Errorf("%d messages re-sent after the restart, more than MaxAckPending %d: acked messages were redelivered", dups, bound)
	}
}

// TestWatermillNATSMultiValuedHeader: a message with a header of two
// values, which crashes the process in watermill-nats' DefaultUnmarshaler
// (it returns a nil message the subscriber then reads), is dead-lettered
// as malformed through jsq.Unmarshaler; the messages around it are
// delivered.
func TestWatermillNATSMultiValuedHeader(t *testing.T) {
	cfg, p, js, ctx := wmnatsSetup(t)
	c, err := startConsumer(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.stop()
	prod := newProducer(t, cfg.NATSURL, cfg.Topics.Source)
	if err := prod.publish(ctx, 5); err != nil {
		t.Fatal(err)
	}
	bad := nats.NewMsg(cfg.Topics.Source)
	bad.Header.Set(jsq.UUIDHeader, "multi-valued")
	bad.Header.Add("X-Tag", "a")
	bad.Header.Add("X-Tag", "b")
	bad.Data = []byte("ISA*00*PO multi~")
	if _, err := js.PublishMsg(ctx, bad); err != nil {
		t.Fatal(err)
	}
	if err := prod.publish(ctx, 5); err != nil {
		t.Fatal(err)
	}
	ids := prod.published()
	natstest.Eventually(t, time.Minute, func() bool { _, _, lost := p.tally(ids); return lost == 0 }, "the others delivered")
	var reason string
	natstest.Eventually(t, time.Minute, func() bool {
		for _, m := range natstest.StreamMsgs(t, js, cfg.Topics.Dead) {
			if m.UUID == "multi-valued" {
				reason = m.Metadata.Get(retryqueue.MetaDeadReason)
				return true
			}
		}
		return false
	}, "the multi-valued message dead-lettered")
	if reason != retryqueue.DeadReasonMalformed {
		t.Errorf("dead reason %q, want %q", reason, retryqueue.DeadReasonMalformed)
	}
}

// TestWatermillNATSRetryStreamAwayLosesNothing: with the retry stream gone
// (diversions unconfirmed, so nacked) for longer than five deliveries of
// every message, nothing is lost once it is back: wmnats' MaxDeliver
// is unlimited. With MaxDeliver 5 the broker would give up on each message
// after its fifth nack, and the adapter hides the delivery count from the
// middleware, which so cannot dead-letter it first.
func TestWatermillNATSRetryStreamAwayLosesNothing(t *testing.T) {
	cfg, _, js, ctx := wmnatsSetup(t)
	cfg.ForceOpen = true
	c, err := startConsumer(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.stop()
	if err := js.DeleteStream(ctx, cfg.Topics.Retry); err != nil {
		t.Fatal(err)
	}
	const n = 20
	prod := newProducer(t, cfg.NATSURL, cfg.Topics.Source)
	if err := prod.publish(ctx, n); err != nil {
		t.Fatal(err)
	}
	const deliveries = 6 // per message, beyond a MaxDeliver of 5
	natstest.Eventually(t, 2*time.Minute, func() bool { return c.events.nacked.Load() >= deliveries*n },
		"nacked %d of %d", natstest.Now(func() any { return c.events.nacked.Load() }), deliveries*n)
	if _, err := js.CreateStream(ctx, retryqueue.RetryStreamConfig(cfg.Topics.Retry)); err != nil {
		t.Fatal(err)
	}
	ids := prod.published()
	natstest.Eventually(t, time.Minute, func() bool { return allInRetryStream(t, js, cfg.Topics.Retry, ids) },
		"every message in the retry stream")
	t.Logf("%d nacks while the retry stream was away, %d messages, 0 lost", c.events.nacked.Load(), n)
}
