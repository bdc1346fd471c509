package retryqueue

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/floodgate-go/floodgate/internal/jsq"
	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/time/rate"
)

// ErrRunning is returned by [Drainer.Run] when the drainer is already running.
var ErrRunning = errors.New("retryqueue: drainer already running")

// DrainerConfig configures [NewDrainer].
type DrainerConfig struct {
	// JetStream is the JetStream context the drainer consumes with.
	// Required.
	JetStream jetstream.JetStream
	// Queue is the retry queue drained; the drainer dead-letters malformed
	// messages through it and takes its clock and retry topic.
	// Required.
	Queue *Queue
	// Stream is the retry stream.
	// Optional. Default Queue.RetryTopic().
	Stream string
	// Consumer is the durable pull consumer's name on Stream. A work-queue
	// retry stream ([RetryStreamConfig]) admits only this one consumer.
	// Optional. Default "floodgate_drainer__" + Stream.
	Consumer string
	// Handler delivers a drained message: the breaker-guarded handler (the
	// middleware-wrapped delivery). Returning nil means the message's
	// outcome is durable (delivered, diverted again, or dead-lettered) and
	// the drainer acks it; an error makes the drainer nak it with a delay,
	// so JetStream redelivers it. Messages it returns are ignored.
	// Required.
	Handler message.HandlerFunc
	// Gate says how many messages the breaker admits now; the drainer
	// fetches at most that many.
	// Required.
	Gate Gate
	// Rate bounds the drain, in messages per second (a token bucket).
	// Adjustable at run time with [Drainer.SetRate].
	// Optional. Default 50. Valid range > 0, finite.
	Rate float64
	// Burst is the token bucket's size: the largest batch fetched at once.
	// Optional. Default ceil(Rate/10), at least 1. Valid range >= 1.
	Burst int
	// AckWait is the consumer's ack wait: a fetched message not acked or
	// nakked within it is redelivered.
	// Optional. Default 30s. Valid range >= 1s.
	AckWait time.Duration
	// HandlerTimeout is the deadline of the context of each message given to
	// Handler.
	// Optional. Default AckWait/2. Valid range > 0 and < AckWait.
	HandlerTimeout time.Duration
	// PollInterval is how long the drainer waits before looking again when
	// the gate admits nothing or the backlog has nothing eligible, unless
	// [Drainer.Wake] is called first.
	// Optional. Default 100ms. Valid range > 0.
	PollInterval time.Duration
	// NakDelay is the redelivery delay after Handler failed on a message's
	// deliveries-th delivery.
	// Optional. Default 500ms doubling to 30s.
	NakDelay func(deliveries uint64) time.Duration
	// Logger receives errors of acks, naks, fetches and consumer creation.
	// Optional. Default watermill.NopLogger.
	Logger watermill.LoggerAdapter
}

func (c *DrainerConfig) setDefaults() {
	if c.Stream == "" && c.Queue != nil {
		c.Stream = c.Queue.RetryTopic()
	}
	if c.Consumer == "" {
		c.Consumer = "floodgate_drainer__" + c.Stream
	}
	if c.Rate == 0 {
		c.Rate = 50
	}
	if c.Burst == 0 {
		c.Burst = max(1, int(math.Ceil(c.Rate/10)))
	}
	if c.AckWait == 0 {
		c.AckWait = 30 * time.Second
	}
	if c.HandlerTimeout == 0 {
		c.HandlerTimeout = c.AckWait / 2
	}
	if c.PollInterval == 0 {
		c.PollInterval = 100 * time.Millisecond
	}
	if c.NakDelay == nil {
		c.NakDelay = jsq.ExponentialDelay{}.WaitTime
	}
	if c.Logger == nil {
		c.Logger = watermill.NopLogger{}
	}
}

