package events

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/google/uuid"

	"github.com/floodgate-go/floodgate/breaker"
)

// Defaults.
const (
	DefaultTopic          = "floodgate_transitions"
	DefaultBuffer         = 64
	DefaultPublishTimeout = 5 * time.Second

	maxBuffer = 1 << 16
)

// Config configures [New].
type Config struct {
	// Publisher publishes the transition messages. When it has a
	// PublishContext(ctx, topic, msgs...) method (this module's JetStream
	// publisher does) each publish is bounded by PublishTimeout through its
	// context; otherwise the notifier stops waiting after PublishTimeout and
	// the publish finishes in the background.
	// Optional. Default nil: transitions are only logged.
	Publisher message.Publisher

	// Topic is the topic transitions are published on.
	// Optional. Default [DefaultTopic] ("floodgate_transitions").
	Topic string

	// Logger receives one Info line per transition (fields breaker, from,
	// to, reason, window, generation) and Error lines for drops and failed
	// publishes.
	// Optional. Default [watermill.NopLogger].
	Logger watermill.LoggerAdapter

	// Buffer is how many transitions may wait for the publisher; when it is
	// full, a transition is dropped (counted, logged).
	// Optional. Default 64. Valid range 1..65536.
	Buffer int

	// PublishTimeout bounds each publish.
	// Optional. Default 5s. Valid range > 0.
	PublishTimeout time.Duration
}

func (c *Config) setDefaults() {
	if c.Topic == "" {
		c.Topic = DefaultTopic
	}
	if c.Logger == nil {
		c.Logger = watermill.NopLogger{}
	}
	if c.Buffer == 0 {
		c.Buffer = DefaultBuffer
	}
	if c.PublishTimeout == 0 {
		c.PublishTimeout = DefaultPublishTimeout
	}
}

// Validate reports whether c, with defaults applied to its zero fields, is
// valid: the check [New] makes. It does not modify c. The error wraps
// [ErrInvalidConfig] and names the field and its allowed range.
func (c Config) Validate() error {
	c.setDefaults()
	return c.validate()
}

// validate requires defaults set.
func (c *Config) validate() error {
	switch {
	case c.Buffer < 1 || c.Buffer > maxBuffer:
		return fmt.Errorf("%w: Buffer must be in 1..%d, got %d", ErrInvalidConfig, maxBuffer, c.Buffer)
	case c.PublishTimeout <= 0:
		return fmt.Errorf("%w: PublishTimeout must be > 0, got %v", ErrInvalidConfig, c.PublishTimeout)
	}
	return nil
}

// Stats are a [Notifier]'s counters since [New].
type Stats struct {
	// Published counts transitions the publisher confirmed.
	Published uint64
	// Dropped counts transitions not published because the buffer was full
	// or the notifier was closed.
	Dropped uint64
	// Failed counts publishes that returned an error or timed out.
	Failed uint64
}

type contextPublisher interface {
	PublishContext(ctx context.Context, topic string, messages ...*message.Message) error
}

// Notifier logs and publishes breaker transitions; see the package
// documentation for the model. Its methods are safe for concurrent use.
type Notifier struct {
	cfg  Config
	ch   chan Transition
	done chan struct{}

	mu     sync.RWMutex // guards closed against sends on ch
	closed bool

	published, dropped, failed atomic.Uint64
}

// New returns a running [Notifier]. Call [Notifier.Close] to stop it. It
// returns an error wrapping "invalid config" and [ErrInvalidConfig] naming
// the field and its allowed range.
func New(cfg Config) (*Notifier, error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("invalid config: %w", err)
	}
	n := &Notifier{cfg: cfg, ch: make(chan Transition, cfg.Buffer), done: make(chan struct{})}
	go n.loop()
	return n, nil
}

// Topic returns the topic transitions are published on.
func (n *Notifier) Topic() string { return n.cfg.Topic }

// Watch adds [Notifier.Observe] as a listener of b; remove unregisters it.
func (n *Notifier) Watch(b *breaker.Breaker) (remove func()) {
	return b.AddListener(n.Observe)
}

// Observe logs t and queues it for publishing; it never blocks. It is the
// breaker listener [Notifier.Watch] adds, exported for callers that combine
// listeners.
func (n *Notifier) Observe(t breaker.Transition) {
	ev := FromBreaker(t)
	n.cfg.Logger.Info("floodgate: breaker transition", watermill.LogFields{
		"breaker":    ev.Breaker,
		"from":       ev.From,
		"to":         ev.To,
		"reason":     ev.Reason,
		"window":     t.Window,
		"generation": ev.Generation,
	})
	if n.cfg.Publisher == nil {
		return
	}
	n.mu.RLock()
	defer n.mu.RUnlock()
	if !n.closed {
		select {
		case n.ch <- ev:
			return
		default:
		}
	}
	total := n.dropped.Add(1)
	n.cfg.Logger.Error("floodgate: transition not published: buffer full or notifier closed", nil, watermill.LogFields{
		"breaker": ev.Breaker, "from": ev.From, "to": ev.To, "generation": ev.Generation, "dropped_total": total,
	})
}

// Stats returns the counters.
func (n *Notifier) Stats() Stats {
	return Stats{Published: n.published.Load(), Dropped: n.dropped.Load(), Failed: n.failed.Load()}
}

// Close stops accepting transitions (later ones are dropped) and waits until
// the buffered ones are published or ctx is done. It returns ctx.Err() if ctx
// ended first (the publishing goroutine then stops after its current
// publish). It does not close [Config.Publisher]. Calling it again returns
// nil once the goroutine has stopped.
func (n *Notifier) Close(ctx context.Context) error {
	n.mu.Lock()
	if !n.closed {
		n.closed = true
		close(n.ch)
	}
	n.mu.Unlock()
	select {
	case <-n.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (n *Notifier) loop() {
	defer close(n.done)
	for ev := range n.ch {
		if err := n.publish(ev); err != nil {
			n.failed.Add(1)
			n.cfg.Logger.Error("floodgate: publish transition", err, watermill.LogFields{
				"breaker": ev.Breaker, "from": ev.From, "to": ev.To, "generation": ev.Generation, "topic": n.cfg.Topic,
			})
			continue
		}
		n.published.Add(1)
	}
}

func (n *Notifier) publish(ev Transition) error {
	msg, err := ev.Message(uuid.NewString())
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), n.cfg.PublishTimeout)
	defer cancel()
	if cp, ok := n.cfg.Publisher.(contextPublisher); ok {
		return cp.PublishContext(ctx, n.cfg.Topic, msg)
	}
	errc := make(chan error, 1)
	go func() { errc <- n.cfg.Publisher.Publish(n.cfg.Topic, msg) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		return fmt.Errorf("events: publish to %s: %w", n.cfg.Topic, ctx.Err())
	}
}
