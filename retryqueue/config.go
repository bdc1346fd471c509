package retryqueue

import (
	"context"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/floodgate-go/floodgate/jsq"
	"github.com/nats-io/nats.go/jetstream"
)

// Clock tells the time. [Config.Clock] takes it so tests can fix time.
type Clock interface {
	Now() time.Time
}

type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }

// ContextPublisher is a Publisher whose publish is bounded by a context.
// When [Config.Publisher] implements it (the JetStream publisher of this
// module does), the queue calls PublishContext with its publish timeout;
// otherwise it calls Publish and stops waiting at the timeout.
type ContextPublisher interface {
	PublishContext(ctx context.Context, topic string, messages ...*message.Message) error
}

// Config configures [New].
type Config struct {
	// Publisher publishes a too-large dead letter, restored, back to its
	// original topic ([Queue.Replay]). It must return nil only after the
	// broker confirmed the publish (a JetStream PubAck), or the
	// at-least-once guarantee is lost. Diversions and dead letters go
	// through JetStream directly (see JetStream), to their route's subject.
	// Required.
	Publisher message.Publisher
	// Source is the topic the guarded handler consumes. With Handler it
	// names the route's service when Service is empty: two services on
	// different topics (or two handlers of one topic) are different routes,
	// and never drain each other's messages.
	// Optional. Default "", and then Service is required.
	Source string
	// Handler is the name of the guarded handler consuming Source (its
	// router handler or durable consumer name). Replicas of one service
	// share it, and so share the route.
	// Optional. Default "".
	Handler string
	// Service is the route's service name: diverted messages go to the
	// subject RetryTopic.<service token>.<partner token> ([RouteSubject]),
	// and a [Drainer] receives only its route's subject. Any printable
	// UTF-8 string without leading or trailing space; [partner.Token]
	// encodes it into the subject.
	// Optional. Default [ServiceName](Source, Handler).
	Service string
	// Partner is the partner key of the queue's route: [Queue.Divert] and
	// [Queue.DeadLetter] use it; [Queue.RouteTo] and [Queue.DeadLetterTo]
	// take a key per message instead. Any byte string ([partner.Token]).
	// Optional. Default [DefaultPartner].
	Partner string
	// RetryTopic is the retry stream's name; its subjects are
	// RetryTopic.> ([RetryStreamConfig]). It must be a valid stream name
	// (no '.', '*', '>', '/', '\\', whitespace).
	// Optional. Default [DefaultRetryTopic].
	RetryTopic string
	// DeadLetterTopic is the dead-letter stream's name, with subjects
	// DeadLetterTopic.>, with the same rules as RetryTopic, and different
	// from it.
	// Optional. Default "floodgate_dead".
	DeadLetterTopic string
	// PublishTimeout bounds each diversion or dead-letter publish, measured
	// from the call and independent of the caller's context, which may
	// already be cancelled.
	// Optional. Default 5s. Valid range > 0.
	PublishTimeout time.Duration
	// MaxAttempts is the number of failed delivery attempts after which a
	// message is dead-lettered instead of diverted ([DeadReasonMaxAttempts]).
	// Optional. Default 10. Valid range >= 1.
	MaxAttempts int
	// MaxAge is how long after its first diversion a message is
	// dead-lettered instead of diverted again ([DeadReasonMaxAge]).
	// Optional. Default 72h. Valid range > 0.
	MaxAge time.Duration
	// Backoff returns how long after its attempt-th failed delivery
	// (attempt >= 1) a message is not eligible for the drain
	// ([MetaNotBefore]); a longer Retry-After hint from the partner
	// replaces it (see MaxRetryAfter). It must be a pure function of
	// attempt. It also spaces the refusals of a message by its handler
	// ([ReasonNotAttempted]): Backoff(n) after the n-th, counted apart
	// from the attempts ([MetaNotAttempted]).
	// Optional. Default [DefaultBackoff]: 1s doubling to at most 5m.
	Backoff func(attempt int) time.Duration
	// MaxRetryAfter caps the partner's Retry-After hint ([RetryAfterError],
	// RFC 9110 §10.2.3) on a failed delivery, so a partner cannot park a
	// message for days: [MetaNotBefore] is the failure time plus the larger
	// of Backoff(attempt) and the hint capped at MaxRetryAfter. The hint is
	// also capped at the time left until MaxAge has passed since the first
	// diversion, so it never holds a message past the point where MaxAge
	// dead-letters it instead of diverting it again (the message gets its
	// last attempt then); the backoff alone is never cut. The default honours
	// the usual 429 and 503 hints (seconds to an hour) while bounding what a
	// partner can add to a message's life to MaxAttempts · MaxRetryAfter
	// (10h with the defaults), well within the default MaxAge.
	// Optional. Default 1h, or MaxAge if that is shorter. Valid range
	// (0, MaxAge].
	MaxRetryAfter time.Duration
	// MaxErrorLen is the maximum length in bytes of [MetaLastError].
	// Optional. Default 512. Valid range >= 16.
	MaxErrorLen int
	// MaxHistory is the maximum number of entries kept in [MetaHistory];
	// older entries are dropped and counted in [MetaHistoryDropped]. It
	// bounds the metadata a message carries: about MaxHistory ·
	// (MaxErrorLen + 100) bytes.
	// Optional. Default 10. Valid range 1..100.
	MaxHistory int
	// OrderingKey, when set, turns on per-key ordering: it returns a
	// message's key ("" for none). While a key has messages in the retry
	// backlog, [Queue.Holds] reports live messages of that key, which the
	// caller then diverts with [ReasonOrdering], and the [Drainer] delivers
	// a key's messages one at a time in stream order, holding back the
	// later ones while an earlier one waits out its backoff. See the
	// package doc for the cost.
	// Optional. Default nil: FIFO drain, no per-key ordering.
	OrderingKey func(*message.Message) string
	// OrderingBuckets is the size of the per-key ordering index behind
	// [Queue.Holds] (with OrderingKey only): a fixed table of counters, 4
	// bytes each, indexed by a hash of the key, so its memory does not
	// grow with the number of keys in the backlog. A live message whose key
	// has no backlog but shares a counter with one that has is diverted
	// ([ReasonOrdering]) when it need not be (order is always kept): with K
	// keys in the backlog, with probability about K/OrderingBuckets while
	// K is small against it (1-e^(-K/OrderingBuckets) in general). Size it
	// for the distinct keys a backlog holds: the default holds about 2,600
	// keys at 1 %, 27,600 at 10 %.
	// Optional. Default [DefaultOrderingBuckets] (2^18, 1 MiB). Valid range
	// 1..2^26 (256 MiB); 1 holds every keyed message while any is in the
	// backlog.
	OrderingBuckets int
	// Clock gives the time stamped into the metadata and compared with
	// MaxAge and [MetaNotBefore].
	// Optional. Default the wall clock.
	Clock Clock
	// JetStream publishes diversions and dead letters to their route's
	// subject, awaiting the PubAck, and reaches the server holding
	// PayloadBucket, where the payload of a message too large for the retry
	// and dead-letter streams is kept ([DeadReasonTooLarge]).
	// Optional. Default the Publisher's own, when it has a method
	// JetStream() jetstream.JetStream (a [jsq.Publisher] has); without
	// either, [New] fails.
	JetStream jetstream.JetStream
	// PayloadBucket is the JetStream Object Store bucket that keeps the
	// payload (and, when even that does not fit, the metadata) of a message
	// too large for the retry and dead-letter streams; its dead letter
	// references the objects ([MetaPayloadObject]). [Provision] creates it.
	// Optional. Default DeadLetterTopic + "_payloads", each character
	// other than a letter, digit, '_' or '-' replaced by '_'. Valid range
	// letters, digits, '_' and '-'.
	PayloadBucket string
}