// Validate reports the first invalid field, wrapping [ErrInvalidConfig].
func (c DrainerConfig) Validate() error {
	switch {
	case c.JetStream == nil:
		return fmt.Errorf("%w: JetStream is required", ErrInvalidConfig)
	case c.Queue == nil:
		return fmt.Errorf("%w: Queue is required", ErrInvalidConfig)
	case c.Handler == nil:
		return fmt.Errorf("%w: Handler is required", ErrInvalidConfig)
	case c.Gate == nil:
		return fmt.Errorf("%w: Gate is required", ErrInvalidConfig)
	case !(c.Rate > 0) || math.IsInf(c.Rate, 0):
		return fmt.Errorf("%w: Rate must be > 0 and finite, got %v", ErrInvalidConfig, c.Rate)
	case c.Burst < 1:
		return fmt.Errorf("%w: Burst must be >= 1, got %d", ErrInvalidConfig, c.Burst)
	case c.AckWait < time.Second:
		return fmt.Errorf("%w: AckWait must be >= 1s, got %s", ErrInvalidConfig, c.AckWait)
	case c.HandlerTimeout <= 0 || c.HandlerTimeout >= c.AckWait:
		return fmt.Errorf("%w: HandlerTimeout must be > 0 and < AckWait (%s), got %s", ErrInvalidConfig, c.AckWait, c.HandlerTimeout)
	case c.PollInterval <= 0:
		return fmt.Errorf("%w: PollInterval must be > 0, got %s", ErrInvalidConfig, c.PollInterval)
	}
	if err := jsq.ValidateTopic(c.Stream); err != nil {
		return fmt.Errorf("%w: Stream: %w", ErrInvalidConfig, err)
	}
	if err := jsq.ValidateTopic(c.Consumer); err != nil {
		return fmt.Errorf("%w: Consumer: %w", ErrInvalidConfig, err)
	}
	return nil
}

// DrainStats are the drainer's counters since [NewDrainer].
type DrainStats struct {
	// Fetched counts messages fetched from the retry stream.
	Fetched uint64
	// Drained counts messages the handler returned nil for and whose ack the
	// server confirmed.
	Drained uint64
	// Redelivered counts messages the handler failed (error or panic) and
	// the drainer nakked with a delay.
	Redelivered uint64
	// Deferred counts fetches of messages whose [MetaNotBefore] had not come
	// yet, nakked with a delay until then. They do not count as attempts.
	Deferred uint64
	// DeadLettered counts malformed messages the drainer dead-lettered
	// itself instead of handing them to the handler.
	DeadLettered uint64
	// AckErrors counts acks and naks the server did not confirm; those
	// messages are redelivered after AckWait (a duplicate, not a loss).
	AckErrors uint64
	// GateClosed counts looks at the gate that found no budget.
	GateClosed uint64
}

// Drainer moves the retry backlog back through the breaker-guarded handler,
// only as fast as the breaker admits and the rate limit allows.
//
// Each round it asks the [Gate] for a budget (waiting PollInterval, or until
// [Drainer.Wake], while it is 0), takes at most that many tokens from a
// token bucket of [DrainerConfig.Rate] per second, fetches at most that many
// messages from its durable pull consumer without waiting (FetchNoWait, so
// nothing is prefetched and nothing sits delivered while the breaker is
// open), and runs the handler on the eligible ones concurrently, waiting
// for all of them before the next round. A message whose [MetaNotBefore] is
// in the future is nakked with a delay until then, without running the
// handler or using a token. A message is acked (and the ack confirmed)
// only after the handler returned nil for it.
//
// Its methods are safe for concurrent use; Run runs once at a time.
type Drainer struct {
	cfg     DrainerConfig
	lim     *rate.Limiter
	wake    chan struct{}
	running atomic.Bool

	fetched, drained, redelivered, deferred, dead, ackErrors, gateClosed atomic.Uint64
}

// NewDrainer returns a [Drainer]. It returns an error wrapping "invalid
// config" and [ErrInvalidConfig] naming the field and its allowed range.
func NewDrainer(cfg DrainerConfig) (*Drainer, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("invalid config: %w", err)
	}
	return &Drainer{
		cfg:  cfg,
		lim:  rate.NewLimiter(rate.Limit(cfg.Rate), cfg.Burst),
		wake: make(chan struct{}, 1),
	}, nil
}

