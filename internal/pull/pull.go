// Package pull sends pull requests to a JetStream pull consumer on one
// inbox subscription that lives as long as the [Puller], one request at a
// time.
//
// jetstream's Fetch subscribes a new inbox for every request and, when its
// context ends, closes its channel before it unsubscribes: a subscriber
// that stopped can still receive (and so hold for AckWait) a message
// published after it returned. A Puller unsubscribes before [Puller.Close]
// returns, and naks what reached its inbox unread; it also spares a
// subscription per request.
package pull

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// grace is how long after a request's expiry the Puller waits for the
// server's answer before it takes the request as lost (a reconnect, a
// restarted server) and starts over on a new inbox.
const grace = time.Second

// Puller pulls from one consumer. Fetch and Close must not be called
// concurrently.
type Puller struct {
	nc      *nats.Conn
	subject string // the consumer's next-message API subject
	sub     *nats.Subscription
	// stale: a request may still be open on the server (its Fetch ended
	// early), so the next Fetch starts on a new inbox.
	stale bool
}

// New returns a Puller for the consumer stream/consumer through js's
// connection and API prefix (a domain included).
func New(js jetstream.JetStream, stream, consumer string) (*Puller, error) {
	p := &Puller{nc: js.Conn(), subject: apiPrefix(js.Options()) + "CONSUMER.MSG.NEXT." + stream + "." + consumer}
	if err := p.subscribe(); err != nil {
		return nil, err
	}
	return p, nil
}

func apiPrefix(o jetstream.JetStreamOptions) string {
	switch {
	case o.APIPrefix != "":
		return strings.TrimSuffix(o.APIPrefix, ".") + "."
	case o.Domain != "":
		return "$JS." + o.Domain + ".API."
	}
	return jetstream.DefaultAPIPrefix
}

func (p *Puller) subscribe() error {
	sub, err := p.nc.SubscribeSync(p.nc.NewInbox())
	if err != nil {
		return err
	}
	// A request brings at most its batch; the client's default limits
	// (512k messages, 64 MiB) would drop messages beyond them.
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		_ = sub.Unsubscribe()
		return err
	}
	p.sub = sub
	return nil
}

// request is the body of a pull request (ADR-13).
type request struct {
	Batch   int           `json:"batch"`
	Expires time.Duration `json:"expires,omitempty"`
	NoWait  bool          `json:"no_wait,omitempty"`
}

// Fetch asks for at most n messages, waiting at most expires for them (0:
// only those available now, no wait), and calls fn with each one in the
// consumer's order. It returns how many it delivered once the request is
// complete (n delivered, or the server answered that it expired or had no
// more), or ctx is done (ctx.Err(); the request may still be open on the
// server, so the next Fetch uses a new inbox), or the server's answer did
// not come within a second of expiry (the request is taken as lost, not an
// error). Other errors: publishing the request, or the server's refusal
// (the consumer deleted, a batch over MaxRequestBatch, ...).
func (p *Puller) Fetch(ctx context.Context, n int, expires time.Duration, fn func(jetstream.Msg)) (int, error) {
	if p.sub == nil {
		return 0, nats.ErrBadSubscription
	}
	if p.stale {
		if err := p.renew(); err != nil {
			return 0, err
		}
	}
	body, err := json.Marshal(request{Batch: n, Expires: expires, NoWait: expires <= 0})
	if err != nil {
		return 0, err
	}
	if err := p.nc.PublishRequest(p.subject, p.sub.Subject, body); err != nil {
		return 0, err
	}
	wctx, cancel := context.WithTimeout(ctx, max(expires, 0)+grace)
	defer cancel()
	got := 0
	for got < n {
		m, err := p.sub.NextMsgWithContext(wctx)
		if err != nil {
			p.stale = true
			if ctx.Err() != nil {
				return got, ctx.Err()
			}
			if errors.Is(err, context.DeadlineExceeded) {
				return got, nil // lost: the next request starts afresh
			}
			return got, err
		}
		user, done, err := status(m)
		if err != nil {
			return got, err
		}
		if done {
			return got, nil
		}
		if !user {
			continue // a heartbeat or flow control
		}
		got++
		fn(msg{m})
	}
	return got, nil
}

