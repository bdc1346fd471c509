package jsq

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/floodgate-go/floodgate/internal/pull"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// ErrSubscriberClosed is returned by [Subscriber.Subscribe] after
// [Subscriber.Close].
var ErrSubscriberClosed = errors.New("jsq: subscriber closed")

// SubscriberConfig configures [NewSubscriber].
type SubscriberConfig struct {
	// URL is the NATS server. The subscriber opens its own connection and
	// closes it in Close, after its acks are sent.
	// Required unless Conn or JetStream is set; ignored when one is.
	URL string
	// ConnectOptions are used when connecting to URL, after this package's
	// defaults (reconnect forever, 100 ms between attempts).
	// Optional.
	ConnectOptions []nats.Option
	// Conn is an existing connection to subscribe on instead of URL, so an
	// application needs one connection for its publishers and subscribers.
	// Close does not close it (it flushes the naks it sent). The
	// connection's own options apply: give it reconnection (as [Connect]
	// does), or a server restart ends the subscriptions' fetches for good.
	// Optional.
	Conn *nats.Conn
	// JetStream is an existing JetStream context to subscribe with (its
	// API prefix or domain, say), on its connection (JetStream.Conn()),
	// which Close does not close. With Conn set too, both must be the same
	// connection.
	// Optional.
	JetStream jetstream.JetStream
	// ConsumerName names the durable consumer for a topic. It must return a
	// valid consumer name (no '.', '*', '>', whitespace).
	// Optional. Default [DefaultConsumerName].
	ConsumerName func(topic string) string
	// AckWait is how long the server waits for the ack of a delivered
	// message before redelivering it, and how long the subscriber waits for
	// the handler's ack or nack before giving up on the message (sending
	// nothing and cancelling its context with cause [ErrAckWait]): the
	// handler gets between 9/10 of it and all of it (package doc). Handler
	// deadlines must be well below it.
	// Optional. Default 30s. Valid range >= 1s.
	AckWait time.Duration
	// MaxAckPending bounds the messages delivered and not yet acked on the
	// consumer, across all subscribers of it; -1 means unlimited.
	// Optional. Default 1000 (the server's default). Valid range -1 or >= 1.
	MaxAckPending int
	// MaxDeliver is the consumer's MaxDeliver: how often the server
	// delivers a message at most; -1 means unlimited. After a nack or an
	// AckWait expiry on the last delivery the server drops the message from
	// the consumer without a trace in any stream, so a finite value needs
	// AllowFiniteMaxDeliver, and then floodgate's middleware dead-letters a
	// message it cannot otherwise settle on its last delivery (package doc).
	// Optional. Default -1. Valid range -1, or >= 1 with
	// AllowFiniteMaxDeliver.
	MaxDeliver int
	// AllowFiniteMaxDeliver accepts a finite MaxDeliver. Set it only with
	// floodgate's middleware in the handler chain, or a handler that itself
	// dead-letters a message it fails on its last delivery ([Delivery]).
	// Optional. Default false.
	AllowFiniteMaxDeliver bool
	// Concurrency is the number of messages in handlers at once: the
	// subscriber hands a message to the router only while fewer than
	// Concurrency of its messages await their outcome.
	// Optional. Default 1. Valid range 1..1024.
	Concurrency int
	// Prefetch is how many messages, beyond those in handlers, the
	// subscriber may hold delivered and waiting for a free handler, so the
	// server is asked for messages in batches rather than one at a time. A
	// waiting message gets an in-progress ack (msg.InProgress) every
	// AckWait/5, so none is redelivered while it waits (package doc).
	// Optional. Default max(4×Concurrency, 32), or none with a finite
	// MaxDeliver (a waiting message nakked on Close on its last delivery
	// would be dropped); a negative value means none (one pull per
	// message). Valid range < 0, or 1..4096 with an unlimited MaxDeliver.
	// A pull request never asks for more than an existing consumer's
	// MaxRequestBatch, when an operator set one.
	Prefetch int
	// NakDelay gives the redelivery delay after a nack of a message on its
	// deliveries-th delivery (1 for the first).
	// Optional. Default [ExponentialDelay]{}.WaitTime (500ms doubling to 30s).
	NakDelay func(deliveries uint64) time.Duration
	// CloseGrace is how long a message already handed to the handler may
	// still be acked or nacked after the subscription's context is done or
	// Close is called. Within it the handler runs on undisturbed and its ack
	// is sent; after it the subscriber gives up (no ack: the server
	// redelivers after AckWait) and cancels the message's context.
	// Optional. Default 2s; a negative value means none. Valid range < AckWait.
	CloseGrace time.Duration
	// FetchWait is how long one pull request waits for messages before the
	// subscriber asks again; values below 1s count as 1s.
	// Optional. Default 5s. Valid range 100ms..AckWait.
	FetchWait time.Duration
	// Logger receives errors of fetches, acks and naks.
	// Optional. Default watermill.NopLogger.
	Logger watermill.LoggerAdapter
}

