package floodgate

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/jsq"
	"github.com/floodgate-go/floodgate/metrics"
	"github.com/floodgate-go/floodgate/middleware"
	"github.com/floodgate-go/floodgate/partner"
	"github.com/floodgate-go/floodgate/retryqueue"
)

// ErrInvalidConfig is wrapped by every error [Config.Validate] and [New]
// return for a bad configuration; the message names the field and its
// allowed range.
var ErrInvalidConfig = errors.New("floodgate: invalid config")

// Floodgate is one guarded handler with everything it needs: a breaker and
// a bulkhead per partner ([partner.Registry]), the retry queue, the
// per-partner drain and its feedback, and optional metrics. Build it with
// [New], which also adds it to a router. Its methods are safe for
// concurrent use.
type Floodgate struct {
	cfg      Config
	partners *partner.Registry
	queue    *retryqueue.Queue
	drain    *retryqueue.PartnerDrainer
	handler  message.HandlerFunc
	pub      *jsq.Publisher
	metrics  *metrics.Metrics // nil without Config.Metrics
}

// DrainHandlerName is the name of the router handler that runs the drain
// of the guarded handler named name: name + "_drain".
func DrainHandlerName(name string) string { return name + "_drain" }

// drainTopic is the topic the drain handler "subscribes" to: only a label
// in the router's logs.
const drainTopic = "floodgate.drain"

// New builds a Floodgate from cfg and adds two handlers to r: cfg.Name,
// consuming cfg.Topic with cfg.Subscriber through the guarding middleware
// into cfg.Deliver, and [DrainHandlerName](cfg.Name), which runs the
// per-partner drain of the retry backlog through the same guarded handler.
// Both start with r.Run and stop with r.Close, which waits for the drain's
// messages in flight as it waits for any handler's. New provisions the
// retry and dead-letter streams (ctx bounds that) and starts no goroutine.
// Call it before r.Run; on a router already running, the two handlers
// start only once you call r.RunHandlers (Watermill's rule for handlers
// added late). Several Floodgates may share a router, each with its own
// Name.
//
// It returns an error wrapping [ErrInvalidConfig] (or the invalid-config
// error of the package a field configures: partner, middleware,
// retryqueue), naming the field, or the error of provisioning the streams.
// A Name whose handler (or drain handler) the router already holds is
// such an error, not Watermill's panic.
//
// Call New before r.Run (or call r.RunHandlers after it), and not while
// another goroutine adds handlers to r.
//
// The drain runs as a router handler, not a router plugin, because a
// plugin only hears of Run: a handler is stopped by Close, and Close waits
// for it, so the drain never outlives the router nor stops before it.
func New(ctx context.Context, r *message.Router, cfg Config) (*Floodgate, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("invalid config: %w", err)
	}
	if r == nil {
		return nil, fmt.Errorf("invalid config: %w: the router is nil", ErrInvalidConfig)
	}
	// Watermill's AddHandler panics on a name it holds: refuse it here,
	// before anything is built.
	handlers := r.Handlers()
	for _, name := range []string{cfg.Name, DrainHandlerName(cfg.Name)} {
		if _, ok := handlers[name]; ok {
			return nil, fmt.Errorf("invalid config: %w: Name %q: the router already has a handler named %q (each floodgate on a router needs its own Name)", ErrInvalidConfig, cfg.Name, name)
		}
	}
	logger := cfg.loggerOrNop()
	f := &Floodgate{cfg: cfg}
	if err := f.build(ctx, logger); err != nil {
		if f.partners != nil {
			f.partners.Close()
		}
		if f.pub != nil {
			_ = f.pub.Close()
		}
		return nil, err
	}
	r.AddConsumerHandler(cfg.Name, cfg.Topic, cfg.Subscriber, func(msg *message.Message) error {
		_, err := f.handler(msg)
		return err
	})
	r.AddConsumerHandler(DrainHandlerName(cfg.Name), drainTopic, &drainSubscriber{f: f}, func(*message.Message) error { return nil })
	return f, nil
}

