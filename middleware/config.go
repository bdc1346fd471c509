package middleware

import (
	"errors"
	"fmt"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/deliver"
	"github.com/floodgate-go/floodgate/partner"
	"github.com/floodgate-go/floodgate/retryqueue"
)

// DefaultTimeout is the deadline given to one delivery attempt when
// [Config.Timeout] is zero. It is well below the 30 s AckWait of JetStream's
// and [jsq]'s defaults: Timeout plus the retry queue's PublishTimeout must
// stay below the source consumer's AckWait, or the broker redelivers a
// message whose delivery is still running.
const DefaultTimeout = 10 * time.Second

// NoTimeout, as [Config.Timeout], runs the wrapped handler with the
// message's own context, without a deadline of the middleware's: for a
// handler that bounds its own calls (an HTTP client's Timeout), or a
// subscriber whose context already carries one. The healthy path then
// allocates nothing.
const NoTimeout time.Duration = -1

// DefaultMaxMetadataSize is [Config.MaxMetadataSize] when it is zero:
// 32 KiB of a message's own metadata, keys and values. It is well above
// what a message pipeline carries (AS2 and webhook headers, trace context:
// a few hundred bytes to a few KiB), and low enough that such a message
// with a usual number of keys, plus the metadata floodgate adds (about
// 6 KiB at most at the retry queue's defaults), fits the 64 KiB JetStream
// allows a stored message's headers (each key also costs about 4 bytes of
// header framing), so it can be diverted as it is; one that does not fit
// is dead-lettered "too-large" with its metadata kept aside.
const DefaultMaxMetadataSize = 32 << 10

// NoMaxMetadataSize, as [Config.MaxMetadataSize], turns the limit off: a
// message's metadata is then bounded by the NATS server's max_payload only.
const NoMaxMetadataSize = -1

// ValidMaxMetadataSize reports whether n is a valid
// [Config.MaxMetadataSize]: 0 (the default), [NoMaxMetadataSize] or
// 1 KiB..16 MiB. It lets a configuration that sets the field for the
// middleware (floodgate.Config) check it before building anything.
func ValidMaxMetadataSize(n int) bool {
	return n == 0 || n == NoMaxMetadataSize || (n >= minMaxMetadataSize && n <= maxMaxMetadataSize)
}

// The range of [Config.MaxMetadataSize] besides [NoMaxMetadataSize].
const (
	minMaxMetadataSize = 1 << 10
	maxMaxMetadataSize = 16 << 20
)

// ErrInvalidConfig is wrapped by every error [New] returns for a bad [Config].
var ErrInvalidConfig = errors.New("middleware: invalid config")