func (c *SubscriberConfig) setDefaults() {
	if c.ConsumerName == nil {
		c.ConsumerName = DefaultConsumerName
	}
	if c.AckWait == 0 {
		c.AckWait = 30 * time.Second
	}
	if c.MaxAckPending == 0 {
		c.MaxAckPending = 1000
	}
	if c.MaxDeliver == 0 {
		c.MaxDeliver = -1
	}
	if c.Concurrency == 0 {
		c.Concurrency = 1
	}
	switch {
	case c.Prefetch == 0 && c.MaxDeliver > 0:
		c.Prefetch = -1
	case c.Prefetch == 0:
		c.Prefetch = max(4*c.Concurrency, 32)
	case c.Prefetch < 0:
		c.Prefetch = -1
	}
	if c.NakDelay == nil {
		c.NakDelay = ExponentialDelay{}.WaitTime
	}
	switch {
	case c.CloseGrace == 0:
		c.CloseGrace = min(2*time.Second, c.AckWait/2)
	case c.CloseGrace < 0:
		c.CloseGrace = 0
	}
	if c.FetchWait == 0 {
		c.FetchWait = min(5*time.Second, c.AckWait)
	}
	if c.Logger == nil {
		c.Logger = watermill.NopLogger{}
	}
}

// Validate reports whether c, with defaults applied to its zero fields, is
// valid: the check [NewSubscriber] makes. It does not modify c. The error
// wraps [ErrInvalidConfig] and names the field and its allowed range.
func (c SubscriberConfig) Validate() error {
	c.setDefaults()
	return c.validate()
}

// validate requires defaults set.
func (c *SubscriberConfig) validate() error {
	if err := validateConn(c.URL, c.Conn, c.JetStream); err != nil {
		return err
	}
	switch {
	case c.AckWait < time.Second:
		return fmt.Errorf("%w: AckWait must be >= 1s, got %s", ErrInvalidConfig, c.AckWait)
	case c.MaxAckPending < -1:
		return fmt.Errorf("%w: MaxAckPending must be -1 or >= 1, got %d", ErrInvalidConfig, c.MaxAckPending)
	case c.MaxDeliver < -1:
		return fmt.Errorf("%w: MaxDeliver must be -1, or >= 1 with AllowFiniteMaxDeliver, got %d", ErrInvalidConfig, c.MaxDeliver)
	case c.MaxDeliver > 0 && !c.AllowFiniteMaxDeliver:
		return fmt.Errorf("%w: MaxDeliver %d is finite: the server would drop a message after its last delivery; set AllowFiniteMaxDeliver to accept it, or MaxDeliver -1 (unlimited)", ErrInvalidConfig, c.MaxDeliver)
	case c.Concurrency < 1 || c.Concurrency > 1024:
		return fmt.Errorf("%w: Concurrency must be in 1..1024, got %d", ErrInvalidConfig, c.Concurrency)
	case c.Prefetch > 0 && c.MaxDeliver > 0:
		return fmt.Errorf("%w: Prefetch %d with a finite MaxDeliver %d: a prefetched message on its last delivery, nakked on Close or expired while waiting, would be dropped; leave Prefetch unset (none with a finite MaxDeliver) or negative", ErrInvalidConfig, c.Prefetch, c.MaxDeliver)
	case c.Prefetch > 4096:
		return fmt.Errorf("%w: Prefetch must be in 1..4096, or negative for none, got %d", ErrInvalidConfig, c.Prefetch)
	case c.CloseGrace >= c.AckWait:
		return fmt.Errorf("%w: CloseGrace must be < AckWait (%s), got %s", ErrInvalidConfig, c.AckWait, c.CloseGrace)
	case c.FetchWait < 100*time.Millisecond || c.FetchWait > c.AckWait:
		return fmt.Errorf("%w: FetchWait must be in 100ms..AckWait (%s), got %s", ErrInvalidConfig, c.AckWait, c.FetchWait)
	}
	return nil
}

// DefaultConsumerName is the default durable consumer name for a topic:
// "floodgate__" + [StreamName](topic).
func DefaultConsumerName(topic string) string { return "floodgate__" + StreamName(topic) }