// ConsumerConfig returns the durable consumer the drainer creates or updates
// on its stream: explicit ack, deliver all, AckWait, MaxDeliver unlimited
// (giving up is the queue's decision: MaxAttempts, MaxAge), MaxAckPending
// unlimited (messages waiting out their not-before are ack-pending on the
// server and must not stall the drain).
func (d *Drainer) ConsumerConfig() jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Name:          d.cfg.Consumer,
		Durable:       d.cfg.Consumer,
		AckPolicy:     jetstream.AckExplicitPolicy,
		DeliverPolicy: jetstream.DeliverAllPolicy,
		AckWait:       d.cfg.AckWait,
		MaxDeliver:    -1,
		MaxAckPending: -1,
	}
}

// Stream returns the retry stream name.
func (d *Drainer) Stream() string { return d.cfg.Stream }

// Consumer returns the durable consumer name.
func (d *Drainer) Consumer() string { return d.cfg.Consumer }

// Wake makes a waiting drainer look at the gate again now; call it from a
// breaker state listener. It never blocks.
func (d *Drainer) Wake() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// SetRate changes the drain rate limit to r messages per second (r > 0 and
// finite; other values are ignored). The burst stays.
func (d *Drainer) SetRate(r float64) {
	if r > 0 && !math.IsInf(r, 0) {
		d.lim.SetLimit(rate.Limit(r))
	}
}

// Rate returns the current drain rate limit in messages per second.
func (d *Drainer) Rate() float64 { return float64(d.lim.Limit()) }

// Stats returns the counters.
func (d *Drainer) Stats() DrainStats {
	return DrainStats{
		Fetched:      d.fetched.Load(),
		Drained:      d.drained.Load(),
		Redelivered:  d.redelivered.Load(),
		Deferred:     d.deferred.Load(),
		DeadLettered: d.dead.Load(),
		AckErrors:    d.ackErrors.Load(),
		GateClosed:   d.gateClosed.Load(),
	}
}

// Backlog returns the retry backlog: messages on the drainer's consumer not
// yet delivered plus delivered and not yet acked (see [Depth]). It fails if
// the consumer does not exist yet (before the first Run).
func (d *Drainer) Backlog(ctx context.Context) (uint64, error) {
	return Depth(ctx, d.cfg.JetStream, d.cfg.Stream, d.cfg.Consumer)
}

// Run creates or updates the durable consumer (retrying while the server is
// unreachable or the stream missing) and drains until ctx is done. It then
// waits for the handlers in flight (bounded by HandlerTimeout) and their
// acks, and returns nil. It returns [ErrRunning] if already running.
func (d *Drainer) Run(ctx context.Context) error {
	if !d.running.CompareAndSwap(false, true) {
		return ErrRunning
	}
	defer d.running.Store(false)
	var cons jetstream.Consumer
	for ctx.Err() == nil {
		if cons == nil {
			c, err := d.cfg.JetStream.CreateOrUpdateConsumer(ctx, d.cfg.Stream, d.ConsumerConfig())
			if err != nil {
				if ctx.Err() == nil {
					d.cfg.Logger.Error("retryqueue: create drain consumer", err, watermill.LogFields{"stream": d.cfg.Stream, "consumer": d.cfg.Consumer})
				}
				d.sleep(ctx, d.cfg.PollInterval)
				continue
			}
			cons = c
		}
		if err := d.round(ctx, cons); err != nil {
			if errors.Is(err, jetstream.ErrConsumerNotFound) || errors.Is(err, jetstream.ErrConsumerDeleted) {
				cons = nil
			}
			if ctx.Err() == nil {
				d.cfg.Logger.Error("retryqueue: fetch", err, watermill.LogFields{"stream": d.cfg.Stream, "consumer": d.cfg.Consumer})
			}
			d.sleep(ctx, d.cfg.PollInterval)
		}
	}
	return nil
}

// drained is the context key marking a drained message's context.
type drainedKey struct{}

// FromDrain reports whether ctx is the context of a message the drainer
// handed to its handler (as opposed to live traffic).
func FromDrain(ctx context.Context) bool {
	v, _ := ctx.Value(drainedKey{}).(bool)
	return v
}

