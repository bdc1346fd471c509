package middleware

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/partner"
	"github.com/floodgate-go/floodgate/retryqueue"
)

// New returns the floodgate middleware for cfg. It fails with an error
// wrapping [ErrInvalidConfig] when a required field is missing, Breaker and
// Partners are both set, or a value is out of range.
//
// The returned middleware is safe for concurrent use by any number of
// handler goroutines; all its state lives in the breaker (or the partner
// registry) and the queue.
func New(cfg Config) (message.HandlerMiddleware, error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("invalid config: %w", err)
	}
	g := &guard{cfg: cfg, reg: cfg.Partners}
	if cfg.Breaker != nil {
		bc := cfg.Breaker.Config()
		g.clock, g.classify = bc.Clock, bc.Classifier
		g.key = cfg.Queue.Partner()
		g.token = partner.Token(g.key)
	}
	return g.wrap, nil
}

type guard struct {
	cfg Config
	reg *partner.Registry // per-partner mode; nil in single-partner mode

	// Single-partner mode only.
	clock    breaker.Clock               // the breaker's, so latency is judged on its time
	classify func(error) breaker.Outcome // the breaker's Classifier; nil: every error a failure
	key      string                      // the queue's partner key: the route
	token    string                      // its token, for Event.Partner
}

// call is one message's admission: the partner key whose route its
// diversions and dead letters take, the clock and Classifier of the breaker
// that guards it, and the permit (single-partner mode) or lease
// (per-partner mode) to report its outcome with. Exactly one of permit and
// lease is set; the zero one ignores reports.
type call struct {
	key      string
	clock    breaker.Clock
	classify func(error) breaker.Outcome
	permit   breaker.Permit
	lease    partner.Lease
}

func (c *call) isProbe() bool { return c.permit.IsProbe() || c.lease.IsProbe() }

func (c *call) recordAt(now time.Time, o breaker.Outcome, latency time.Duration) {
	c.permit.RecordAt(now, o, latency)
	c.lease.RecordAt(now, o, latency)
}

func (c *call) cancel() {
	c.permit.Cancel()
	c.lease.Cancel()
}

// fate is what becomes of a message whose handler returned an error.
type fate int

const (
	fateRetry        fate = iota // diverted for failure, attempt counted
	fateNotAttempted             // diverted as not attempted, no attempt counted
	fatePermanent                // dead-lettered as permanent
)

func (g *guard) wrap(h message.HandlerFunc) message.HandlerFunc {
	return func(msg *message.Message) ([]*message.Message, error) {
		ev := Event{UUID: msg.UUID, Partner: g.token}
		c := call{key: g.key, clock: g.clock, classify: g.classify}
		var noKey error // why a message has no partner (per-partner mode)
		if g.reg != nil {
			c.key, noKey = g.partnerKey(msg)
		}
		if ctx := msg.Context(); ctx.Err() != nil {
			// Given up before admission (the subscriber's ack deadline
			// passed while the message waited, or the router is closing):
			// no partner call, nothing counted by the breaker, nothing
			// made durable that an ignored ack would duplicate. The broker
			// redelivers it, unless this is its last delivery.
			if noKey == nil {
				ev.Partner = g.tokenOf(c.key)
			}
			if err, last := g.lastDelivery(msg, ev, c.key, "admit", context.Cause(ctx)); last {
				return nil, err
			}
			ev.Action, ev.Err = Nacked, context.Cause(ctx)
			g.emit(ev)
			return nil, fmt.Errorf("floodgate: message %s: context done before admission: %w", msg.UUID, ev.Err)
		}
		if noKey != nil {
			return nil, g.deadLetter(msg, ev, "", DeadReasonNoPartner, noKey)
		}
		if reason, bad := g.cfg.Queue.Malformed(msg); bad {
			ev.Partner = g.tokenOf(c.key)
			return nil, g.deadLetter(msg, ev, c.key, retryqueue.DeadReasonMalformed, fmt.Errorf("%w: %s", retryqueue.ErrMalformed, reason))
		}

		// Per-key ordering: the key still has messages in the backlog, so
		// this one queues behind them (never true for drained messages).
		if g.cfg.Queue.Holds(msg) {
			ev.Partner = g.tokenOf(c.key)
			return nil, g.divert(msg, ev, c.key, retryqueue.ReasonOrdering, "", nil)
		}

		start, err := g.admit(&c, &ev)
		if err != nil {
			return nil, g.refused(msg, ev, c.key, err)
		}

		ev.Admitted, ev.Probe = true, c.isProbe()
		out, herr, f := g.run(h, msg, &c, start, &ev)
		if herr == nil {
			ev.Action = Delivered
			g.emit(ev)
			return out, nil
		}
		ev.Err = herr
		switch f {
		case fateNotAttempted:
			return nil, g.divert(msg, ev, c.key, retryqueue.ReasonNotAttempted, "", herr)
		case fatePermanent:
			return nil, g.deadLetter(msg, ev, c.key, retryqueue.DeadReasonPermanent, herr)
		}
		return nil, g.divert(msg, ev, c.key, retryqueue.ReasonFailure, "", herr)
	}
}