// build makes every part of f from f.cfg; New closes what it made when it
// fails.
func (f *Floodgate) build(ctx context.Context, logger watermill.LoggerAdapter) error {
	pub, err := jsq.NewPublisher(jsq.PublisherConfig{Conn: f.cfg.JetStream.Conn()})
	if err != nil {
		return err
	}
	f.pub = pub
	qcfg := f.cfg.Queue
	qcfg.Publisher, qcfg.JetStream, qcfg.Source, qcfg.Handler = pub, f.cfg.JetStream, f.cfg.Topic, f.cfg.Name
	if err := qcfg.Validate(); err != nil {
		return field("Queue", err, retryqueue.ErrInvalidConfig)
	}
	if err := retryqueue.Provision(ctx, f.cfg.JetStream, qcfg); err != nil {
		return err
	}
	if f.queue, err = retryqueue.New(qcfg); err != nil {
		return field("Queue", err, retryqueue.ErrInvalidConfig)
	}
	var fleet *partner.FleetConfig
	if f.cfg.Fleet != nil {
		fleet = &partner.FleetConfig{Service: f.queue.Service(), Template: *f.cfg.Fleet}
	}
	f.partners, err = partner.New(partner.Config{
		Fleet:        fleet,
		Template:     f.cfg.Partner,
		Override:     f.cfg.Override,
		MaxPartners:  f.cfg.MaxPartners,
		IdleAfter:    f.cfg.IdleAfter,
		HasBacklog:   f.hasBacklog,
		OnTransition: f.onTransition,
		OnEvict:      func(p *partner.Partner) { f.metrics.Forget(p.Token()) },
	})
	if err != nil {
		return field("Partner", err, partner.ErrInvalidConfig)
	}
	key := f.cfg.PartnerKey
	if key == nil {
		key = func(*message.Message) string { return "" }
	}
	guard, err := middleware.New(middleware.Config{
		Partners:        f.partners,
		PartnerKey:      key,
		DefaultPartner:  f.cfg.defaultPartner(),
		Queue:           f.queue,
		Timeout:         f.cfg.Timeout,
		MaxMetadataSize: f.cfg.MaxMetadataSize,
		OnEvent:         f.onEvent,
		Logger:          logger,
	})
	if err != nil {
		// MaxMetadataSize is the one field of f.cfg the middleware
		// checks (Validate checked it already).
		return field("MaxMetadataSize", err, middleware.ErrInvalidConfig)
	}
	deliver := f.cfg.Deliver
	f.handler = guard(func(msg *message.Message) ([]*message.Message, error) { return nil, deliver(msg) })
	dcfg := f.cfg.Drain
	dcfg.JetStream, dcfg.Queue, dcfg.Handler, dcfg.Gate = f.cfg.JetStream, f.queue, f.handler, middleware.PartnerDrainGate(f.partners)
	if dcfg.Drainer.Logger == nil {
		dcfg.Drainer.Logger = logger
	}
	if f.drain, err = retryqueue.NewPartnerDrainer(dcfg); err != nil {
		return field("Drain", err, retryqueue.ErrInvalidConfig)
	}
	if f.cfg.Metrics == nil {
		return nil
	}
	// Last, so that a failure before leaves nothing registered.
	if f.metrics, err = metrics.New(f.cfg.Metrics, metrics.Options{Service: f.queue.Service()}); err != nil {
		return err
	}
	return f.watch()
}

// field wraps err, when it is an invalid-configuration error of the package
// (inner) a field of Config configures, with that field's name.
func field(name string, err, inner error) error {
	if errors.Is(err, inner) {
		return &fieldError{field: name, err: err}
	}
	return err
}

// fieldError is an invalid-configuration error of a package a Config field
// configures: it matches [ErrInvalidConfig] and the package's own error.
type fieldError struct {
	field string
	err   error
}

func (e *fieldError) Error() string {
	return ErrInvalidConfig.Error() + ": Config." + e.field + ": " + strings.TrimPrefix(e.err.Error(), "invalid config: ")
}

func (e *fieldError) Unwrap() []error { return []error{ErrInvalidConfig, e.err} }

