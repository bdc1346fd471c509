package jsq

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// ackConfirmTimeout is how long an ack's confirmation is awaited before
// the ack counts as lost (logged; the server redelivers after AckWait).
const ackConfirmTimeout = 5 * time.Second

// acks sends a subscription's acks with a reply subject and awaits the
// server's confirmations on one subscription: the effect of DoubleAck
// without a goroutine, a context and a request per message.
type acks struct {
	nc     *nats.Conn
	sub    *nats.Subscription
	prefix string // reply subjects are prefix + token
	logger watermill.LoggerAdapter

	mu      sync.Mutex
	next    uint64
	pending map[uint64]sentAck
	emptied chan struct{} // cap 1: pending became empty
}

// sentAck is an ack awaiting its confirmation.
type sentAck struct {
	deadline time.Time
	subject  string // the message's, for the log
	uuid     string
}

func newAcks(nc *nats.Conn, logger watermill.LoggerAdapter) (*acks, error) {
	inbox := nc.NewInbox()
	a := &acks{
		nc: nc, prefix: inbox + ".", logger: logger,
		pending: map[uint64]sentAck{},
		emptied: make(chan struct{}, 1),
	}
	sub, err := nc.Subscribe(inbox+".*", a.confirmed)
	if err != nil {
		return nil, fmt.Errorf("jsq: subscribe to ack confirmations: %w", err)
	}
	a.sub = sub
	return a, nil
}

// send acks jm; its confirmation arrives in confirmed. An ack not sent is
// logged: the server redelivers the message after AckWait.
func (a *acks) send(jm jetstream.Msg, uuid string) {
	reply := jm.Reply()
	if reply == "" {
		a.logger.Error("jsq: ack not sent; the server will redeliver", jetstream.ErrMsgNoReply, watermill.LogFields{"message_uuid": uuid, "subject": jm.Subject()})
		return
	}
	a.mu.Lock()
	a.next++
	token := a.next
	a.pending[token] = sentAck{deadline: time.Now().Add(ackConfirmTimeout), subject: jm.Subject(), uuid: uuid}
	a.mu.Unlock()
	if err := a.nc.PublishRequest(reply, a.prefix+strconv.FormatUint(token, 36), ackBody); err != nil {
		a.mu.Lock()
		delete(a.pending, token)
		a.signalIfEmpty()
		a.mu.Unlock()
		a.logger.Error("jsq: ack not sent; the server will redeliver", err, watermill.LogFields{"message_uuid": uuid, "subject": jm.Subject()})
	}
}

var ackBody = []byte("+ACK")

// confirmed receives the server's reply to an ack: empty when the ack was
// applied, a 503 status when nothing took it (consumer gone).
func (a *acks) confirmed(m *nats.Msg) {
	token, err := strconv.ParseUint(strings.TrimPrefix(m.Subject, a.prefix), 36, 64)
	if err != nil {
		return
	}
	a.mu.Lock()
	sent, ok := a.pending[token]
	delete(a.pending, token)
	a.signalIfEmpty()
	a.mu.Unlock()
	if ok && m.Header.Get("Status") != "" {
		a.logger.Error("jsq: ack not confirmed; the server will redeliver", fmt.Errorf("status %s %s", m.Header.Get("Status"), m.Header.Get("Description")),
			watermill.LogFields{"message_uuid": sent.uuid, "subject": sent.subject})
	}
}

// signalIfEmpty requires a.mu held.
func (a *acks) signalIfEmpty() {
	if len(a.pending) == 0 {
		signal(a.emptied)
	}
}

// expire gives up on the acks whose confirmation is overdue at now and
// returns the latest deadline of those still pending (zero when none).
func (a *acks) expire(now time.Time) (latest time.Time) {
	var lost []sentAck
	a.mu.Lock()
	for token, sent := range a.pending {
		if !now.Before(sent.deadline) {
			lost = append(lost, sent)
			delete(a.pending, token)
		} else if sent.deadline.After(latest) {
			latest = sent.deadline
		}
	}
	a.mu.Unlock()
	for _, sent := range lost {
		a.logger.Error("jsq: ack not confirmed; the server will redeliver", nats.ErrTimeout, watermill.LogFields{"message_uuid": sent.uuid, "subject": sent.subject})
	}
	return latest
}

// wait returns once every ack sent is confirmed or overdue (no more are
// sent), and ends the subscription.
func (a *acks) wait() {
	for {
		latest := a.expire(time.Now())
		if latest.IsZero() {
			break
		}
		t := time.NewTimer(time.Until(latest))
		select {
		case <-a.emptied:
		case <-t.C:
		}
		t.Stop()
	}
	_ = a.sub.Unsubscribe()
}