// payloadJetStream is a Publisher that publishes through a JetStream
// context, such as [jsq.Publisher].
type payloadJetStream interface {
	JetStream() jetstream.JetStream
}

// DefaultRetryTopic is the retry stream's name when [Config.RetryTopic]
// is empty.
const DefaultRetryTopic = "floodgate_retry"

// DefaultDeadLetterTopic is the dead-letter stream's name when
// [Config.DeadLetterTopic] is empty.
const DefaultDeadLetterTopic = "floodgate_dead"

func (c *Config) setDefaults() {
	if c.RetryTopic == "" {
		c.RetryTopic = DefaultRetryTopic
	}
	if c.DeadLetterTopic == "" {
		c.DeadLetterTopic = DefaultDeadLetterTopic
	}
	if c.PublishTimeout == 0 {
		c.PublishTimeout = 5 * time.Second
	}
	if c.MaxAttempts == 0 {
		c.MaxAttempts = 10
	}
	if c.MaxAge == 0 {
		c.MaxAge = 72 * time.Hour
	}
	if c.Backoff == nil {
		c.Backoff = DefaultBackoff
	}
	if c.MaxRetryAfter == 0 {
		c.MaxRetryAfter = min(time.Hour, c.MaxAge)
	}
	if c.MaxErrorLen == 0 {
		c.MaxErrorLen = 512
	}
	if c.MaxHistory == 0 {
		c.MaxHistory = 10
	}
	if c.Clock == nil {
		c.Clock = wallClock{}
	}
	if c.OrderingBuckets == 0 {
		c.OrderingBuckets = DefaultOrderingBuckets
	}
	if c.PayloadBucket == "" {
		// A stream name may hold characters a bucket name may not.
		c.PayloadBucket = strings.Map(func(r rune) rune {
			if validBucket(string(r)) {
				return r
			}
			return '_'
		}, c.DeadLetterTopic) + "_payloads"
	}
	if c.Service == "" && c.Source != "" {
		c.Service = ServiceName(c.Source, c.Handler)
	}
	if c.Partner == "" {
		c.Partner = DefaultPartner
	}
	if c.JetStream == nil {
		if p, ok := c.Publisher.(payloadJetStream); ok {
			c.JetStream = p.JetStream()
		}
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
	case c.Publisher == nil:
		return fmt.Errorf("%w: Publisher is required", ErrInvalidConfig)
	case c.JetStream == nil:
		return fmt.Errorf("%w: JetStream is required (or a Publisher with a JetStream() method, such as jsq.Publisher)", ErrInvalidConfig)
	case c.Service == "":
		return fmt.Errorf("%w: Service, or Source (from which it is derived), is required: it names the route, so services sharing RetryTopic never drain each other's messages", ErrInvalidConfig)
	case !headerSafe(c.Service):
		return fmt.Errorf("%w: Service %q must be printable UTF-8 without leading or trailing space", ErrInvalidConfig, c.Service)
	case c.PublishTimeout <= 0:
		return fmt.Errorf("%w: PublishTimeout must be > 0, got %s", ErrInvalidConfig, c.PublishTimeout)
	case c.MaxAttempts < 1:
		return fmt.Errorf("%w: MaxAttempts must be >= 1, got %d", ErrInvalidConfig, c.MaxAttempts)
	case c.MaxAge <= 0:
		return fmt.Errorf("%w: MaxAge must be > 0, got %s", ErrInvalidConfig, c.MaxAge)
	case c.MaxRetryAfter <= 0 || c.MaxRetryAfter > c.MaxAge:
		return fmt.Errorf("%w: MaxRetryAfter must be in (0, MaxAge %s], got %s", ErrInvalidConfig, c.MaxAge, c.MaxRetryAfter)
	case c.MaxErrorLen < 16:
		return fmt.Errorf("%w: MaxErrorLen must be >= 16, got %d", ErrInvalidConfig, c.MaxErrorLen)
	case c.MaxHistory < 1 || c.MaxHistory > 100:
		return fmt.Errorf("%w: MaxHistory must be in 1..100, got %d", ErrInvalidConfig, c.MaxHistory)
	case c.OrderingBuckets < 1 || c.OrderingBuckets > maxOrderingBuckets:
		return fmt.Errorf("%w: OrderingBuckets must be in 1..%d (2^26), got %d", ErrInvalidConfig, maxOrderingBuckets, c.OrderingBuckets)
	}
	return c.validateTopics()
}