// admit asks the breaker (single-partner mode) or the partner registry for
// a permit or lease for c, and returns the admission time on the breaker's
// clock. In per-partner mode it sets ev.Partner, and c's clock and
// Classifier to the partner's.
func (g *guard) admit(c *call, ev *Event) (start time.Time, err error) {
	if g.reg == nil {
		start = c.clock.Now()
		c.permit, err = g.cfg.Breaker.AllowAt(start)
		return start, err
	}
	p, lease, err := g.reg.Acquire(c.key)
	if p == nil {
		if !errors.Is(err, partner.ErrNoKey) {
			ev.Partner = g.tokenOf(c.key)
		}
		return start, err
	}
	ev.Partner = p.Token()
	c.lease, c.clock, c.classify = lease, p.Clock(), p.Classifier()
	if err == nil {
		start = c.clock.Now()
	}
	return start, err
}

// refused settles a message that was not admitted: the breaker rejected it
// (diverted "open", "probe-limit" or "ramp"), or the partner registry did
// (see the package doc's table).
func (g *guard) refused(msg *message.Message, ev Event, key string, err error) error {
	reason := retryqueue.ReasonOpen
	switch {
	case errors.Is(err, partner.ErrBulkheadFull):
		return g.divert(msg, ev, key, retryqueue.ReasonNotAttempted, ReasonBulkhead, err)
	case errors.Is(err, partner.ErrPartnerLimit):
		return g.divert(msg, ev, key, retryqueue.ReasonNotAttempted, ReasonPartnerLimit, err)
	case errors.Is(err, partner.ErrNoKey):
		return g.deadLetter(msg, ev, key, DeadReasonNoPartner, fmt.Errorf("%w: %w", ErrNoPartner, err))
	case errors.Is(err, partner.ErrKeyTooLong):
		return g.deadLetter(msg, ev, key, DeadReasonPartnerKey, err)
	case errors.Is(err, partner.ErrInvalidConfig):
		g.cfg.Logger.Error("floodgate: partner configuration invalid; the message is dead-lettered", err,
			watermill.LogFields{"message_uuid": msg.UUID, "partner": ev.Partner})
		return g.deadLetter(msg, ev, key, DeadReasonPartnerConfig, err)
	case errors.Is(err, partner.ErrClosed):
		return g.nack(msg, ev, key, "admit", err)
	case errors.Is(err, breaker.ErrThrottled): // ramp or adaptive share
		reason = retryqueue.ReasonRamp
	case errors.Is(err, breaker.ErrProbeLimit):
		reason = retryqueue.ReasonProbeLimit
	}
	return g.divert(msg, ev, key, reason, "", err)
}

