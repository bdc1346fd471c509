// Package pull sends pull requests to a JetStream pull consumer on one
// inbox subscription that lives as long as the [Puller], one request at a
// time: sent and read at once ([Puller.Fetch]), or sent ahead and read
// later ([Puller.Send], [Puller.Receive]).
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

// Puller pulls from one consumer. Its methods must not be called
// concurrently.
type Puller struct {
	nc      *nats.Conn
	subject string // the consumer's next-message API subject
	sub     *nats.Subscription
	ch      chan *nats.Msg // sub's messages; room for a request's answers
	max     int            // the largest batch a request asks for
	unread  func(jetstream.Msg)
	// stale: a request may still be open on the server (its Fetch ended
	// early), so the next Fetch starts on a new inbox.
	stale bool
	// sent is the request sent and not yet received, if any (see Send).
	sent *sent
}

// sent is a request awaiting its answers.
type sent struct {
	n       int
	expires time.Duration
	at      time.Time
}

// ErrPending is Send's error while a request sent earlier awaits Receive.
var ErrPending = errors.New("pull: a request awaits its answer")

// New returns a Puller for the consumer stream/consumer through js's
// connection and API prefix (a domain included). maxBatch (at least 1)
// bounds the batch a Fetch asks for, and so the inbox's buffer. unread
// receives each message that reached the inbox but was not returned by
// Fetch (a request cut short, [Puller.Close]), to nak it; nil naks it.
func New(js jetstream.JetStream, stream, consumer string, maxBatch int, unread func(jetstream.Msg)) (*Puller, error) {
	if unread == nil {
		unread = func(m jetstream.Msg) { _ = m.Nak() }
	}
	p := &Puller{nc: js.Conn(), subject: apiPrefix(js.Options()) + "CONSUMER.MSG.NEXT." + stream + "." + consumer, max: max(maxBatch, 1), unread: unread}
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
	// A channel subscription: nats.go's sync subscriptions take a
	// message with a "Status: 503" header and no payload for "no
	// responders" and drop it, even a stream message, and hold a
	// 64k-message buffer each. One request brings at most its batch
	// and one status answer; a new request starts on a new inbox once
	// an earlier one may still send (renew).
	ch := make(chan *nats.Msg, p.max+4)
	sub, err := p.nc.ChanSubscribe(p.nc.NewInbox(), ch)
	if err != nil {
		return err
	}
	p.sub, p.ch = sub, ch
	return nil
}

// request is the body of a pull request (ADR-13).
type request struct {
	Batch   int           `json:"batch"`
	Expires time.Duration `json:"expires,omitempty"`
	NoWait  bool          `json:"no_wait,omitempty"`
}

// Fetch asks for at most n messages (at most New's maxBatch), waiting at
// most expires for them (0: only those available now, no wait), and calls
// fn with each one in the consumer's order. It returns how many it delivered once the request is
// complete (n delivered, or the server answered that it expired or had no
// more), or ctx is done (ctx.Err(); the request may still be open on the
// server, so the next Fetch uses a new inbox), or the server's answer did
// not come within a second of expiry (the request is taken as lost, not an
// error). Other errors: publishing the request, or the server's refusal
// (the consumer deleted, a batch over MaxRequestBatch, ...), and
// [ErrPending] while a request sent earlier awaits [Puller.Receive].
func (p *Puller) Fetch(ctx context.Context, n int, expires time.Duration, fn func(jetstream.Msg)) (int, error) {
	if n <= 0 {
		return 0, nil
	}
	if err := p.Send(n, expires); err != nil {
		return 0, err
	}
	return p.Receive(ctx, fn)
}

// Send sends a pull request for at most n messages (at most New's
// maxBatch), waiting at most expires for them (0: no wait), without waiting
// for its answer: read it with [Puller.Receive]. It sends nothing when n is
// 0 or less. It returns [ErrPending] while a request sent earlier awaits
// Receive (one at a time: JetStream can answer a later no-wait request's
// "no messages" before an earlier request's messages, so answers cannot be
// told apart on one inbox), and an error if the request could not be
// published.
func (p *Puller) Send(n int, expires time.Duration) error {
	if p.sub == nil {
		return nats.ErrBadSubscription
	}
	if p.sent != nil {
		return ErrPending
	}
	if n = min(n, p.max); n <= 0 {
		return nil
	}
	if p.stale {
		if err := p.renew(); err != nil {
			return err
		}
	}
	body, err := json.Marshal(request{Batch: n, Expires: expires, NoWait: expires <= 0})
	if err != nil {
		return err
	}
	if err := p.nc.PublishRequest(p.subject, p.sub.Subject, body); err != nil {
		return err
	}
	p.sent = &sent{n: n, expires: max(expires, 0), at: time.Now()}
	return nil
}

// Asked returns how many messages the request sent and not yet received
// asked for (0 when none awaits Receive).
func (p *Puller) Asked() int {
	if p.sent == nil {
		return 0
	}
	return p.sent.n
}

