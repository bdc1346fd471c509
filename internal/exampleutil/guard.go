package exampleutil

import (
	"context"
	"fmt"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/middleware"
	"github.com/floodgate-go/floodgate/retryqueue"
)

// GuardConfig configures [NewGuard].
type GuardConfig struct {
	// NATS carries the retry and dead-letter streams. Required.
	NATS *NATS
	// Breaker guards the partner. Required.
	Breaker *breaker.Breaker
	// Deliver delivers one message to the partner; it runs under the
	// middleware's deadline (msg.Context()). Required.
	Deliver message.HandlerFunc
	// Source and Handler are the topic the guarded handler consumes and its
	// handler name: they name the retry queue's route
	// ([retryqueue.Config.Source]). Source is required.
	Source, Handler string
	// RetryTopic and DeadLetterTopic name the queue's streams. Optional.
	// Default: the retryqueue defaults. Use a per-run suffix so runs on an
	// external server do not share a backlog.
	RetryTopic, DeadLetterTopic string
	// Timeout bounds one delivery attempt ([middleware.Config.Timeout]).
	// Optional. Default the middleware's (30 s).
	Timeout time.Duration
	// DrainRate bounds the drain, in messages per second
	// ([retryqueue.DrainerConfig.Rate]). Optional. Default the drainer's
	// (50/s).
	DrainRate float64
	// OnEvent, when set, also sees every middleware event, after
	// [Counters.OnEvent]. Optional.
	OnEvent func(middleware.Event)
	// OnTransition, when set, also sees every breaker transition, after the
	// trip count and the drainer's wake-up. Optional.
	OnTransition func(breaker.Transition)
	// Logger receives failures to divert, dead-letter, ack or fetch.
	// Optional. Default watermill.NopLogger.
	Logger watermill.LoggerAdapter
}

// Guard is a breaker-guarded delivery: Handler is the middleware-wrapped
// Deliver, for the router; Drainer feeds the retry backlog through the same
// Handler while the breaker admits. Create it with [NewGuard]; run Drainer
// and call [Guard.Close] when done.
type Guard struct {
	// Handler is the guarded delivery handler.
	Handler message.HandlerFunc
	// Queue is the retry queue.
	Queue *retryqueue.Queue
	// Drainer drains the retry queue through Handler; the caller runs it.
	Drainer *retryqueue.Drainer
	// Counters tally the middleware's events and the breaker's trips.
	Counters *Counters

	remove func()
}

// Validate reports whether c, with defaults applied to its zero fields, is
// valid. It does not modify c. The error wraps [ErrInvalidConfig] and names
// the missing required field. The optional fields are passed on as they are
// (zero meaning the component's default) and checked by the components they
// configure, whose errors [NewGuard] returns.
func (c GuardConfig) Validate() error {
	switch {
	case c.NATS == nil:
		return fmt.Errorf("%w: GuardConfig.NATS is required", ErrInvalidConfig)
	case c.Breaker == nil:
		return fmt.Errorf("%w: GuardConfig.Breaker is required", ErrInvalidConfig)
	case c.Deliver == nil:
		return fmt.Errorf("%w: GuardConfig.Deliver is required", ErrInvalidConfig)
	case c.Source == "":
		return fmt.Errorf("%w: GuardConfig.Source is required", ErrInvalidConfig)
	}
	return nil
}

// NewGuard provisions the retry and dead-letter streams on cfg.NATS and
// wires the middleware, the drainer (gated by [middleware.DrainGate]) and a
// breaker listener that counts trips and wakes the drainer. It returns
// "invalid config: ..." wrapping [ErrInvalidConfig] for a missing field, or
// the provisioning or construction error.
func NewGuard(ctx context.Context, cfg GuardConfig) (*Guard, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("invalid config: %w", err)
	}
	logger := cfg.Logger
	if logger == nil {
		logger = watermill.NopLogger{}
	}
	qcfg := retryqueue.Config{
		Publisher:       cfg.NATS.Publisher,
		Source:          cfg.Source,
		Handler:         cfg.Handler,
		RetryTopic:      cfg.RetryTopic,
		DeadLetterTopic: cfg.DeadLetterTopic,
	}
	if err := cfg.NATS.ProvisionQueue(ctx, qcfg); err != nil {
		return nil, err
	}
	queue, err := retryqueue.New(qcfg)
	if err != nil {
		return nil, err
	}
	c := &Counters{}
	onEvent := c.OnEvent
	if cfg.OnEvent != nil {
		onEvent = func(ev middleware.Event) { c.OnEvent(ev); cfg.OnEvent(ev) }
	}
	guard, err := middleware.New(middleware.Config{
		Breaker: cfg.Breaker,
		Queue:   queue,
		Timeout: cfg.Timeout,
		OnEvent: onEvent,
		Logger:  logger,
	})
	if err != nil {
		return nil, err
	}
	g := &Guard{Handler: guard(cfg.Deliver), Queue: queue, Counters: c}
	g.Drainer, err = retryqueue.NewDrainer(retryqueue.DrainerConfig{
		JetStream: cfg.NATS.JetStream,
		Queue:     queue,
		Handler:   g.Handler,
		Gate:      middleware.DrainGate(cfg.Breaker),
		Rate:      cfg.DrainRate,
		Logger:    logger,
	})
	if err != nil {
		return nil, err
	}
	g.remove = cfg.Breaker.AddListener(func(t breaker.Transition) {
		c.OnTransition(t)
		g.Drainer.Wake()
		if cfg.OnTransition != nil {
			cfg.OnTransition(t)
		}
	})
	return g, nil
}

// Backlog returns the retry backlog, or -1 when it cannot be read (before
// the drainer's first Run, or with the server unreachable).
func (g *Guard) Backlog(ctx context.Context) int {
	n, err := g.Drainer.Backlog(ctx)
	if err != nil {
		return -1
	}
	return int(n)
}

// Close removes the breaker listener. It does not stop the drainer (cancel
// its Run context) or delete streams ([NATS.Close]).
func (g *Guard) Close() { g.remove() }
