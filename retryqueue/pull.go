package retryqueue

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// puller sends the no-wait pull requests of a [PartnerDrainer]'s partners
// as raw CONSUMER.MSG.NEXT requests, all answered on one wildcard inbox
// subscription (<inbox>.*) held while Run runs, each fetch under its own
// reply token. jetstream's Fetch subscribes a new inbox per fetch, and
// each subscription costs the server a scan of its subject cache: at a
// thousand turns a second that was a visible share of the drain's CPU.
// Safe for concurrent use.
type puller struct {
	nc      *nats.Conn
	api     string // the JetStream API prefix, ending in "."
	timeout time.Duration
	inbox   string // the subscription's prefix, ending in "."

	mu    sync.Mutex
	sub   *nats.Subscription
	next  uint64
	waits map[string]chan *nats.Msg // by reply token, and by "<stream> <consumer>"
}

// newPuller subscribes the inbox of a puller on js's connection.
func newPuller(js jetstream.JetStream) (*puller, error) {
	o := js.Options()
	api := jetstream.DefaultAPIPrefix
	switch {
	case o.Domain != "":
		api = "$JS." + o.Domain + ".API."
	case o.APIPrefix != "":
		api = strings.TrimSuffix(o.APIPrefix, ".") + "."
	}
	p := &puller{nc: js.Conn(), api: api, timeout: o.DefaultTimeout, inbox: js.Conn().NewInbox() + ".", waits: map[string]chan *nats.Msg{}}
	sub, err := p.nc.Subscribe(p.inbox+"*", p.deliver)
	if err != nil {
		return nil, err
	}
	// Pulls are bounded by the shared in-flight bound; never drop one.
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		_ = sub.Unsubscribe()
		return nil, err
	}
	p.sub = sub
	return p, nil
}

// close unsubscribes the inbox; fetches after it fail.
func (p *puller) close() { _ = p.sub.Unsubscribe() }

// deliver routes a reply to its fetch: a status by the reply token it was
// sent to, a stream message (which arrives under its own subject) by the
// consumer its ack subject names; a partner's drainer has one fetch at a
// time on its consumer. A message with no fetch to take it (its fetch
// gave up after its second, or brought its batch) is nakked, so it is
// delivered again at once rather than after AckWait.
func (p *puller) deliver(m *nats.Msg) {
	var key string
	if isStatus(m) {
		key = strings.TrimPrefix(m.Subject, p.inbox)
	} else if md, err := m.Metadata(); err == nil {
		key = md.Stream + " " + md.Consumer
	}
	p.mu.Lock()
	if ch := p.waits[key]; ch != nil {
		select {
		case ch <- m:
			p.mu.Unlock()
			return
		default:
		}
	}
	p.mu.Unlock()
	if m.Reply != "" && !isStatus(m) {
		_ = m.Respond([]byte("-NAK"))
	}
}

// isStatus reports whether m is a status message of the pull (404 no
// messages, 408 request timeout, 409 conflict, 503 no responders, 100
// heartbeat), not a stream message.
func isStatus(m *nats.Msg) bool {
	return len(m.Data) == 0 && m.Reply == "" && m.Header.Get("Status") != ""
}

