package floodgate

import (
	"cmp"
	"fmt"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/jsq"
	"github.com/floodgate-go/floodgate/middleware"
	"github.com/floodgate-go/floodgate/partner"
	"github.com/floodgate-go/floodgate/retryqueue"
)

// Config configures [New]: one guarded handler, its partners, its retry
// queue and its drain. Name, Topic, Subscriber, Deliver and JetStream are
// required; every other field is optional, its zero value meaning the
// default of the package it configures. New copies it.
type Config struct {
	// Name is the guarded handler's name in the router. With Topic it names
	// the route's service ([retryqueue.ServiceName](Topic, Name)) unless
	// Queue.Service is set: replicas of one service share it, and two
	// handlers (or two programs on different topics) never drain each
	// other's messages. The drain runs as a second router handler named
	// [DrainHandlerName](Name). Required.
	Name string
	// Topic is the source topic the handler consumes ([jsq.ValidateTopic]:
	// "edi_orders" or "edi.orders.850"). Required.
	Topic string
	// Subscriber consumes Topic. It must ack a message only after the
	// handler returned nil and nack it on an error, as every Watermill
	// subscriber does; a [jsq.Subscriber] also tells the middleware the
	// message's last delivery and its AckWait. Required.
	Subscriber message.Subscriber
	// Deliver delivers one message to its partner, under the context
	// msg.Context() (cancelled after Timeout). It returns nil once the
	// partner has the message; an error wrapping a permanent error
	// ([github.com/floodgate-go/floodgate/deliver.IsPermanent]) dead-letters
	// it, [middleware.ErrNotAttempted] diverts it without counting an
	// attempt, and any other error diverts it for a retry and counts as a
	// failure for its partner's breaker. [middleware.IsProbe] tells it a call
	// is a half-open probe. A drained message's partner is its route's:
	// a Deliver that picks the destination by key takes it from
	// [retryqueue.DrainedPartner] when ok, else from PartnerKey. It must be
	// safe for concurrent use. Required.
	Deliver message.NoPublishHandlerFunc
	// JetStream holds the retry and dead-letter streams (created if
	// missing by [retryqueue.Provision]) and the drain's consumers. Its
	// connection also publishes diversions. Required.
	JetStream jetstream.JetStream

	// PartnerKey returns a live message's partner key: any byte string
	// (msg.Metadata.Get("AS2-To"), a webhook endpoint). Keys are untrusted
	// input, mapped to safe names by [partner.Token]. A key read from a
	// NATS header arrives with surrounding whitespace trimmed (NATS trims
	// header values), so there " a" and "a" are one partner. It must be fast and
	// safe for concurrent use. Optional. Default nil: every message goes to
	// DefaultPartner.
	PartnerKey func(msg *message.Message) string
	// DefaultPartner is the partner of a message whose PartnerKey is "".
	// Optional. Default [retryqueue.DefaultPartner] ("default") when
	// PartnerKey is nil, and "" otherwise: a message without a key is then
	// dead-lettered with reason [middleware.DeadReasonNoPartner].
	DefaultPartner string
	// Partner is the configuration every partner starts from: its breaker
	// (open window, probes, recovery policy, slow-call threshold) and its
	// bulkhead ([partner.PartnerConfig]). Optional. Default the breaker's
	// defaults and a bulkhead of [partner.DefaultMaxInFlight].
	Partner partner.PartnerConfig
	// Override adjusts one partner's configuration when it is created
	// ([partner.Config.Override]). Optional.
	Override func(key string, c *partner.PartnerConfig)
	// MaxPartners caps the partners held at once ([partner.Config.MaxPartners]);
	// a message for a new partner beyond it, when no idle partner can be
	// evicted, is diverted as not attempted ("partner-limit"). Optional.
	// Default 10000; range 1..[partner.MaxPartnersLimit].
	MaxPartners int
	// IdleAfter is how long a closed partner with no backlog and no call in
	// flight stays before it is evicted ([partner.Config.IdleAfter]).
	// Optional. Default 10m; range > 0.
	IdleAfter time.Duration

	// Fleet, when set, shares each partner's breaker across the replicas of
	// the service (every process running this Config): one state and one
	// probe budget per partner, in Fleet.Store (a breaker/natskv store:
	// one KV key per partner, one watch per bucket per process). Its Name
	// is set per partner ([partner.FleetName] of the route's service and
	// the key); set Replica once per process. See [breaker.FleetConfig].
	// Optional. Default nil: each replica's breakers are its own.
	Fleet *breaker.FleetConfig

	// Timeout bounds one delivery attempt ([middleware.Config.Timeout]).
	// Optional. Default [middleware.DefaultTimeout] (10 s); negative
	// ([middleware.NoTimeout]) for none. Timeout + Queue.PublishTimeout
	// must be below Drain.Drainer.AckWait (30 s by default), and, for live
	// messages, below the Subscriber's AckWait.
	Timeout time.Duration
	// MaxMetadataSize bounds a message's own metadata in bytes
	// ([middleware.Config.MaxMetadataSize]): a message over it is
	// dead-lettered with reason [middleware.DeadReasonMetadataTooLarge].
	// Optional. Default [middleware.DefaultMaxMetadataSize] (32 KiB).
	// Valid range: -1 ([middleware.NoMaxMetadataSize], no limit) or
	// 1 KiB..16 MiB.
	MaxMetadataSize int
	// Queue tunes the retry queue: its stream names, MaxAttempts, MaxAge,
	// Backoff, Service ([retryqueue.Config]). Publisher, JetStream, Source,
	// Handler, Partner and OrderingKey must be zero: New sets the first
	// four, each message has its own partner, and per-key ordering needs a
	// single drainer for the service (wire the lower-level packages for it).
	// Optional.
	Queue retryqueue.Config
	// Drain tunes the per-partner drain: the template of every partner's
	// drain rate and in-flight bound (Drain.Drainer), the in-flight bound
	// shared by all partners (Drain.MaxInFlight) and how often other
	// replicas' backlogs are looked for ([retryqueue.PartnerDrainerConfig]).
	// JetStream, Queue, Handler and Gate must be zero: New sets them;
	// Drain.Drainer.Stream must be empty or Queue.RetryTopic, the stream
	// diversions go to.
	// Optional.
	Drain retryqueue.PartnerDrainerConfig

	// Metrics, when set, gets floodgate's Prometheus metrics registered on
	// it, with a partner label per partner. Optional. Default nil: no
	// metrics.
	Metrics prometheus.Registerer
	// OnEvent, when set, is called once per message with what the
	// middleware did with it ([middleware.Config.OnEvent]), after the
	// drain's feedback and the metrics. It runs on the handler's goroutine:
	// keep it fast. Optional.
	OnEvent func(middleware.Event)
	// OnTransition, when set, is called with every transition of every
	// partner's breaker ([partner.Config.OnTransition]), after the drain was
	// woken. Optional.
	OnTransition func(p *partner.Partner, t breaker.Transition)
	// Logger receives failures to divert, dead-letter, ack or fetch.
	// Optional. Default [watermill.NopLogger].
	Logger watermill.LoggerAdapter
}