// Receive reads the answer of the request sent and not yet received and
// calls fn with each of its messages in the consumer's order. It returns
// as Fetch does: how many, once the request is complete, or when ctx is
// done (the request may still be open on the server, so the next Send
// uses a new inbox, and what reached the old one unread goes to New's
// unread), or the answer is lost (a second past the request's expiry). It
// returns 0 and nil when no request awaits its answer.
func (p *Puller) Receive(ctx context.Context, fn func(jetstream.Msg)) (int, error) {
	if p.sent == nil {
		return 0, nil
	}
	r := *p.sent
	p.sent = nil
	if p.sub == nil {
		return 0, nats.ErrBadSubscription
	}
	wctx, cancel := context.WithDeadline(ctx, r.at.Add(r.expires+grace))
	defer cancel()
	got := 0
	for got < r.n {
		if ctx.Err() != nil { // before a message that may be ready too
			p.stale = true
			return got, ctx.Err()
		}
		var m *nats.Msg
		select {
		case m = <-p.ch:
		case <-wctx.Done():
			if ctx.Err() == nil {
				// An answer already here is read, not taken as lost: the
				// deadline runs from Send, and the caller may have been
				// slow to come back for it.
				select {
				case m = <-p.ch:
				default:
				}
			}
		}
		if m == nil {
			p.stale = true
			if ctx.Err() != nil {
				return got, ctx.Err()
			}
			// Lost: move to a new inbox now, so what still reaches
			// the old one is nakked rather than left unread.
			if err := p.renew(); err != nil {
				return got, err
			}
			return got, nil
		}
		user, done, err := status(m)
		if err != nil {
			return got, err
		}
		if done {
			break
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
	// Every message JetStream delivers carries its ack subject as the
	// reply; its status answers carry none. A stream message's own
	// headers (a "Status" among them) decide nothing.
	if m.Reply != "" || len(m.Data) > 0 || len(m.Header) == 0 {
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
// hands what the old one received unread to unread.
func (p *Puller) renew() error {
	p.unsubscribe()
	p.stale = false
	p.sent = nil
	return p.subscribe()
}

// unsubscribe removes the inbox's interest and hands the messages that
// reached it unread to unread (they are nakked by default, so the server
// redelivers them now rather than after AckWait); it returns how many.
// Connected, it returns once the server has seen the UNSUB (a flush) and
// everything it sent before was read; otherwise (reconnecting, closed) at
// once, after what was already buffered.
func (p *Puller) unsubscribe() int {
	sub, ch := p.sub, p.ch
	p.sub, p.ch = nil, nil
	n := 0
	hand := func(m *nats.Msg) {
		if user, _, _ := status(m); user {
			p.unread(msg{m})
			n++
		}
	}
	// Connected, Drain writes the UNSUB and removes the subscription after
	// a flush, so every message the server sent before it is in ch. While
	// reconnecting it would send no UNSUB and the reconnect would
	// subscribe the inbox again, never to unsubscribe it: unsubscribe at
	// once (the server lost the interest with the connection, or gets no
	// SUB for it).
	if p.nc.Status() == nats.CONNECTED && sub.Drain() == nil {
		tick := time.NewTicker(time.Millisecond)
		guard := time.NewTimer(30 * time.Second) // the flush's own timeout is 10 s
		for sub.IsValid() || sub.IsDraining() {
			select {
			case m := <-ch:
				hand(m)
				continue
			case <-tick.C:
				continue
			case <-guard.C:
			}
			break
		}
		tick.Stop()
		guard.Stop()
	}
	_ = sub.Unsubscribe() // if still there
	for {
		select {
		case m := <-ch:
			hand(m)
		default:
			return n
		}
	}
}

// Close unsubscribes the inbox and hands what it received unread to the
// Puller's unread function (see [New]); it returns how many, once the
// server has seen the UNSUB (a flush), so it sends this Puller nothing
// published after Close returns. Close is idempotent.
func (p *Puller) Close() int {
	if p.sub == nil {
		return 0
	}
	p.sent = nil
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

// DoubleAck acks m and waits for the server to confirm it, for at most
// wait (> 0): m.DoubleAck with ctx and a deadline wait away. When m came
// from a [Puller] and ctx can never be canceled (a [context.WithoutCancel]),
// it waits on nats.go's pooled timer instead of a new context, one
// allocation and timer less per ack; the error is then nats.ErrTimeout
// rather than [context.DeadlineExceeded] when wait passes.
func DoubleAck(ctx context.Context, m jetstream.Msg, wait time.Duration) error {
	if pm, ok := m.(msg); ok && ctx.Done() == nil {
		return pm.m.AckSync(nats.AckWait(wait))
	}
	actx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	return m.DoubleAck(actx)
}

// TermWithReason terminates the message with a reason the server puts in
// its advisory.
func (m msg) TermWithReason(reason string) error {
	if m.m.Reply == "" {
		return jetstream.ErrMsgNoReply
	}
	return m.m.Respond([]byte("+TERM " + reason))
}