// Config configures the middleware built by [New]. Set exactly one of
// Breaker (single-partner mode: one breaker, the queue's
// [retryqueue.Config.Partner] route) and Partners (per-partner mode: a
// breaker and a bulkhead per partner, chosen per message by PartnerKey; see
// the package doc).
type Config struct {
	// Breaker guards the one partner of single-partner mode. Required
	// unless Partners is set; exactly one of the two.
	Breaker *breaker.Breaker

	// Partners holds a breaker and a bulkhead per partner (per-partner
	// mode). Required unless Breaker is set; exactly one of the two. The
	// middleware does not close it.
	Partners *partner.Registry

	// PartnerKey returns the partner key of a live message: any byte string
	// (for example msg.Metadata.Get("AS2-To"), or a webhook's endpoint),
	// untrusted input the registry maps to a safe token. It is not called
	// for a message a [retryqueue.Drainer] handed over, whose partner is
	// its route's ([retryqueue.DrainedPartner]). "" means no key (see
	// DefaultPartner); a panic counts as no key. It runs on the handler's
	// goroutine for every message: keep it fast and allocation-free, and
	// safe for concurrent use. Required with Partners; not allowed with
	// Breaker.
	PartnerKey func(msg *message.Message) string

	// A live message for which PartnerKey returns "" goes to the partner
	// of this key. Optional, with Partners only. Default "": such a
	// message is dead-lettered with reason [DeadReasonNoPartner].
	DefaultPartner string

	// Queue receives diverted messages and dead letters; in per-partner
	// mode each under its partner's route ([retryqueue.Queue.RouteTo]).
	// Required.
	Queue *retryqueue.Queue

	// Timeout bounds one delivery attempt: the wrapped handler runs with a
	// message context that is cancelled after it. Optional. Default
	// [DefaultTimeout] (10 s); must be > 0, or negative for none
	// ([NoTimeout]: the handler gets the message's context as it came,
	// marked when a probe, see [IsProbe]). Keep Timeout plus the queue's
	// PublishTimeout below the source consumer's AckWait. If the
	// subscriber gives up first and cancels the message's context with a
	// cause wrapping [context.DeadlineExceeded] (jsq does, with
	// [github.com/floodgate-go/floodgate/jsq.ErrAckWait]), the handler's
	// error goes to the breaker's Classifier as a timeout's would (by
	// default a failure); a plain cancellation counts as a shutdown: the
	// permit is cancelled (neutral, for a probe too) and the message
	// diverted.
	Timeout time.Duration

	// IsPermanent reports whether a handler error will fail again on every
	// retry (a rejected document, an AS2 MDN with a "failed" disposition).
	// Such a message is dead-lettered at once and the call is reported to the
	// breaker as neutral: the partner answered. It is asked after
	// [ErrNotAttempted] and shutdown, and before the breaker's Classifier,
	// which judges every other error for the breaker while the message is
	// diverted as retryable (see the package doc).
	// Optional. Default [deliver.IsPermanent].
	IsPermanent func(error) bool

	// MaxMetadataSize bounds a message's own metadata, in bytes: the sum of
	// len(key)+len(value) over its keys not starting with "floodgate_"
	// (floodgate's bookkeeping, bounded by [retryqueue.Config.MaxHistory]
	// and MaxErrorLen and checked by [retryqueue.Queue.Malformed]). A live
	// or drained message over it is untrusted input built to exhaust
	// memory or a partner's header limits: it is dead-lettered with reason
	// [DeadReasonMetadataTooLarge] before admission, never delivered and
	// never diverted (a diversion would publish it again), and the breaker
	// is not asked. Optional. Default [DefaultMaxMetadataSize] (32 KiB).
	// Valid range: -1 ([NoMaxMetadataSize], no limit) or 1 KiB..16 MiB;
	// below 1 KiB ordinary headers (AS2's, trace context) would be
	// refused; JetStream stores at most 64 KiB of headers, so above that
	// it bounds only messages from another transport, and above 16 MiB
	// it exceeds what a NATS server is advised to carry (max_payload
	// 1 MiB by default, at most 8 MiB recommended).
	MaxMetadataSize int

	// OnEvent, when set, is called once per message with what the middleware
	// did with it, after the outcome is durable. It runs on the handler's
	// goroutine: keep it fast. Optional.
	OnEvent func(Event)

	// Logger receives failures to divert or dead-letter. Optional. Default
	// [watermill.NopLogger].
	Logger watermill.LoggerAdapter
}

func (c *Config) setDefaults() {
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.MaxMetadataSize == 0 {
		c.MaxMetadataSize = DefaultMaxMetadataSize
	}
	if c.IsPermanent == nil {
		c.IsPermanent = deliver.IsPermanent
	}
	if c.Logger == nil {
		c.Logger = watermill.NopLogger{}
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
	case c.Breaker == nil && c.Partners == nil:
		return fmt.Errorf("%w: one of Breaker and Partners is required, got neither", ErrInvalidConfig)
	case c.Breaker != nil && c.Partners != nil:
		return fmt.Errorf("%w: exactly one of Breaker and Partners may be set, got both", ErrInvalidConfig)
	case c.Partners != nil && c.PartnerKey == nil:
		return fmt.Errorf("%w: PartnerKey is required with Partners", ErrInvalidConfig)
	case c.Breaker != nil && (c.PartnerKey != nil || c.DefaultPartner != ""):
		return fmt.Errorf("%w: PartnerKey and DefaultPartner are allowed with Partners only, not with Breaker", ErrInvalidConfig)
	case c.Queue == nil:
		return fmt.Errorf("%w: Queue is required", ErrInvalidConfig)
	case !ValidMaxMetadataSize(c.MaxMetadataSize):
		return fmt.Errorf("%w: MaxMetadataSize is %d, want -1 (no limit) or %d..%d bytes (1 KiB..16 MiB)",
			ErrInvalidConfig, c.MaxMetadataSize, minMaxMetadataSize, maxMaxMetadataSize)
	}
	return nil
}
