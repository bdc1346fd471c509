package jsq

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/floodgate-go/floodgate/internal/redact"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// ErrPublisherClosed is returned by [Publisher.Publish] after [Publisher.Close].
var ErrPublisherClosed = errors.New("jsq: publisher closed")

// PublisherConfig configures [NewPublisher].
type PublisherConfig struct {
	// URL is the NATS server to connect to; the publisher owns that
	// connection and closes it in Close.
	// Required unless Conn or JetStream is set; ignored when one is.
	URL string
	// ConnectOptions are used when connecting to URL, after this package's
	// defaults (reconnect forever, 100 ms between attempts).
	// Optional.
	ConnectOptions []nats.Option
	// Conn is an existing connection to publish on instead of URL. Close does
	// not close it.
	// Optional.
	Conn *nats.Conn
	// JetStream is an existing JetStream context to publish with, on its
	// connection (JetStream.Conn()), which Close does not close. With Conn
	// set too, both must be the same connection.
	// Optional.
	JetStream jetstream.JetStream
	// PublishTimeout bounds [Publisher.Publish], which takes no context, per
	// message. [Publisher.PublishContext] uses its context instead, and this
	// timeout only when the context has no deadline.
	// Optional. Default 5s. Valid range > 0.
	PublishTimeout time.Duration
}

func (c *PublisherConfig) setDefaults() {
	if c.PublishTimeout == 0 {
		c.PublishTimeout = 5 * time.Second
	}
}

// Validate reports whether c, with defaults applied to its zero fields, is
// valid: the check [NewPublisher] makes. It does not modify c. The error
// wraps [ErrInvalidConfig] and names the field and its allowed range.
func (c PublisherConfig) Validate() error {
	c.setDefaults()
	return c.validate()
}

// validate requires defaults set.
func (c *PublisherConfig) validate() error {
	if err := validateConn(c.URL, c.Conn, c.JetStream); err != nil {
		return err
	}
	if c.PublishTimeout <= 0 {
		return fmt.Errorf("%w: PublishTimeout must be > 0, got %s", ErrInvalidConfig, c.PublishTimeout)
	}
	return nil
}

// Publisher is a Watermill publisher to JetStream that returns only after
// the server confirmed (PubAck) every message it was given: a nil error
// means each message is stored in its stream. Publishing to a topic whose
// stream does not exist fails (after the client's short no-responders
// retries); it never creates streams. It is safe for concurrent use.
//
// Unlike watermill-nats' pkg/jetstream Publisher, which waits for the PubAck
// on context.Background() (the JetStream default timeout of 5 s), it has
// [Publisher.PublishContext] and a configurable timeout, and it does not
// close a connection it was given.
type Publisher struct {
	nc      *nats.Conn
	ownConn bool
	js      jetstream.JetStream
	timeout time.Duration

	mu     sync.RWMutex
	closed bool
}

// NewPublisher returns a [Publisher] on [PublisherConfig.JetStream],
// [PublisherConfig.Conn], or a connection of its own to
// [PublisherConfig.URL], in that order. It returns an error wrapping
// "invalid config" and [ErrInvalidConfig], or the connection error.
func NewPublisher(cfg PublisherConfig) (*Publisher, error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("invalid config: %w", err)
	}
	p := &Publisher{timeout: cfg.PublishTimeout}
	var err error
	if p.nc, p.js, p.ownConn, err = openConn(cfg.URL, cfg.ConnectOptions, cfg.Conn, cfg.JetStream); err != nil {
		return nil, err
	}
	return p, nil
}

// JetStream returns the JetStream context the publisher publishes with, on
// its connection. The retry queue uses it for its payload bucket
// (retryqueue.Config.JetStream). Safe for concurrent use.
func (p *Publisher) JetStream() jetstream.JetStream { return p.js }

// Connect connects to url with reconnection forever, 100 ms between
// attempts, followed by opts.
func Connect(url string, opts ...nats.Option) (*nats.Conn, error) {
	all := append([]nats.Option{nats.MaxReconnects(-1), nats.ReconnectWait(100 * time.Millisecond)}, opts...)
	nc, err := nats.Connect(url, all...)
	if err != nil {
		return nil, fmt.Errorf("jsq: connect %s: %w", redact.URL(url), redact.Error(err, url))
	}
	return nc, nil
}

// Publish publishes messages to topic in order, each bounded by
// [PublisherConfig.PublishTimeout], and returns at the first failure: the
// messages before it are stored, it and the ones after may not be.
func (p *Publisher) Publish(topic string, messages ...*message.Message) error {
	return p.PublishContext(context.Background(), topic, messages...)
}

// PublishContext is [Publisher.Publish] bounded by ctx; when ctx has no
// deadline each message is bounded by [PublisherConfig.PublishTimeout]. A
// publish that timed out may still have been stored: at-least-once.
func (p *Publisher) PublishContext(ctx context.Context, topic string, messages ...*message.Message) error {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.closed {
		return ErrPublisherClosed
	}
	if err := ValidateTopic(topic); err != nil {
		return err
	}
	for _, m := range messages {
		if err := p.publish(ctx, topic, m); err != nil {
			return fmt.Errorf("jsq: publish %s to %q: %w", m.UUID, topic, err)
		}
	}
	return nil
}

func (p *Publisher) publish(ctx context.Context, topic string, m *message.Message) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, p.timeout)
		defer cancel()
	}
	_, err := p.js.PublishMsg(ctx, Marshal(topic, m))
	return err
}

// Marshal returns the NATS message for m on subject topic in the wire format
// described in the package doc.
func Marshal(topic string, m *message.Message) *nats.Msg {
	// The header map is sized up front and its values share one array: a
	// diverted message carries a dozen keys, and a map grown key by key
	// rehashes on the way. Each value is capped, so appending to one
	// (Header.Add) cannot overwrite the next.
	n := len(m.Metadata) + 1
	h := make(nats.Header, n)
	vals := make([]string, 0, n)
	for k, v := range m.Metadata {
		vals = append(vals, v)
		h[k] = vals[len(vals)-1 : len(vals) : len(vals)]
	}
	vals = append(vals, m.UUID)
	h[UUIDHeader] = vals[len(vals)-1 : len(vals) : len(vals)]
	return &nats.Msg{Subject: topic, Header: h, Data: m.Payload}
}

// Close stops publishing and closes the connection if the publisher opened
// it. Publishes in progress finish first. It is safe to call more than once.
func (p *Publisher) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	if p.ownConn {
		p.nc.Close()
	}
	return nil
}

// ValidHeaderKey reports whether k can be sent as a NATS header key (and so
// as a metadata key): non-empty printable ASCII (33..126) without any of
// "()/,:;<=>?@[\]{} and the double quote. nats.go refuses to publish a
// message with any other key.
func ValidHeaderKey(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		if !headerKeyByte[k[i]] {
			return false
		}
	}
	return true
}

// headerKeyByte marks the bytes [ValidHeaderKey] allows.
var headerKeyByte = func() (t [256]bool) {
	for c := 33; c <= 126; c++ {
		t[c] = !strings.ContainsRune(`"()/,:;<=>?@[\]{}`, rune(c))
	}
	return t
}()