// onEvent feeds a live delivery's outcome to its partner's drain rate,
// then the metrics and the user's hook.
func (f *Floodgate) onEvent(ev middleware.Event) {
	if ev.Admitted && ev.PartnerKey != "" {
		failed := ev.Action == middleware.Diverted && ev.Reason == string(retryqueue.ReasonFailure)
		f.drain.Observe(ev.PartnerKey, ev.UUID, failed, ev.Latency)
	}
	f.metrics.ObserveEvent(ev)
	if f.cfg.OnEvent != nil {
		f.cfg.OnEvent(ev)
	}
}

// watch attaches the partners, the queue and the drain to the metrics.
func (f *Floodgate) watch() error {
	if f.metrics == nil {
		return nil
	}
	if err := f.metrics.WatchRegistry(f.partners); err != nil {
		return err
	}
	if err := f.metrics.WatchQueue(f.queue); err != nil {
		return err
	}
	return f.metrics.WatchDrains(func(context.Context) []metrics.DrainSample {
		ps := f.drain.Partners()
		out := make([]metrics.DrainSample, 0, len(ps))
		for _, p := range ps {
			out = append(out, metrics.DrainSample{
				Partner: p.Token, Rate: p.Rate, Backlog: p.Backlog, HasBacklog: true,
				Stats: retryqueue.DrainStats{Drained: p.Drained},
			})
		}
		return out
	})
}

// hasBacklog keeps a partner with a backlog from idle eviction.
func (f *Floodgate) hasBacklog(p *partner.Partner) bool {
	return f.drain != nil && f.drain.HasBacklog(p.Key())
}

// onTransition wakes the partner's drain on every transition of its
// breaker (half-open: probes may come from the backlog; closed: drain).
func (f *Floodgate) onTransition(p *partner.Partner, t breaker.Transition) {
	if f.drain != nil {
		f.drain.Wake(p.Key())
	}
	f.metrics.ObserveTransition(p, t)
	if f.cfg.OnTransition != nil {
		f.cfg.OnTransition(p, t)
	}
}

// Handler returns the guarded handler: the middleware around Config.Deliver,
// as the router runs it for live messages and the drain for backlog ones.
// Use it to guard deliveries outside the router (tests, a second subscriber).
func (f *Floodgate) Handler() message.HandlerFunc { return f.handler }

// Partners returns the partner registry: each partner's breaker, for status
// pages and operator actions ([partner.Registry.With]).
func (f *Floodgate) Partners() *partner.Registry { return f.partners }

// Queue returns the retry queue (its streams, [retryqueue.Queue.Replay]).
func (f *Floodgate) Queue() *retryqueue.Queue { return f.queue }

// Drain returns the per-partner drain, for its per-partner status
// ([retryqueue.PartnerDrainer.Partners]).
func (f *Floodgate) Drain() *retryqueue.PartnerDrainer { return f.drain }

// Close releases what New built beyond the router's handlers: every
// partner's breaker timers and the diversion publisher (not the
// JetStream connection, which is the caller's). Call it after the router's
// Close returned, or let the process exit. It is idempotent.
func (f *Floodgate) Close() error {
	f.partners.Close()
	return f.pub.Close()
}

// drainSubscriber runs the drain as a router handler's subscription: the
// router starts it with Run and stops it (cancelling ctx, or calling Close)
// with Close, and waits until its channel closes, which is once the drain
// has finished its messages in flight. It never yields a message.
type drainSubscriber struct {
	f       *Floodgate
	mu      sync.Mutex
	stop    context.CancelFunc
	stopped chan struct{}
}

func (s *drainSubscriber) Subscribe(ctx context.Context, _ string) (<-chan *message.Message, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped != nil {
		return nil, errors.New("floodgate: the drain runs once")
	}
	ctx, s.stop = context.WithCancel(ctx)
	s.stopped = make(chan struct{})
	out := make(chan *message.Message)
	go func() {
		defer close(s.stopped)
		defer close(out)
		if err := s.f.drain.Run(ctx); err != nil && ctx.Err() == nil {
			s.f.cfg.loggerOrNop().Error("floodgate: drain stopped", err, watermill.LogFields{"handler": s.f.cfg.Name})
		}
	}()
	return out, nil
}

func (s *drainSubscriber) Close() error {
	s.mu.Lock()
	stop, stopped := s.stop, s.stopped
	s.mu.Unlock()
	if stop != nil {
		stop()
		<-stopped
	}
	return nil
}