// partnerKey returns the partner key of msg in per-partner mode: its
// route's for a drained message, else [Config.PartnerKey]'s, else
// [Config.DefaultPartner]; or an error wrapping [ErrNoPartner].
func (g *guard) partnerKey(msg *message.Message) (key string, err error) {
	ctx := msg.Context()
	if k, ok := retryqueue.DrainedPartner(ctx, msg); ok {
		return k, nil
	}
	if retryqueue.FromDrain(ctx) {
		// Drained from a route whose key is not known: never re-chosen
		// from the message.
		return "", fmt.Errorf("%w: drained message's route has no known partner key", ErrNoPartner)
	}
	defer func() {
		if r := recover(); r != nil {
			key, err = "", fmt.Errorf("%w: PartnerKey panicked: %v", ErrNoPartner, r)
		}
	}()
	if key = g.cfg.PartnerKey(msg); key == "" {
		if key = g.cfg.DefaultPartner; key == "" {
			return "", ErrNoPartner
		}
	}
	return key, nil
}

// tokenOf returns the Event.Partner of key: the token of a partner held
// (no allocation), else [partner.Token] of key.
func (g *guard) tokenOf(key string) string {
	if g.reg == nil {
		return g.token
	}
	if p, ok := g.reg.Lookup(key); ok {
		return p.Token()
	}
	return partner.Token(key)
}

// run calls h under the configured deadline and reports the outcome to the
// breaker through c's permit or lease (see judge), with the latency from
// start (the admission time) on the breaker's clock: two clock reads per call in all. The
// message's own context is restored before run returns, so a later publish
// or retry never sees the timed-out one. A panic in h becomes a retryable
// error (*PanicError): the call counts as a failure and the message is
// diverted with its attempt counted, so a message that always panics ends
// in the dead letters instead of looping.
func (g *guard) run(h message.HandlerFunc, msg *message.Message, c *call, start time.Time, ev *Event) (out []*message.Message, err error, f fate) {
	parent := msg.Context()
	ctx, cancel := context.WithTimeout(parent, g.cfg.Timeout)
	if c.isProbe() {
		ctx = context.WithValue(ctx, probeKey{}, true)
	}
	msg.SetContext(ctx)
	defer func() {
		cancel()
		msg.SetContext(parent)
		if r := recover(); r != nil {
			end := c.clock.Now()
			ev.Latency, ev.Outcome = end.Sub(start), breaker.OutcomeFailure
			c.recordAt(end, breaker.OutcomeFailure, ev.Latency)
			out, err, f = nil, &PanicError{Value: r, Stack: debug.Stack()}, fateRetry
			g.cfg.Logger.Error("floodgate: handler panicked; the message is diverted as a failure", err,
				watermill.LogFields{"message_uuid": msg.UUID, "stack": string(debug.Stack())})
		}
	}()

	out, err = h(msg)
	end := c.clock.Now()
	ev.Latency = end.Sub(start)
	// Cancelled, not timed out: an outer Watermill Timeout middleware is a
	// deadline on the partner and must count as a failure, and so is a
	// subscriber giving up at its ack deadline when it says so in the
	// cancel cause (jsq.ErrAckWait wraps context.DeadlineExceeded).
	shutdown := err != nil && errors.Is(parent.Err(), context.Canceled) &&
		!errors.Is(context.Cause(parent), context.DeadlineExceeded)
	var cancelled bool
	ev.Outcome, f, cancelled = g.judge(err, shutdown, c.classify)
	if cancelled {
		c.cancel()
	} else {
		c.recordAt(end, ev.Outcome, ev.Latency)
	}
	return out, err, f
}

