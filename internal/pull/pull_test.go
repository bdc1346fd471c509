package pull_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/internal/natstest"
	"github.com/floodgate-go/floodgate/internal/pull"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

type env struct {
	nc      *nats.Conn
	js      jetstream.JetStream
	stream  string
	subject string
	cons    jetstream.Consumer
}

func setup(t *testing.T, cc jetstream.ConsumerConfig) *env {
	t.Helper()
	nc := natstest.Conn(t, natstest.URL(t))
	js := natstest.JetStream(t, nc)
	e := &env{nc: nc, js: js, stream: natstest.Name(t, "PULL"), subject: natstest.Name(t, "pull")}
	ctx := t.Context()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: e.stream, Subjects: []string{e.subject}}); err != nil {
		t.Fatal(err)
	}
	natstest.DeleteStreams(t, js, e.stream)
	cc.Durable = "c"
	cc.AckPolicy = jetstream.AckExplicitPolicy
	if cc.AckWait == 0 {
		cc.AckWait = time.Minute // a message held by a dead inbox would stay out for the whole test
	}
	var err error
	if e.cons, err = js.CreateConsumer(ctx, e.stream, cc); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *env) publish(t *testing.T, n int) {
	t.Helper()
	for i := range n {
		if _, err := e.js.Publish(t.Context(), e.subject, []byte(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
}

func (e *env) puller(t *testing.T) *pull.Puller {
	t.Helper()
	p, err := pull.New(e.js, e.stream, "c", 16, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// Fetch brings the messages in order, at most the batch, ends a no-wait
// request on "no messages" and a waiting one on its expiry, and the
// messages it brings can be acked.
func TestFetch(t *testing.T) {
	e := setup(t, jetstream.ConsumerConfig{})
	e.publish(t, 5)
	p := e.puller(t)
	var got []jetstream.Msg
	n, err := p.Fetch(t.Context(), 3, 0, func(m jetstream.Msg) { got = append(got, m) })
	if err != nil || n != 3 || len(got) != 3 {
		t.Fatalf("Fetch(3, no wait) = %d, %v (%d messages), want 3", n, err, len(got))
	}
	n, err = p.Fetch(t.Context(), 10, 0, func(m jetstream.Msg) { got = append(got, m) })
	if err != nil || n != 2 || len(got) != 5 {
		t.Fatalf("Fetch(10, no wait) = %d, %v, want the 2 left", n, err)
	}
	for i, m := range got {
		md, err := m.Metadata()
		if err != nil {
			t.Fatal(err)
		}
		if string(m.Data()) != fmt.Sprint(i) || md.Sequence.Stream != uint64(i+1) || md.NumDelivered != 1 || md.Stream != e.stream || md.Consumer != "c" {
			t.Fatalf("message %d: data %q, metadata %+v", i, m.Data(), md)
		}
		if m.Subject() != e.subject {
			t.Fatalf("subject %q, want %q", m.Subject(), e.subject)
		}
		if err := m.DoubleAck(t.Context()); err != nil {
			t.Fatalf("DoubleAck: %v", err)
		}
	}
	n, err = p.Fetch(t.Context(), 4, 0, func(jetstream.Msg) { t.Fatal("a message from an empty consumer") })
	if n != 0 || err != nil {
		t.Fatalf("Fetch on empty, no wait = %d, %v, want 0, nil", n, err)
	}
	n, err = p.Fetch(t.Context(), 4, 200*time.Millisecond, func(jetstream.Msg) { t.Fatal("a message from an empty consumer") })
	if n != 0 || err != nil {
		t.Fatalf("Fetch on empty, 200ms = %d, %v, want 0, nil (the server's expiry)", n, err)
	}
	info, err := e.cons.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if info.AckFloor.Stream != 5 || info.NumAckPending != 0 {
		t.Fatalf("ack floor %d, %d pending; want 5, 0", info.AckFloor.Stream, info.NumAckPending)
	}
	// A waiting request is answered by a message published meanwhile.
	done := make(chan int)
	go func() {
		n, _ := p.Fetch(t.Context(), 1, 30*time.Second, func(jetstream.Msg) {})
		done <- n
	}()
	natstest.Eventually(t, 10*time.Second, func() bool {
		info, err := e.cons.Info(t.Context())
		return err == nil && info.NumWaiting == 1
	}, "the pull request waiting on the server")
	e.publish(t, 1)
	select {
	case n := <-done:
		if n != 1 {
			t.Fatalf("waiting Fetch brought %d, want 1", n)
		}
	case <-time.After(20 * time.Second): // hang guard
		t.Fatal("waiting Fetch did not return with the message")
	}
}

// A Puller closed while its request is open on the server never receives
// (and so never holds for AckWait) a message published after Close and a
// flush: the next puller gets it on its first delivery.
func TestCloseDropsInterest(t *testing.T) {
	e := setup(t, jetstream.ConsumerConfig{})
	for round := range 20 {
		// A consumer of its own per round: no request left over from an
		// earlier round counts in NumWaiting.
		name := fmt.Sprint("r", round)
		cons, err := e.js.CreateConsumer(t.Context(), e.stream, jetstream.ConsumerConfig{
			Durable: name, AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Minute, DeliverPolicy: jetstream.DeliverNewPolicy,
		})
		if err != nil {
			t.Fatal(err)
		}
		p, err := pull.New(e.js, e.stream, name, 16, nil)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() {
			_, err := p.Fetch(ctx, 10, 30*time.Second, func(jetstream.Msg) { t.Error("message before publish") })
			done <- err
		}()
		natstest.Eventually(t, 10*time.Second, func() bool {
			info, err := cons.Info(t.Context())
			return err == nil && info.NumWaiting == 1
		}, "round %d: the pull request waiting on the server", round)
		cancel()
		if err := <-done; err != context.Canceled {
			t.Fatalf("round %d: Fetch after cancel: %v, want context.Canceled", round, err)
		}
		if n := p.Close(); n != 0 {
			t.Fatalf("round %d: Close nakked %d, want 0", round, n)
		}
		e.publish(t, 1)
		q, err := pull.New(e.js, e.stream, name, 16, nil)
		if err != nil {
			t.Fatal(err)
		}
		var md *jetstream.MsgMetadata
		n, err := q.Fetch(t.Context(), 1, 10*time.Second, func(m jetstream.Msg) {
			md, _ = m.Metadata()
			_ = m.DoubleAck(t.Context())
		})
		if err != nil || n != 1 {
			t.Fatalf("round %d: next puller's Fetch = %d, %v, want 1 message", round, n, err)
		}
		if md == nil || md.NumDelivered != 1 {
			t.Fatalf("round %d: message delivered %+v times, want once (the closed puller took it)", round, md)
		}
		q.Close()
	}
}

// A stream message whose own headers look like a status answer (no
// payload, "Status: 404" and the like, as message metadata becomes
// headers) is a message: delivered, counted, and it ends nothing.
func TestStatusHeaderInMessage(t *testing.T) {
	e := setup(t, jetstream.ConsumerConfig{})
	codes := []string{"404", "408", "100", "409", "503"}
	for _, c := range codes {
		m := nats.NewMsg(e.subject)
		m.Header.Set("Status", c)
		m.Header.Set("Description", "Consumer Deleted")
		if _, err := e.js.PublishMsg(t.Context(), m); err != nil {
			t.Fatal(err)
		}
	}
	e.publish(t, 1)
	p := e.puller(t)
	var got []string
	n, err := p.Fetch(t.Context(), 10, time.Second, func(m jetstream.Msg) {
		got = append(got, m.Headers().Get("Status"))
		_ = m.DoubleAck(t.Context())
	})
	if err != nil || n != len(codes)+1 || fmt.Sprint(got) != fmt.Sprint(append(codes, "")) {
		t.Fatalf("Fetch = %d, %v, statuses %q; want all %d messages", n, err, got, len(codes)+1)
	}
	info, err := e.cons.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if info.NumAckPending != 0 || info.AckFloor.Stream != uint64(len(codes)+1) {
		t.Fatalf("ack pending %d, ack floor %d; want 0, %d", info.NumAckPending, info.AckFloor.Stream, len(codes)+1)
	}
}

// Messages that reached the inbox unread when Fetch's context ended are
// nakked by the next Fetch (or Close), so they come back at once, not
// after AckWait.
func TestUnreadMessagesNakked(t *testing.T) {
	e := setup(t, jetstream.ConsumerConfig{})
	e.publish(t, 4)
	p := e.puller(t)
	ctx, cancel := context.WithCancel(t.Context())
	read := 0
	n, err := p.Fetch(ctx, 4, 5*time.Second, func(m jetstream.Msg) {
		read++
		if err := m.DoubleAck(t.Context()); err != nil {
			t.Errorf("DoubleAck: %v", err)
		}
		// Wait until the other three are in the inbox before cancelling.
		natstest.Eventually(t, 10*time.Second, func() bool {
			info, err := e.cons.Info(t.Context())
			return err == nil && info.NumAckPending == 3
		}, "the rest delivered")
		cancel()
	})
	if err != context.Canceled || n != 1 || read != 1 {
		t.Fatalf("Fetch = %d, %v (%d read), want 1, context.Canceled", n, err, read)
	}
	var seen []uint64
	n, err = p.Fetch(t.Context(), 3, 10*time.Second, func(m jetstream.Msg) {
		md, _ := m.Metadata()
		if md.NumDelivered != 2 {
			t.Errorf("message %d delivered %d times, want 2 (nakked, then again)", md.Sequence.Stream, md.NumDelivered)
		}
		seen = append(seen, md.Sequence.Stream)
		_ = m.DoubleAck(t.Context())
	})
	if err != nil || n != 3 || fmt.Sprint(seen) != "[2 3 4]" {
		t.Fatalf("Fetch after renewal = %d, %v, sequences %v, want [2 3 4]", n, err, seen)
	}
}

// A refused request is an error naming the server's reason.
func TestRefusal(t *testing.T) {
	e := setup(t, jetstream.ConsumerConfig{MaxRequestBatch: 2})
	p := e.puller(t)
	_, err := p.Fetch(t.Context(), 5, time.Second, func(jetstream.Msg) {})
	if err == nil || !strings.Contains(err.Error(), "409") || !strings.Contains(strings.ToLower(err.Error()), "maxrequestbatch") {
		t.Fatalf("Fetch over MaxRequestBatch: %v, want a 409 naming MaxRequestBatch", err)
	}
	// A request waiting when its consumer is deleted ends with the
	// server's 409.
	done := make(chan error)
	go func() {
		_, err := p.Fetch(t.Context(), 1, 30*time.Second, func(jetstream.Msg) {})
		done <- err
	}()
	natstest.Eventually(t, 10*time.Second, func() bool {
		info, err := e.cons.Info(t.Context())
		return err == nil && info.NumWaiting == 1
	}, "the pull request waiting on the server")
	if err := e.js.DeleteConsumer(t.Context(), e.stream, "c"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, jetstream.ErrConsumerDeleted) {
			t.Fatalf("waiting Fetch when its consumer is deleted: %v, want ErrConsumerDeleted", err)
		}
	case <-time.After(20 * time.Second): // hang guard
		t.Fatal("waiting Fetch did not end when its consumer was deleted")
	}
	_, err = p.Fetch(t.Context(), 1, 0, func(jetstream.Msg) {})
	if !errors.Is(err, nats.ErrNoResponders) && !errors.Is(err, jetstream.ErrConsumerDeleted) {
		t.Fatalf("Fetch from a deleted consumer: %v, want no responders or consumer deleted", err)
	}
}

// A request sent ahead (Send) is read later (Receive): at most one at a
// time, since JetStream can answer a later no-wait request's "no
// messages" before an earlier one's messages.
func TestSendThenReceive(t *testing.T) {
	e := setup(t, jetstream.ConsumerConfig{})
	e.publish(t, 10)
	p := e.puller(t) // maxBatch 16
	if n, err := p.Receive(t.Context(), func(jetstream.Msg) { t.Fatal("a message without a request") }); n != 0 || err != nil {
		t.Fatalf("Receive with no request = %d, %v, want 0, nil", n, err)
	}
	if err := p.Send(3, 0); err != nil {
		t.Fatal(err)
	}
	if err := p.Send(4, 0); !errors.Is(err, pull.ErrPending) {
		t.Fatalf("a second Send before Receive: %v, want ErrPending", err)
	}
	if p.Asked() != 3 {
		t.Fatalf("asked %d, want 3", p.Asked())
	}
	var data []string
	recv := func(m jetstream.Msg) {
		data = append(data, string(m.Data()))
		if err := m.DoubleAck(t.Context()); err != nil {
			t.Error(err)
		}
	}
	if n, err := p.Receive(t.Context(), recv); n != 3 || err != nil {
		t.Fatalf("Receive = %d, %v, want 3, nil", n, err)
	}
	if err := p.Send(40, 0); err != nil || p.Asked() != 16 {
		t.Fatalf("Send(40) = %v asking %d, want nil asking the maximum of 16", err, p.Asked())
	}
	if n, err := p.Receive(t.Context(), recv); n != 7 || err != nil {
		t.Fatalf("Receive = %d, %v, want the 7 left, nil", n, err)
	}
	if got := strings.Join(data, " "); got != "0 1 2 3 4 5 6 7 8 9" {
		t.Fatalf("received %q, want every message once, in order", got)
	}
	if p.Asked() != 0 {
		t.Fatalf("asked %d after Receive, want 0", p.Asked())
	}
}

// A Receive cut short by its context leaves no request awaiting; the next
// Send starts on a new inbox and what reached the old one is nakked, so
// every message is received again, none held for AckWait.
func TestReceiveCanceled(t *testing.T) {
	e := setup(t, jetstream.ConsumerConfig{})
	e.publish(t, 6)
	p := e.puller(t)
	if err := p.Send(3, 0); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := p.Receive(ctx, func(jetstream.Msg) {}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Receive on a canceled context: %v, want context.Canceled", err)
	}
	if p.Asked() != 0 {
		t.Fatalf("asked %d after the cut, want 0", p.Asked())
	}
	seen := map[string]bool{}
	natstest.Eventually(t, 20*time.Second, func() bool {
		_, err := p.Fetch(t.Context(), 6, 0, func(m jetstream.Msg) {
			seen[string(m.Data())] = true
			_ = m.DoubleAck(t.Context())
		})
		return err == nil && len(seen) == 6
	}, "every message received again (now %d)", natstest.Now(func() any { return len(seen) }))
}