// consumerConfig requires defaults set.
func (c SubscriberConfig) consumerConfig(topic string) jetstream.ConsumerConfig {
	name := c.ConsumerName(topic)
	return jetstream.ConsumerConfig{
		Name:          name,
		Durable:       name,
		AckPolicy:     jetstream.AckExplicitPolicy,
		DeliverPolicy: jetstream.DeliverAllPolicy,
		AckWait:       c.AckWait,
		MaxDeliver:    c.MaxDeliver,
		MaxAckPending: c.MaxAckPending,
	}
}

// ConsumerConfig returns the durable consumer [Subscriber.Subscribe] creates
// for topic, or requires of an existing one ([CheckConsumer]): a pull
// consumer with explicit ack, deliver all, and the configured AckWait,
// MaxAckPending and MaxDeliver (default unlimited: a nacked or expired
// message is redelivered forever; giving up is floodgate's dead-letter
// decision, not the broker's).
func (c SubscriberConfig) ConsumerConfig(topic string) jetstream.ConsumerConfig {
	c.setDefaults()
	return c.consumerConfig(topic)
}

// Subscriber is a Watermill subscriber on JetStream for at-least-once
// delivery, as the package doc describes. Subscribe creates the topic's
// stream (file storage) and durable consumer if missing, and refuses
// existing ones that differ in a field it sets; it never updates them, and
// Close never deletes them. It is safe for concurrent use.
type Subscriber struct {
	cfg     SubscriberConfig
	nc      *nats.Conn
	ownConn bool // nc was opened by NewSubscriber and is closed by Close
	js      jetstream.JetStream

	mu      sync.Mutex
	closed  bool
	closing chan struct{}
	loops   sync.WaitGroup
}

// NewSubscriber returns a [Subscriber] on [SubscriberConfig.JetStream],
// [SubscriberConfig.Conn], or a connection of its own to
// [SubscriberConfig.URL], in that order. It returns an error wrapping
// "invalid config" and [ErrInvalidConfig], or the connection error.
func NewSubscriber(cfg SubscriberConfig) (*Subscriber, error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("invalid config: %w", err)
	}
	s := &Subscriber{cfg: cfg, closing: make(chan struct{})}
	var err error
	if s.nc, s.js, s.ownConn, err = openConn(cfg.URL, cfg.ConnectOptions, cfg.Conn, cfg.JetStream); err != nil {
		return nil, err
	}
	return s, nil
}

// Subscribe creates the topic's stream ([EnsureStream]) and durable
// consumer ([EnsureConsumer] with [SubscriberConfig.ConsumerConfig]) if
// missing (an existing one may deliver by start sequence instead of all:
// one [TakeOver] created) and starts pulling from it ([SubscriberConfig.Concurrency],
// [SubscriberConfig.Prefetch]). The returned channel is closed once ctx is
// done or the subscriber closed, and everything finished (acks of handled
// messages sent, waiting ones nakked). It returns an error wrapping [ErrInvalidTopic], [ErrSubscriberClosed], a
// [*ConfigMismatchError] (an existing stream or consumer differs; it is left
// unchanged), or the stream or consumer error.
func (s *Subscriber) Subscribe(ctx context.Context, topic string) (<-chan *message.Message, error) {
	if err := ValidateTopic(topic); err != nil {
		return nil, err
	}
	if _, err := EnsureStream(ctx, s.js, topic); err != nil {
		return nil, err
	}
	cc := s.cfg.consumerConfig(topic)
	cons, err := ensureConsumer(ctx, s.js, StreamName(topic), cc, checkSubscriberConsumer)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrSubscriberClosed
	}
	// stop is done when ctx is done or the subscriber closes; base is
	// what message contexts derive from: stop's values, not its end.
	stop, cancel := context.WithCancel(ctx)
	base := context.WithoutCancel(stop)
	var f *flow // set before the puller's first fetch
	p, err := pull.New(s.js, StreamName(topic), cc.Durable, s.cfg.Concurrency+max(s.cfg.Prefetch, 0), func(jm jetstream.Msg) { f.nakUnhandled(jm, f.d) })
	if err != nil {
		cancel()
		return nil, err
	}
	a, err := newAcks(s.nc, s.cfg.Logger)
	if err != nil {
		p.Close()
		cancel()
		return nil, err
	}
	out := make(chan *message.Message)
	f = newFlow(s, stop, base, cons, p, Delivery{Stream: StreamName(topic), Consumer: cc.Durable, Count: 1, MaxDeliver: cc.MaxDeliver}, out, a)
	if hook := onNewFlow.Load(); hook != nil {
		(*hook)(f)
	}
	f.start()
	s.loops.Add(1)
	go func() {
		select {
		case <-stop.Done():
		case <-s.closing:
			cancel()
		}
		f.wait()
		cancel()
		close(out) // nothing sends any more
		s.loops.Done()
	}()
	return out, nil
}

