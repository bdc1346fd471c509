package wmnats

import (
	"fmt"
	"strings"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/nats-io/nats.go"
)

// Config configures [NewSubscriber]. The zero value of every optional field
// takes its default.
type Config struct {
	// URL is the NATS server. Required. The subscriber always opens its
	// own connection (with [jsq.Connect]: unlimited reconnects): the
	// watermill-nats subscriber's Close drains the connection it uses, so
	// a shared one would be closed under its other users.
	URL string
	// ConnectOptions are applied when connecting to URL, after
	// [jsq.Connect]'s (credentials, TLS, a name...). Optional.
	ConnectOptions []nats.Option
	// Durable names the durable pull consumer on each subscribed topic's
	// stream ([jsq.StreamName]), shared by every handler and every process
	// consuming the topic. Required: a JetStream consumer name, at most 255
	// bytes, without '.', '*', '>', '/', '\\' or whitespace.
	Durable string
	// Handlers is the number of router handlers that will subscribe to a
	// topic with this Subscriber (each handles one message at a time). It
	// sets the consumer's MaxAckPending to 2 × Handlers: one message in
	// the handler and one prefetched per subscription. Optional. Default
	// 1; range 1..1024.
	Handlers int
	// AckWait is the consumer's AckWait and the time the subscriber waits
	// for a handler to ack or nack a message (watermill-nats'
	// AckWaitTimeout). It must exceed 2 × the longest handler call (a
	// prefetched message waits for the one before it): with floodgate's
	// middleware, its Timeout plus the retry queue's PublishTimeout.
	// Optional. Default 30 s; range 1 s..24 h.
	AckWait time.Duration
	// NakDelay is the pause before a nacked message (its diversion not
	// confirmed, or arriving while the subscriber closes) is redelivered.
	// Static: watermill-nats' MaxRetryDelay ends with Term, which drops
	// the message. Optional. Default 200 ms; range 1 ms..AckWait.
	NakDelay time.Duration
	// Logger receives the watermill-nats subscriber's logs. Optional.
	// Default watermill.NopLogger.
	Logger watermill.LoggerAdapter
}

// prefetch is PullMaxMessages: messages a subscription holds beyond the
// one in its handler.
const prefetch = 1

func (c *Config) setDefaults() {
	if c.Handlers == 0 {
		c.Handlers = 1
	}
	if c.AckWait == 0 {
		c.AckWait = 30 * time.Second
	}
	if c.NakDelay == 0 {
		c.NakDelay = 200 * time.Millisecond
	}
	if c.Logger == nil {
		c.Logger = watermill.NopLogger{}
	}
}

// Validate returns nil if c, with its defaults applied, is valid, and an
// error wrapping [ErrInvalidConfig] naming the field and its allowed range
// otherwise. It does not connect.
func (c Config) Validate() error {
	c.setDefaults()
	switch {
	case c.URL == "":
		return fmt.Errorf("%w: URL is required", ErrInvalidConfig)
	case c.Durable == "":
		return fmt.Errorf("%w: Durable is required", ErrInvalidConfig)
	case len(c.Durable) > 255:
		return fmt.Errorf("%w: Durable must be at most 255 bytes, got %d", ErrInvalidConfig, len(c.Durable))
	case strings.ContainsAny(c.Durable, ".*>/\\ \t\r\n\f\v"):
		return fmt.Errorf("%w: Durable %q must not contain . * > / \\ or whitespace", ErrInvalidConfig, c.Durable)
	case c.Handlers < 1 || c.Handlers > 1024:
		return fmt.Errorf("%w: Handlers must be in 1..1024, got %d", ErrInvalidConfig, c.Handlers)
	case c.AckWait < time.Second || c.AckWait > 24*time.Hour:
		return fmt.Errorf("%w: AckWait must be in 1s..24h, got %s", ErrInvalidConfig, c.AckWait)
	case c.NakDelay < time.Millisecond || c.NakDelay > c.AckWait:
		return fmt.Errorf("%w: NakDelay must be in 1ms..AckWait (%s), got %s", ErrInvalidConfig, c.AckWait, c.NakDelay)
	}
	return nil
}