// judge classifies a handler result, first match wins:
//
//  1. nil: a success; the message is delivered.
//  2. [ErrNotAttempted] in err's chain: the permit is cancelled (nothing
//     counted) and the message diverted as not attempted.
//  3. shutdown (the message's own context cancelled during the call): the
//     permit is cancelled, a probe's too (a half-open breaker waits for
//     evidence; MaxProbeWait expires a probe never reported); the message
//     is diverted for failure, so it is not lost.
//  4. [Config.IsPermanent]: neutral (the partner answered); dead-lettered.
//  5. otherwise the breaker's Classifier (classify) decides the outcome (default: a
//     failure), and the message is diverted for failure with its attempt
//     counted, whatever the Classifier said: the partner was contacted and
//     the message not delivered.
func (g *guard) judge(err error, shutdown bool, classify func(error) breaker.Outcome) (o breaker.Outcome, f fate, cancelled bool) {
	switch {
	case err == nil:
		return breaker.OutcomeSuccess, fateRetry, false
	case errors.Is(err, ErrNotAttempted):
		return breaker.OutcomeNeutral, fateNotAttempted, true
	case shutdown:
		return breaker.OutcomeNeutral, fateRetry, true
	case g.cfg.IsPermanent(err):
		return breaker.OutcomeNeutral, fatePermanent, false
	case classify != nil:
		return classify(err), fateRetry, false
	}
	return breaker.OutcomeFailure, fateRetry, false
}

// probeKey marks the context of a call the breaker admitted as a probe.
type probeKey struct{}

// IsProbe reports whether ctx is the context of a call the breaker admitted
// as a half-open probe: the context of the message the middleware hands to
// the handler (msg.Context()). A handler can use it to mark probe requests
// to the partner (a header), or to log them. It is false for every other
// call, for a nil ctx, and outside the middleware. Safe for concurrent use.
func IsProbe(ctx context.Context) bool {
	if ctx == nil {
		return false
	}
	v, _ := ctx.Value(probeKey{}).(bool)
	return v
}

// divert diverts msg to the route of key for reason; the event's Reason is
// label when set (a not-attempted diversion's detail), else reason.
func (g *guard) divert(msg *message.Message, ev Event, key string, reason retryqueue.Reason, label string, cause error) error {
	dead, err := g.cfg.Queue.RouteTo(msg.Context(), msg, key, reason, cause)
	if err != nil {
		return g.nack(msg, ev, key, "divert", err)
	}
	if label == "" {
		label = string(reason)
	}
	ev.Action, ev.Reason = Diverted, label
	switch {
	case dead != "": // attempts or age used up, or malformed: dead-lettered instead
		ev.Action, ev.Reason = DeadLettered, dead
	case retryqueue.LeftInPlace(msg.Context(), msg, reason):
		ev.Action = Deferred // a drained message turned away
	}
	g.emit(ev)
	return nil
}

func (g *guard) deadLetter(msg *message.Message, ev Event, key, reason string, cause error) error {
	if err := g.cfg.Queue.DeadLetterTo(msg.Context(), msg, key, reason, cause); err != nil {
		return g.nack(msg, ev, key, "dead-letter", err)
	}
	ev.Action, ev.Reason = DeadLettered, reason
	if ev.Err == nil {
		ev.Err = cause // malformed: why
	}
	g.emit(ev)
	return nil
}

// nack reports a publish that was not confirmed. The returned error makes the
// router nack the message, so the broker redelivers it; on the last
// delivery the message is dead-lettered instead ([DeadReasonMaxDeliver]).
func (g *guard) nack(msg *message.Message, ev Event, key, op string, err error) error {
	if err, last := g.lastDelivery(msg, ev, key, op, err); last {
		return err
	}
	g.cfg.Logger.Error("floodgate: "+op+" not confirmed, message will be redelivered", err,
		watermill.LogFields{"message_uuid": msg.UUID})
	ev.Action, ev.Err = Nacked, err
	g.emit(ev)
	return fmt.Errorf("floodgate: %s message %s: %w", op, msg.UUID, err)
}

func (g *guard) emit(ev Event) {
	if g.cfg.OnEvent != nil {
		g.cfg.OnEvent(ev)
	}
}