// fetchNoWait pulls up to n messages from consumer on stream that are
// available now, as [jetstream.Consumer.FetchNoWait] does: it returns once
// the server has sent n, or its status ending the request, or after a
// second without either (then with what came, and no error). It returns
// [nats.ErrNoResponders] or [jetstream.ErrConsumerDeleted] when the
// consumer does not exist, with the messages that came before.
func (p *puller) fetchNoWait(stream, consumer string, n int) ([]jetstream.Msg, error) {
	ch := make(chan *nats.Msg, n+1)
	p.mu.Lock()
	p.next++
	tok := strconv.FormatUint(p.next, 36)
	cons := stream + " " + consumer
	p.waits[tok], p.waits[cons] = ch, ch
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.waits, tok)
		if p.waits[cons] == ch {
			delete(p.waits, cons)
		}
		p.mu.Unlock()
		// Nothing is sent to ch now; what it holds beyond the batch goes
		// back to the consumer.
		for len(ch) > 0 {
			if m := <-ch; m.Reply != "" && !isStatus(m) {
				_ = m.Respond([]byte("-NAK"))
			}
		}
	}()
	req := []byte(`{"batch":` + strconv.Itoa(n) + `,"no_wait":true}`)
	if err := p.nc.PublishRequest(p.api+"CONSUMER.MSG.NEXT."+stream+"."+consumer, p.inbox+tok, req); err != nil {
		return nil, err
	}
	t := time.NewTimer(time.Second)
	defer t.Stop()
	var msgs []jetstream.Msg
	for len(msgs) < n {
		select {
		case m := <-ch:
			if !isStatus(m) {
				msgs = append(msgs, &pulledMsg{m: m, p: p})
				continue
			}
			switch code := m.Header.Get("Status"); code {
			case "100":
				continue
			case "404", "408":
				return msgs, nil
			case "503":
				return msgs, nats.ErrNoResponders
			default:
				d := m.Header.Get("Description")
				if strings.Contains(strings.ToLower(d), "consumer deleted") {
					return msgs, jetstream.ErrConsumerDeleted
				}
				return msgs, fmt.Errorf("retryqueue: pull from consumer %q: %s %s", consumer, code, d)
			}
		case <-t.C:
			return msgs, nil
		}
	}
	return msgs, nil
}

// pulledMsg is a [jetstream.Msg] fetched by a [puller]; its acks go to its
// reply subject as jetstream's do.
type pulledMsg struct {
	m *nats.Msg
	p *puller

	mu   sync.Mutex
	done bool // acked, nakked or terminated
}

func (m *pulledMsg) Metadata() (*jetstream.MsgMetadata, error) {
	md, err := m.m.Metadata()
	if err != nil {
		return nil, err
	}
	out := &jetstream.MsgMetadata{
		NumDelivered: md.NumDelivered,
		NumPending:   md.NumPending,
		Timestamp:    md.Timestamp,
		Stream:       md.Stream,
		Consumer:     md.Consumer,
		Domain:       md.Domain,
	}
	out.Sequence.Stream, out.Sequence.Consumer = md.Sequence.Stream, md.Sequence.Consumer
	return out, nil
}

func (m *pulledMsg) Data() []byte         { return m.m.Data }
func (m *pulledMsg) Headers() nats.Header { return m.m.Header }
func (m *pulledMsg) Subject() string      { return m.m.Subject }
func (m *pulledMsg) Reply() string        { return m.m.Reply }
func (m *pulledMsg) Ack() error           { return m.reply(nil, "+ACK", true) }
func (m *pulledMsg) Nak() error           { return m.reply(nil, "-NAK", true) }
func (m *pulledMsg) InProgress() error    { return m.reply(nil, "+WPI", false) }
func (m *pulledMsg) Term() error          { return m.reply(nil, "+TERM", true) }

func (m *pulledMsg) DoubleAck(ctx context.Context) error { return m.reply(ctx, "+ACK", true) }

func (m *pulledMsg) NakWithDelay(delay time.Duration) error {
	if delay <= 0 {
		return m.Nak()
	}
	return m.reply(nil, fmt.Sprintf(`-NAK {"delay": %d}`, delay.Nanoseconds()), true)
}

func (m *pulledMsg) TermWithReason(reason string) error {
	return m.reply(nil, "+TERM "+reason, true)
}

// reply sends body to the message's reply subject: a request waiting for
// the server's confirmation when ctx is not nil (with the JetStream
// context's default timeout if ctx has no deadline), else a publish. A
// final one (all but +WPI) is sent once: again, it returns
// [jetstream.ErrMsgAlreadyAckd].
func (m *pulledMsg) reply(ctx context.Context, body string, final bool) error {
	if m.m.Reply == "" {
		return jetstream.ErrMsgNoReply
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.done {
		return jetstream.ErrMsgAlreadyAckd
	}
	var err error
	if ctx != nil {
		if _, ok := ctx.Deadline(); !ok && m.p.timeout > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, m.p.timeout)
			defer cancel()
		}
		_, err = m.p.nc.RequestWithContext(ctx, m.m.Reply, []byte(body))
	} else {
		err = m.p.nc.Publish(m.m.Reply, []byte(body))
	}
	if err == nil && final {
		m.done = true
	}
	return err
}
