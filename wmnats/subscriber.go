package wmnats

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wmjs "github.com/ThreeDotsLabs/watermill-nats/v2/pkg/jetstream"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/floodgate-go/floodgate/jsq"
)

var _ message.Subscriber = (*Subscriber)(nil)

// Subscriber is a watermill-nats pkg/jetstream subscriber set up for
// floodgate (see the package doc) behind a close gate. Subscribe and
// Close are safe for concurrent use; the router calls Subscribe and Close
// once per handler.
type Subscriber struct {
	sub *wmjs.Subscriber
	cc  jetstream.ConsumerConfig

	mu       sync.Mutex
	closing  bool
	inflight sync.WaitGroup
	once     sync.Once
	closed   chan struct{} // closed when Close begins
}

// NewSubscriber connects to cfg.URL and returns a Subscriber. It returns
// an error wrapping [ErrInvalidConfig] for a bad cfg, or the connection's
// error. Streams and consumers are looked up or created by Subscribe, per
// topic.
func NewSubscriber(cfg Config) (*Subscriber, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("invalid config: %w", err)
	}
	nc, err := jsq.Connect(cfg.URL, cfg.ConnectOptions...)
	if err != nil {
		return nil, err
	}
	s := &Subscriber{closed: make(chan struct{}), cc: jetstream.ConsumerConfig{
		Durable:       cfg.Durable,
		AckPolicy:     jetstream.AckExplicitPolicy,
		DeliverPolicy: jetstream.DeliverAllPolicy,
		AckWait:       cfg.AckWait,
		MaxDeliver:    -1,
		MaxAckPending: cfg.Handlers * (prefetch + 1),
	}}
	s.sub, err = wmjs.NewSubscriber(wmjs.SubscriberConfig{
		Conn:                nc,
		Logger:              cfg.Logger,
		AckWaitTimeout:      cfg.AckWait,
		ResourceInitializer: s.consumer(cfg.NakDelay),
		ConsumeOptions:      []jetstream.PullConsumeOpt{jetstream.PullMaxMessages(prefetch)},
		NakDelay:            wmjs.NewStaticDelay(cfg.NakDelay),
		AckAsync:            false, // DoubleAck: acked once the server confirms
		Unmarshaler:         jsq.Unmarshaler{},
	})
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("wmnats: %w", err)
	}
	return s, nil
}

// ConsumerConfig returns the configuration of the durable consumer that
// Subscribe creates, or requires of an existing one in the fields
// [jsq.CheckConsumer] compares. Safe for concurrent use.
func (s *Subscriber) ConsumerConfig() jetstream.ConsumerConfig { return s.cc }

// consumer is the watermill-nats ResourceInitializer: topic's stream
// ([jsq.EnsureStream]) and the durable consumer on it
// ([jsq.EnsureConsumer]), gated; a nil closer, so it is never deleted.
func (s *Subscriber) consumer(nakDelay time.Duration) wmjs.ResourceInitializer {
	return func(ctx context.Context, js jetstream.JetStream, topic string) (jetstream.Consumer, func(context.Context, watermill.LoggerAdapter), error) {
		st, err := jsq.EnsureStream(ctx, js, topic)
		if err != nil {
			return nil, nil, err
		}
		c, err := jsq.EnsureConsumer(ctx, js, st.CachedInfo().Config.Name, s.cc)
		if err != nil {
			return nil, nil, err
		}
		return gatedConsumer{c, s, nakDelay}, nil, nil
	}
}

// Subscribe returns topic's messages, after ensuring its stream and the
// durable consumer (see the package doc): an existing one that differs
// is refused, unchanged, with an error wrapping a [*jsq.ConfigMismatchError].
// The watermill-nats subscriber never sees ctx cancelled (its end would
// close the channel unsafely); when ctx ends, Subscribe runs Close. It
// returns [ErrClosed] once Close has begun.
func (s *Subscriber) Subscribe(ctx context.Context, topic string) (<-chan *message.Message, error) {
	s.mu.Lock()
	closing := s.closing
	s.mu.Unlock()
	if closing {
		return nil, ErrClosed
	}
	out, err := s.sub.Subscribe(context.WithoutCancel(ctx), topic)
	if err != nil {
		return nil, fmt.Errorf("wmnats: subscribe %q: %w", topic, err)
	}
	go func() {
		select {
		case <-ctx.Done():
			_ = s.Close()
		case <-s.closed:
		}
	}()
	return out, nil
}

// Close stops passing messages to handlers (one arriving is nacked with
// [Config.NakDelay]), waits until the messages in handlers are acked or
// nacked (each at most [Config.AckWait]), then closes the watermill-nats
// subscriber and its connection. The durable consumer is kept. Safe to
// call concurrently and more than once; it returns the watermill-nats
// subscriber's Close error.
func (s *Subscriber) Close() error {
	s.mu.Lock()
	s.closing = true
	s.mu.Unlock()
	s.once.Do(func() { close(s.closed) })
	s.inflight.Wait()
	return s.sub.Close()
}

// gatedConsumer passes each message to the subscriber only while its gate
// is open, and tracks it until the subscriber's callback returns (acked,
// nacked or timed out).
type gatedConsumer struct {
	jetstream.Consumer
	s        *Subscriber
	nakDelay time.Duration
}

// Consume wraps cb with the gate.
func (c gatedConsumer) Consume(cb jetstream.MessageHandler, opts ...jetstream.PullConsumeOpt) (jetstream.ConsumeContext, error) {
	return c.Consumer.Consume(func(msg jetstream.Msg) {
		c.s.mu.Lock()
		if c.s.closing {
			c.s.mu.Unlock()
			_ = msg.NakWithDelay(c.nakDelay) // for the next run
			return
		}
		c.s.inflight.Add(1)
		c.s.mu.Unlock()
		defer c.s.inflight.Done()
		cb(msg)
	}, opts...)
}
