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
	"github.com/floodgate-go/floodgate/retryqueue"
)

// New returns the floodgate middleware for cfg. It fails with an error
// wrapping [ErrInvalidConfig] when a required field is missing or a value is
// out of range.
//
// The returned middleware is safe for concurrent use by any number of
// handler goroutines; all its state lives in the breaker and the queue.
func New(cfg Config) (message.HandlerMiddleware, error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("invalid config: %w", err)
	}
	bc := cfg.Breaker.Config()
	g := &guard{cfg: cfg, clock: bc.Clock, classify: bc.Classifier}
	return g.wrap, nil
}

type guard struct {
	cfg      Config
	clock    breaker.Clock               // the breaker's, so latency is judged on its time
	classify func(error) breaker.Outcome // the breaker's Classifier; nil: every error a failure
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
		ev := Event{UUID: msg.UUID}
		if ctx := msg.Context(); ctx.Err() != nil {
			// Given up before admission (the subscriber's ack deadline
			// passed while the message waited, or the router is closing):
			// no partner call, nothing counted by the breaker, nothing
			// made durable that an ignored ack would duplicate. The broker
			// redelivers it, unless this is its last delivery.
			if err, last := g.lastDelivery(msg, ev, "admit", context.Cause(ctx)); last {
				return nil, err
			}
			ev.Action, ev.Err = Nacked, context.Cause(ctx)
			g.emit(ev)
			return nil, fmt.Errorf("floodgate: message %s: context done before admission: %w", msg.UUID, ev.Err)
		}
		if reason, bad := g.cfg.Queue.Malformed(msg); bad {
			return nil, g.deadLetter(msg, ev, retryqueue.DeadReasonMalformed, fmt.Errorf("%w: %s", retryqueue.ErrMalformed, reason))
		}

		// Per-key ordering: the key still has messages in the backlog, so
		// this one queues behind them (never true for drained messages).
		if g.cfg.Queue.Holds(msg) {
			return nil, g.divert(msg, ev, retryqueue.ReasonOrdering, nil)
		}

		start := g.clock.Now()
		permit, err := g.cfg.Breaker.AllowAt(start)
		if err != nil {
			reason := retryqueue.ReasonOpen
			switch {
			case errors.Is(err, breaker.ErrThrottled): // ramp or adaptive share
				reason = retryqueue.ReasonRamp
			case errors.Is(err, breaker.ErrProbeLimit):
				reason = retryqueue.ReasonProbeLimit
			}
			return nil, g.divert(msg, ev, reason, err)
		}

		ev.Admitted, ev.Probe = true, permit.IsProbe()
		out, herr, f := g.run(h, msg, permit, start, &ev)
		if herr == nil {
			ev.Action = Delivered
			g.emit(ev)
			return out, nil
		}
		ev.Err = herr
		switch f {
		case fateNotAttempted:
			return nil, g.divert(msg, ev, retryqueue.ReasonNotAttempted, herr)
		case fatePermanent:
			return nil, g.deadLetter(msg, ev, retryqueue.DeadReasonPermanent, herr)
		}
		return nil, g.divert(msg, ev, retryqueue.ReasonFailure, herr)
	}
}

// run calls h under the configured deadline and reports the outcome to the
// breaker (see judge), with the latency from start (the admission
// time) on the breaker's clock: two clock reads per call in all. The
// message's own context is restored before run returns, so a later publish
// or retry never sees the timed-out one. A panic in h becomes a retryable
// error (*PanicError): the call counts as a failure and the message is
// diverted with its attempt counted, so a message that always panics ends
// in the dead letters instead of looping.
func (g *guard) run(h message.HandlerFunc, msg *message.Message, permit breaker.Permit, start time.Time, ev *Event) (out []*message.Message, err error, f fate) {
	parent := msg.Context()
	ctx, cancel := context.WithTimeout(parent, g.cfg.Timeout)
	if permit.IsProbe() {
		ctx = context.WithValue(ctx, probeKey{}, true)
	}
	msg.SetContext(ctx)
	defer func() {
		cancel()
		msg.SetContext(parent)
		if r := recover(); r != nil {
			end := g.clock.Now()
			ev.Latency, ev.Outcome = end.Sub(start), breaker.OutcomeFailure
			permit.RecordAt(end, breaker.OutcomeFailure, ev.Latency)
			out, err, f = nil, &PanicError{Value: r, Stack: debug.Stack()}, fateRetry
			g.cfg.Logger.Error("floodgate: handler panicked; the message is diverted as a failure", err,
				watermill.LogFields{"message_uuid": msg.UUID, "stack": string(debug.Stack())})
		}
	}()

	out, err = h(msg)
	end := g.clock.Now()
	ev.Latency = end.Sub(start)
	// Cancelled, not timed out: an outer Watermill Timeout middleware is a
	// deadline on the partner and must count as a failure, and so is a
	// subscriber giving up at its ack deadline when it says so in the
	// cancel cause (jsq.ErrAckWait wraps context.DeadlineExceeded).
	shutdown := err != nil && errors.Is(parent.Err(), context.Canceled) &&
		!errors.Is(context.Cause(parent), context.DeadlineExceeded)
	var cancelled bool
	ev.Outcome, f, cancelled = g.judge(err, shutdown)
	if cancelled {
		permit.Cancel()
	} else {
		permit.RecordAt(end, ev.Outcome, ev.Latency)
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
//  5. otherwise the breaker's Classifier decides the outcome (default: a
//     failure), and the message is diverted for failure with its attempt
//     counted, whatever the Classifier said: the partner was contacted and
//     the message not delivered.
func (g *guard) judge(err error, shutdown bool) (o breaker.Outcome, f fate, cancelled bool) {
	switch {
	case err == nil:
		return breaker.OutcomeSuccess, fateRetry, false
	case errors.Is(err, ErrNotAttempted):
		return breaker.OutcomeNeutral, fateNotAttempted, true
	case shutdown:
		return breaker.OutcomeNeutral, fateRetry, true
	case g.cfg.IsPermanent(err):
		return breaker.OutcomeNeutral, fatePermanent, false
	case g.classify != nil:
		return g.classify(err), fateRetry, false
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

func (g *guard) divert(msg *message.Message, ev Event, reason retryqueue.Reason, cause error) error {
	dead, err := g.cfg.Queue.Route(msg.Context(), msg, reason, cause)
	if err != nil {
		return g.nack(msg, ev, "divert", err)
	}
	ev.Action, ev.Reason = Diverted, string(reason)
	switch {
	case dead != "": // attempts or age used up, or malformed: dead-lettered instead
		ev.Action, ev.Reason = DeadLettered, dead
	case retryqueue.LeftInPlace(msg.Context(), msg, reason):
		ev.Action = Deferred // a drained message turned away
	}
	g.emit(ev)
	return nil
}

func (g *guard) deadLetter(msg *message.Message, ev Event, reason string, cause error) error {
	if err := g.cfg.Queue.DeadLetter(msg.Context(), msg, reason, cause); err != nil {
		return g.nack(msg, ev, "dead-letter", err)
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
func (g *guard) nack(msg *message.Message, ev Event, op string, err error) error {
	if err, last := g.lastDelivery(msg, ev, op, err); last {
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