// handle hands one message to the router and settles it: ack after Ack
// (its confirmation awaited in the background by f.acks), delayed
// nak after Nack, nothing on AckWait or close (see package doc). deadline
// is when the server's AckWait for the message runs out.
func (f *flow) handle(jm jetstream.Msg, deadline time.Time) {
	s, d := f.s, f.d
	wm := Unmarshal(jm)
	if md, err := jm.Metadata(); err == nil {
		d.Count, d.StreamSeq = md.NumDelivered, md.Sequence.Stream
	}
	// The message context survives stop for CloseGrace, so a handler that
	// is nearly done can finish and be acked.
	mctx, cancel := context.WithCancelCause(WithDelivery(f.base, d))
	defer cancel(nil)
	wm.SetContext(mctx)

	select {
	case f.out <- wm:
	case <-f.stop.Done():
		f.nakUnhandled(jm, d)
		return
	}

	ackWait := time.NewTimer(time.Until(deadline))
	defer ackWait.Stop()
	var grace <-chan time.Time
	stopped := f.stop.Done()
	for {
		select {
		case <-wm.Acked():
			f.acks.send(jm, wm.UUID)
			return
		case <-wm.Nacked():
			if d.Last() {
				s.cfg.Logger.Error("jsq: nacked on the last delivery (MaxDeliver); the server will not redeliver it", nil, logFields(wm, jm, d))
			}
			if err := jm.NakWithDelay(s.cfg.NakDelay(d.Count)); err != nil {
				s.cfg.Logger.Error("jsq: nak not sent; the server will redeliver after AckWait", err, logFields(wm, jm, d))
			}
			return
		case <-ackWait.C:
			if d.Last() {
				s.cfg.Logger.Error("jsq: handler exceeded AckWait on the last delivery (MaxDeliver); giving up, the server will not redeliver it", nil, logFields(wm, jm, d))
			} else {
				s.cfg.Logger.Info("jsq: handler exceeded AckWait; giving up, the server will redeliver", logFields(wm, jm, d))
			}
			cancel(ErrAckWait)
			return
		case <-stopped:
			stopped = nil
			t := time.NewTimer(s.cfg.CloseGrace)
			defer t.Stop()
			grace = t.C
		case <-grace:
			if d.Last() {
				s.cfg.Logger.Error("jsq: closing on the last delivery (MaxDeliver); the server will not redeliver it", nil, logFields(wm, jm, d))
			}
			cancel(ErrClosing)
			return // closing: not acked, redelivered after AckWait
		}
	}
}

// nakUnhandled gives back a message never handed to the handler, with no
// delay, so the next subscriber gets it at once rather than after AckWait.
func (f *flow) nakUnhandled(jm jetstream.Msg, d Delivery) {
	if md, err := jm.Metadata(); err == nil {
		d.Count, d.StreamSeq = md.NumDelivered, md.Sequence.Stream
	}
	if d.Last() {
		f.s.cfg.Logger.Error("jsq: closing with an unhandled message on its last delivery (MaxDeliver); the server will not redeliver it", nil,
			watermill.LogFields{"subject": jm.Subject(), "stream": d.Stream, "stream_seq": d.StreamSeq, "deliveries": d.Count})
	}
	if err := jm.Nak(); err != nil {
		f.s.cfg.Logger.Error("jsq: nak of an unhandled message not sent; the server will redeliver after AckWait", err, watermill.LogFields{"subject": jm.Subject()})
	}
}

// logFields describes a message for a log line; built only when one is
// written.
func logFields(wm *message.Message, jm jetstream.Msg, d Delivery) watermill.LogFields {
	fields := watermill.LogFields{"message_uuid": wm.UUID, "subject": jm.Subject()}
	if d.Last() {
		fields["stream"], fields["stream_seq"], fields["deliveries"] = d.Stream, d.StreamSeq, d.Count
	}
	return fields
}

// SubscribeInitialize creates the topic's stream ([StreamConfig]) if it is
// missing, waiting at most 10 s.
func (s *Subscriber) SubscribeInitialize(topic string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := EnsureStream(ctx, s.js, topic)
	return err
}

// Close stops all pull loops, lets messages in handlers be acked within
// [SubscriberConfig.CloseGrace] (the rest are not acked and are redelivered
// after AckWait), waits for the loops, flushes the connection and closes
// it if the subscriber opened it (never a [SubscriberConfig.Conn] or
// [SubscriberConfig.JetStream]'s). It is safe to call more than once.
func (s *Subscriber) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.closing)
	s.mu.Unlock()
	s.loops.Wait()
	_ = s.nc.FlushTimeout(time.Second) // the naks of unhandled messages
	if s.ownConn {
		s.nc.Close()
	}
	return nil
}