// validateTopics checks RetryTopic, DeadLetterTopic and PayloadBucket; it requires
// defaults set. [Provision] uses it too.
func (c *Config) validateTopics() error {
	if c.RetryTopic == c.DeadLetterTopic {
		return fmt.Errorf("%w: RetryTopic and DeadLetterTopic must differ, both %q", ErrInvalidConfig, c.RetryTopic)
	}
	if err := jsq.ValidateStreamName(c.RetryTopic); err != nil {
		return fmt.Errorf("%w: RetryTopic: %w", ErrInvalidConfig, err)
	}
	if err := jsq.ValidateStreamName(c.DeadLetterTopic); err != nil {
		return fmt.Errorf("%w: DeadLetterTopic: %w", ErrInvalidConfig, err)
	}
	if !validBucket(c.PayloadBucket) {
		return fmt.Errorf("%w: PayloadBucket %q must be letters, digits, '_' and '-' (the default is DeadLetterTopic + \"_payloads\")", ErrInvalidConfig, c.PayloadBucket)
	}
	return nil
}

// validBucket reports whether b is a valid Object Store bucket name.
func validBucket(b string) bool {
	if b == "" {
		return false
	}
	for _, r := range b {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}

// DefaultBackoff is the default [Config.Backoff]: 1s after the first failed
// attempt, doubling with each further one, capped at 5m (1s, 2s, 4s, ...,
// 256s, 5m, 5m, ...). No jitter: spreading is left to the drain's rate
// limit. Attempts < 1 give 0.
func DefaultBackoff(attempt int) time.Duration {
	return ExponentialBackoff(time.Second, 5*time.Minute)(attempt)
}

// ExponentialBackoff returns a backoff of base·2^(attempt-1) capped at
// maxDelay, and 0 for attempt < 1. It never overflows.
func ExponentialBackoff(base, maxDelay time.Duration) func(attempt int) time.Duration {
	return func(attempt int) time.Duration {
		if attempt < 1 || base <= 0 {
			return 0
		}
		d := base
		for i := 1; i < attempt && d < maxDelay; i++ {
			if d > math.MaxInt64/2 { // doubling would overflow
				return maxDelay
			}
			d *= 2
		}
		return min(d, maxDelay)
	}
}