// Validate reports whether c is valid: the checks [New] makes before it
// builds anything. It does not modify c. The error wraps
// [ErrInvalidConfig] and names the field and its allowed range; the
// packages c configures check their own fields the same way.
func (c Config) Validate() error {
	q, d := c.Queue, c.Drain
	switch {
	case c.Name == "":
		return fmt.Errorf("%w: Name is required", ErrInvalidConfig)
	case c.Subscriber == nil:
		return fmt.Errorf("%w: Subscriber is required", ErrInvalidConfig)
	case c.Deliver == nil:
		return fmt.Errorf("%w: Deliver is required", ErrInvalidConfig)
	case c.JetStream == nil:
		return fmt.Errorf("%w: JetStream is required", ErrInvalidConfig)
	case q.Publisher != nil || q.JetStream != nil || q.Source != "" || q.Handler != "" || q.Partner != "":
		return fmt.Errorf("%w: Queue.Publisher, Queue.JetStream, Queue.Source, Queue.Handler and Queue.Partner must be unset: New sets them (Source and Handler from Topic and Name; the partner per message)", ErrInvalidConfig)
	case q.OrderingKey != nil:
		return fmt.Errorf("%w: Queue.OrderingKey must be nil: per-key ordering needs one drainer for the whole service (retryqueue.DrainerConfig.AllPartners), not a drain per partner", ErrInvalidConfig)
	case d.JetStream != nil || d.Queue != nil || d.Handler != nil || d.Gate != nil:
		return fmt.Errorf("%w: Drain.JetStream, Drain.Queue, Drain.Handler and Drain.Gate must be unset: New sets them", ErrInvalidConfig)
	case !middleware.ValidMaxMetadataSize(c.MaxMetadataSize):
		return fmt.Errorf("%w: MaxMetadataSize is %d, want 0 (the default, %d bytes), -1 (no limit) or 1024..16777216 bytes (1 KiB..16 MiB)", ErrInvalidConfig, c.MaxMetadataSize, middleware.DefaultMaxMetadataSize)
	case d.Drainer.Stream != "" && d.Drainer.Stream != cmp.Or(q.RetryTopic, retryqueue.DefaultRetryTopic):
		return fmt.Errorf("%w: Drain.Drainer.Stream is %q, want unset or Queue.RetryTopic (%q): the drain must read the stream diversions go to", ErrInvalidConfig, d.Drainer.Stream, cmp.Or(q.RetryTopic, retryqueue.DefaultRetryTopic))
	}
	if err := jsq.ValidateTopic(c.Topic); err != nil {
		return fmt.Errorf("%w: Topic: %v", ErrInvalidConfig, err)
	}
	// A drained delivery must settle (deliver, or divert and confirm)
	// before its drain consumer's AckWait, or it is redelivered meanwhile.
	if t := cmp.Or(c.Timeout, middleware.DefaultTimeout); t > 0 {
		pub := cmp.Or(q.PublishTimeout, defaultPublishTimeout)
		ack := cmp.Or(d.Drainer.AckWait, defaultDrainAckWait)
		if t+pub >= ack {
			return fmt.Errorf("%w: Timeout (%s) + Queue.PublishTimeout (%s) must be below Drain.Drainer.AckWait (%s)", ErrInvalidConfig, t, pub, ack)
		}
	}
	return nil
}

// The retryqueue defaults Validate checks Timeout against.
const (
	defaultPublishTimeout = 5 * time.Second  // retryqueue.Config.PublishTimeout
	defaultDrainAckWait   = 30 * time.Second // retryqueue.DrainerConfig.AckWait
)

// defaultPartner is c's DefaultPartner with its default applied.
func (c Config) defaultPartner() string {
	if c.PartnerKey == nil && c.DefaultPartner == "" {
		return retryqueue.DefaultPartner
	}
	return c.DefaultPartner
}

func (c Config) loggerOrNop() watermill.LoggerAdapter {
	if c.Logger == nil {
		return watermill.NopLogger{}
	}
	return c.Logger
}