// round does one gate-budget-fetch-handle round. It sleeps itself when there
// is nothing to do and returns only fetch errors.
func (d *Drainer) round(ctx context.Context, cons jetstream.Consumer) error {
	budget := d.cfg.Gate.Budget()
	if budget <= 0 {
		d.gateClosed.Add(1)
		d.sleep(ctx, d.cfg.PollInterval)
		return nil
	}
	tokens := d.lim.Tokens()
	if tokens < 1 {
		wait := time.Duration((1 - tokens) / float64(d.lim.Limit()) * float64(time.Second))
		d.sleep(ctx, max(wait, time.Millisecond))
		return nil
	}
	n := min(budget, d.cfg.Burst, int(tokens))
	batch, err := cons.FetchNoWait(n)
	if err != nil {
		return err
	}
	var msgs []jetstream.Msg
	for m := range batch.Messages() {
		msgs = append(msgs, m)
	}
	if err := batch.Error(); err != nil && len(msgs) == 0 {
		return err
	}
	if len(msgs) == 0 {
		d.sleep(ctx, d.cfg.PollInterval)
		return nil
	}
	d.fetched.Add(uint64(len(msgs)))

	now := d.cfg.Queue.cfg.Clock.Now()
	type item struct {
		jm jetstream.Msg
		wm *message.Message
	}
	eligible := make([]item, 0, len(msgs))
	for _, jm := range msgs {
		wm := jsq.Unmarshal(jm)
		if nb, ok := NotBefore(wm); ok && nb.After(now) {
			if err := jm.NakWithDelay(nb.Sub(now)); err != nil {
				d.ackErrors.Add(1)
				d.logAckError("nak (not before)", err, wm)
			}
			d.deferred.Add(1)
			continue
		}
		eligible = append(eligible, item{jm, wm})
	}
	if len(eligible) == 0 {
		return nil
	}
	d.lim.ReserveN(time.Now(), len(eligible))
	var wg sync.WaitGroup
	for _, it := range eligible {
		wg.Go(func() { d.handle(ctx, it.jm, it.wm) })
	}
	wg.Wait()
	return nil
}

// handle runs the handler on one message and acks or naks it.
func (d *Drainer) handle(ctx context.Context, jm jetstream.Msg, wm *message.Message) {
	base := context.WithoutCancel(ctx)
	if why, bad := d.cfg.Queue.Malformed(wm); bad {
		err := d.cfg.Queue.DeadLetter(base, wm, DeadReasonMalformed, fmt.Errorf("%w: %s", ErrMalformed, why))
		if d.settle(base, jm, wm, err) {
			d.dead.Add(1)
		}
		return
	}
	hctx, cancel := context.WithTimeout(context.WithValue(base, drainedKey{}, true), d.cfg.HandlerTimeout)
	defer cancel()
	wm.SetContext(hctx)
	if d.settle(base, jm, wm, d.call(wm)) {
		d.drained.Add(1)
	}
}

// call runs the handler, turning a panic into an error.
func (d *Drainer) call(wm *message.Message) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("retryqueue: handler panic: %v", r)
		}
	}()
	_, err = d.cfg.Handler(wm)
	return err
}

// settle acks jm (confirmed) if err is nil, else naks it with NakDelay. It
// reports whether the ack was confirmed.
func (d *Drainer) settle(ctx context.Context, jm jetstream.Msg, wm *message.Message, err error) bool {
	if err == nil {
		actx, cancel := context.WithTimeout(ctx, d.cfg.Queue.cfg.PublishTimeout)
		defer cancel()
		if err := jm.DoubleAck(actx); err != nil {
			d.ackErrors.Add(1)
			d.logAckError("ack", err, wm)
			return false
		}
		return true
	}
	var delivered uint64 = 1
	if md, mdErr := jm.Metadata(); mdErr == nil {
		delivered = md.NumDelivered
	}
	d.redelivered.Add(1)
	if nerr := jm.NakWithDelay(d.cfg.NakDelay(delivered)); nerr != nil {
		d.ackErrors.Add(1)
		d.logAckError("nak", nerr, wm)
	}
	return false
}

func (d *Drainer) logAckError(what string, err error, wm *message.Message) {
	d.cfg.Logger.Error("retryqueue: drain "+what, err, watermill.LogFields{"message_uuid": wm.UUID, "stream": d.cfg.Stream})
}

// sleep waits for dur, a Wake, or ctx.
func (d *Drainer) sleep(ctx context.Context, dur time.Duration) {
	t := time.NewTimer(dur)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-d.wake:
	case <-t.C:
	}
}