// status tells a stream message (user) from a status message: done for
// the end of the request (404 no messages, 408 expired), err for a
// refusal, wrapping jetstream's error for it where it has one (the
// consumer deleted, no consumer to answer, ...), as its Fetch does.
func status(m *nats.Msg) (user, done bool, err error) {
	if len(m.Data) > 0 || len(m.Header) == 0 {
		return true, false, nil
	}
	code := m.Header.Get("Status")
	switch code {
	case "":
		return true, false, nil
	case "404", "408":
		return false, true, nil
	case "100":
		return false, false, nil
	}
	descr := m.Header.Get("Description")
	var known error
	switch d := strings.ToLower(descr); {
	case code == "503":
		known = nats.ErrNoResponders
	case code == "400":
		known = jetstream.ErrBadRequest
	case strings.Contains(d, "consumer deleted"):
		known = jetstream.ErrConsumerDeleted
	case strings.Contains(d, "leadership change"):
		known = jetstream.ErrConsumerLeadershipChanged
	case strings.Contains(d, "server shutdown"):
		known = jetstream.ErrServerShutdown
	}
	if known != nil {
		return false, true, fmt.Errorf("jetstream pull request: status %s %s: %w", code, descr, known)
	}
	return false, true, fmt.Errorf("jetstream pull request: status %s %s", code, descr)
}

// renew moves to a new inbox after a request that may still be open, and
// naks what the old one received unread.
func (p *Puller) renew() error {
	p.unsubscribe()
	p.stale = false
	return p.subscribe()
}

// unsubscribe removes the inbox's interest and naks the messages that
// reached it unread, so the server redelivers them now rather than after
// AckWait; it returns how many it nakked. It returns once the server has
// seen the UNSUB (a flush) and everything it sent before was read, or the
// connection closed.
func (p *Puller) unsubscribe() int {
	sub := p.sub
	p.sub = nil
	if err := sub.Drain(); err != nil {
		_ = sub.Unsubscribe()
		return 0
	}
	n := 0
	for sub.IsValid() || sub.IsDraining() {
		m, err := sub.NextMsg(100 * time.Millisecond)
		if errors.Is(err, nats.ErrTimeout) {
			continue
		}
		if err != nil {
			break
		}
		if user, _, _ := status(m); user {
			_ = m.Nak()
			n++
		}
	}
	return n
}

// Close unsubscribes the inbox and naks what it received unread; it
// returns how many it nakked, once the server has seen the UNSUB (a
// flush), so it sends this Puller nothing published after Close returns.
// Close is idempotent.
func (p *Puller) Close() int {
	if p.sub == nil {
		return 0
	}
	return p.unsubscribe()
}

// msg is a fetched message as a [jetstream.Msg].
type msg struct{ m *nats.Msg }

func (m msg) Metadata() (*jetstream.MsgMetadata, error) {
	md, err := m.m.Metadata()
	if err != nil {
		return nil, err
	}
	return &jetstream.MsgMetadata{
		Sequence:     jetstream.SequencePair{Consumer: md.Sequence.Consumer, Stream: md.Sequence.Stream},
		NumDelivered: md.NumDelivered,
		NumPending:   md.NumPending,
		Timestamp:    md.Timestamp,
		Stream:       md.Stream,
		Consumer:     md.Consumer,
		Domain:       md.Domain,
	}, nil
}

func (m msg) Data() []byte         { return m.m.Data }
func (m msg) Headers() nats.Header { return m.m.Header }
func (m msg) Subject() string      { return m.m.Subject }
func (m msg) Reply() string        { return m.m.Reply }
func (m msg) Ack() error           { return m.m.Ack() }
func (m msg) Nak() error           { return m.m.Nak() }
func (m msg) InProgress() error    { return m.m.InProgress() }
func (m msg) Term() error          { return m.m.Term() }
func (m msg) NakWithDelay(d time.Duration) error {
	return m.m.NakWithDelay(d)
}

func (m msg) DoubleAck(ctx context.Context) error {
	return m.m.AckSync(nats.Context(ctx))
}

// TermWithReason terminates the message with a reason the server puts in
// its advisory.
func (m msg) TermWithReason(reason string) error {
	if m.m.Reply == "" {
		return jetstream.ErrMsgNoReply
	}
	return m.m.Respond([]byte("+TERM " + reason))
}
