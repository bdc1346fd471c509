package middleware

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime/debug"
	"strings"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/deliver"
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
	g := &guard{cfg: cfg, reg: cfg.Partners, maxMeta: cfg.MaxMetadataSize}
	if g.maxMeta == NoMaxMetadataSize {
		g.maxMeta = math.MaxInt
	}
	if cfg.Breaker != nil {
		bc := cfg.Breaker.Config()
		g.clock, g.classify = bc.Clock, bc.Classifier
		g.wall = breaker.IsWallClock(bc.Clock)
		g.key = cfg.Queue.Partner()
		g.token = partner.Token(g.key)
	}
	return g.wrap, nil
}

type guard struct {
	cfg Config
	reg *partner.Registry // per-partner mode; nil in single-partner mode

	maxMeta int // Config.MaxMetadataSize; math.MaxInt for none

	// Single-partner mode only.
	clock    breaker.Clock               // the breaker's, so latency is judged on its time
	wall     bool                        // clock is the wall clock: read time.Now directly
	classify func(error) breaker.Outcome // the breaker's Classifier; nil: every error a failure
	key      string                      // the queue's partner key: the route
	token    string                      // its token, for Event.Partner
}

// call is one message's admission and its result: the partner key whose
// route its diversions and dead letters take and its token (Event.Partner;
// "" while no partner is chosen), the permit (single-partner mode) or lease (per-partner
// mode) to report its outcome with, and the admission time (at); then
// what the handler returned and how it was judged (see run). At most one
// of permit and lease is set; the zero one ignores reports. One struct in
// handle's frame, passed by pointer, keeps the frames small: Watermill
// runs each message on a new goroutine, whose first stack (2 KiB) a deep
// admission would make grow every time.
type call struct {
	key    string
	token  string
	permit breaker.Permit
	lease  partner.Lease
	at     time.Time // admission time; once the handler returned, its end

	out     []*message.Message
	err     error
	fate    fate
	outcome breaker.Outcome
	latency time.Duration
	drained bool // handed over by a drainer (per-partner mode)
}

func (c *call) isProbe() bool { return c.permit.IsProbe() || c.lease.IsProbe() }

func (c *call) recordAt(now time.Time, o breaker.Outcome, latency time.Duration) {
	if c.lease.Partner() != nil {
		c.lease.RecordAt(now, o, latency)
	} else {
		c.permit.RecordAt(now, o, latency)
	}
}

func (c *call) cancel() {
	if c.lease.Partner() != nil {
		c.lease.Cancel()
	} else {
		c.permit.Cancel()
	}
}

// now reads the clock of the breaker that admitted c: its partner's
// (per-partner mode) or the guard's. Not kept in call, to keep handle's
// frame small (see call). The wall clock is read as wallNow does, written
// out here and in run: a deeper call would grow a new goroutine's first
// stack (BenchmarkDelivered, go=fresh).
func (g *guard) now(c *call) time.Time {
	clock, wall := g.clock, g.wall
	if p := c.lease.Partner(); p != nil {
		clock = p.Clock()
		wall = breaker.IsWallClock(clock)
	}
	if wall {
		return monoBase.Add(time.Since(monoBase))
	}
	return clock.Now()
}

// now reads clock (see guard.now).
func now(clock breaker.Clock) time.Time {
	if breaker.IsWallClock(clock) {
		return monoBase.Add(time.Since(monoBase))
	}
	return clock.Now()
}

// isWall reports whether the clock of the breaker that admitted c is the
// wall clock (see now).
func (g *guard) isWall(c *call) bool {
	if p := c.lease.Partner(); p != nil {
		return breaker.IsWallClock(p.Clock())
	}
	return g.wall
}

// classifierOf returns the Classifier of the breaker that admitted c (see
// now).
func (g *guard) classifierOf(c *call) func(error) breaker.Outcome {
	if p := c.lease.Partner(); p != nil {
		return p.Classifier()
	}
	return g.classify
}

// event starts the Event of msg.
func (c *call) event(msg *message.Message) Event {
	return Event{UUID: msg.UUID, Partner: c.token, PartnerKey: c.key}
}

// fate is what becomes of a message whose handler returned an error.
type fate int

const (
	fateRetry        fate = iota // diverted for failure, attempt counted
	fateNotAttempted             // diverted as not attempted, no attempt counted
	fatePermanent                // dead-lettered as permanent
	fateWarned                   // delivered with a warning (deliver.Warning)
	fateParked                   // the partner parked (deliver.ParkError), diverted for failure
)

func (g *guard) wrap(h message.HandlerFunc) message.HandlerFunc {
	return func(msg *message.Message) ([]*message.Message, error) {
		return g.handle(h, msg)
	}
}

// handle guards one message. The path of a healthy message (no floodgate
// metadata, admitted, delivered) stays in small stack frames: Watermill
// runs each message on a new goroutine, whose first stack a large frame
// would make grow every time. Everything else is settled in functions of
// its own (screen, refused, failed).
func (g *guard) handle(h message.HandlerFunc, msg *message.Message) ([]*message.Message, error) {
	var c call // set field by field: a literal would take a second copy in the frame
	c.key, c.token = g.key, g.token
	var noKey error // why a message has no partner (per-partner mode)
	if g.reg != nil {
		c.key, c.drained, noKey = g.partnerKey(msg)
	}
	if noKey != nil || msg.Context().Err() != nil || screenMeta(msg.Metadata, g.maxMeta) || g.cfg.Queue.Holds(msg) {
		if err, settled := g.screen(msg, &c, noKey); settled {
			return nil, err
		}
	}
	if err := g.admit(&c); err != nil {
		return nil, g.refused(msg, &c, err)
	}
	if c.drained {
		// The partner's gate counts it from now on (its bulkhead).
		retryqueue.Admitted(msg.Context(), msg)
	}
	if g.run(h, msg, &c) {
		g.report(msg, &c)
	}
	if c.err != nil && c.fate != fateWarned {
		return nil, g.failed(msg, &c)
	}
	if g.cfg.OnEvent != nil {
		g.delivered(msg, &c)
	}
	return c.out, nil
}

// floodgatePrefix starts every metadata key floodgate sets (the
// retryqueue Meta* constants).
const floodgatePrefix = "floodgate_"

// screenMeta reports whether md must be screened: it has a key of
// floodgate's (only such a message can have floodgate metadata that is
// malformed), or its own metadata is larger than limit bytes (see
// ownMetaSize). One pass over md, which the healthy path makes anyway. Not
// inlined: the map iterator's frame would stay in handle's while the
// handler runs.
//
//go:noinline
func screenMeta(md message.Metadata, limit int) bool {
	n := 0
	for k, v := range md {
		if strings.HasPrefix(k, floodgatePrefix) {
			return true
		}
		n += len(k) + len(v)
	}
	return n > limit
}

// floodgateMeta reports whether md has a key of floodgate's.
func floodgateMeta(md message.Metadata) bool {
	for k := range md {
		if strings.HasPrefix(k, floodgatePrefix) {
			return true
		}
	}
	return false
}

// ownMetaSize returns the size of md's own metadata, the sum of
// len(key)+len(value) over its keys not of floodgate's, and their number.
func ownMetaSize(md message.Metadata) (size, keys int) {
	for k, v := range md {
		if !strings.HasPrefix(k, floodgatePrefix) {
			size, keys = size+len(k)+len(v), keys+1
		}
	}
	return size, keys
}

// screen settles, before admission, a message that must not be admitted,
// first match wins: its context is done (nacked, or dead-lettered on its
// last delivery); it has no partner (dead-lettered); its floodgate
// metadata is malformed (dead-lettered, see [retryqueue.Queue.Malformed]);
// its own metadata is larger than [Config.MaxMetadataSize]
// (dead-lettered); its ordering key is held (diverted "ordering").
// settled is false when none applies: the message goes on to admission.
func (g *guard) screen(msg *message.Message, c *call, noKey error) (err error, settled bool) {
	ev := c.event(msg)
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
			return err, true
		}
		ev.Action, ev.Err = Nacked, context.Cause(ctx)
		g.emit(ev)
		return fmt.Errorf("floodgate: message %s: context done before admission: %w", msg.UUID, ev.Err), true
	}
	if noKey != nil {
		return g.deadLetter(msg, ev, "", DeadReasonNoPartner, noKey), true
	}
	// A drained message's metadata was checked by the drainer.
	if floodgateMeta(msg.Metadata) && !retryqueue.FromDrain(msg.Context()) {
		if reason, bad := g.cfg.Queue.Malformed(msg); bad {
			ev.Partner = g.tokenOf(c.key)
			return g.deadLetter(msg, ev, c.key, retryqueue.DeadReasonMalformed, fmt.Errorf("%w: %s", retryqueue.ErrMalformed, reason)), true
		}
	}
	// Metadata too large: checked for drained messages too, which
	// MaxMetadataSize may have been lowered for since their diversion.
	if size, keys := ownMetaSize(msg.Metadata); size > g.maxMeta {
		ev.Partner = g.tokenOf(c.key)
		return g.deadLetter(msg, ev, c.key, DeadReasonMetadataTooLarge,
			fmt.Errorf("%w: %d bytes in %d keys, limit %d (MaxMetadataSize)", ErrMetadataTooLarge, size, keys, g.maxMeta)), true
	}
	// Per-key ordering: the key still has messages in the backlog, so
	// this one queues behind them (never true for drained messages).
	if g.cfg.Queue.Holds(msg) {
		ev.Partner = g.tokenOf(c.key)
		return g.divert(msg, ev, c.key, retryqueue.ReasonOrdering, "", nil), true
	}
	return nil, false
}

// admit asks the breaker (single-partner mode) or the partner registry for
// a permit or lease for c, and sets c.at, the admission time, read once
// from the breaker's clock. In per-partner mode it sets c's token, clock
// and Classifier to the partner's.
func (g *guard) admit(c *call) (err error) {
	if g.reg == nil {
		c.at = g.now(c)
		c.permit, err = g.cfg.Breaker.AllowAt(c.at)
		return err
	}
	// Lookup, not Get: AcquireAt counts the use (Get would count it twice).
	p, ok := g.reg.Lookup(c.key)
	if !ok {
		if p, err = g.reg.Get(c.key); err != nil {
			return g.noPartner(c, err)
		}
	}
	c.token, c.at = p.Token(), now(p.Clock())
	if c.lease, err = p.AcquireAt(c.at); err != nil && errors.Is(err, partner.ErrEvicted) {
		return g.reacquire(c)
	}
	return err
}

// noPartner sets c's token for an error of [partner.Registry.Get] or
// Acquire, which chose no partner, and returns it.
func (g *guard) noPartner(c *call, err error) error {
	if !errors.Is(err, partner.ErrNoKey) {
		c.token = g.tokenOf(c.key)
	}
	return err
}

// reacquire admits c to its partner when the partner was evicted between
// its lookup and its admission (rare): [partner.Registry.Acquire] waits
// for the eviction and admits the call to the partner made anew.
func (g *guard) reacquire(c *call) error {
	p, lease, err := g.reg.Acquire(c.key)
	if p == nil {
		return g.noPartner(c, err)
	}
	c.token, c.lease, c.at = p.Token(), lease, now(p.Clock())
	return err
}

// refused settles a message that was not admitted: the breaker rejected it
// (diverted "open", "probe-limit" or "ramp"), or the partner registry did
// (see the package doc's table).
func (g *guard) refused(msg *message.Message, c *call, err error) error {
	ev, key := c.event(msg), c.key
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

// delivered emits the event of a delivered message, with its warning if
// the handler returned one.
func (g *guard) delivered(msg *message.Message, c *call) {
	ev := c.event(msg)
	ev.Action, ev.Admitted, ev.Probe, ev.Outcome, ev.Latency = Delivered, true, c.isProbe(), c.outcome, c.latency
	if c.fate == fateWarned {
		ev.Warning = deliver.AsWarning(c.err)
	}
	g.emit(ev)
}

// failed settles an admitted message whose handler returned an error:
// diverted, or dead-lettered when permanent.
func (g *guard) failed(msg *message.Message, c *call) error {
	ev := c.event(msg)
	ev.Admitted, ev.Probe, ev.Outcome, ev.Latency, ev.Err = true, c.isProbe(), c.outcome, c.latency, c.err
	switch c.fate {
	case fateNotAttempted:
		return g.divert(msg, ev, c.key, retryqueue.ReasonNotAttempted, "", c.err)
	case fatePermanent:
		return g.deadLetter(msg, ev, c.key, retryqueue.DeadReasonPermanent, c.err)
	case fateParked:
		g.park(msg, c)
		return g.divert(msg, ev, c.key, retryqueue.ReasonFailure, ReasonParked, c.err)
	}
	return g.divert(msg, ev, c.key, retryqueue.ReasonFailure, "", c.err)
}

// partnerKey returns the partner key of msg in per-partner mode: its
// route's for a drained message (drained), else [Config.PartnerKey]'s,
// else [Config.DefaultPartner]; or an error wrapping [ErrNoPartner].
func (g *guard) partnerKey(msg *message.Message) (key string, drained bool, err error) {
	// A live message's context is looked up once (FromDrain): the
	// drainer's context carries both marks.
	if ctx := msg.Context(); retryqueue.FromDrain(ctx) {
		if k, ok := retryqueue.DrainedPartner(ctx, msg); ok {
			return k, true, nil
		}
		// Drained from a route whose key is not known: never re-chosen
		// from the message.
		return "", true, fmt.Errorf("%w: drained message's route has no known partner key", ErrNoPartner)
	}
	defer func() {
		if r := recover(); r != nil {
			key, err = "", fmt.Errorf("%w: PartnerKey panicked: %v", ErrNoPartner, r)
		}
	}()
	if key = g.cfg.PartnerKey(msg); key == "" {
		if key = g.cfg.DefaultPartner; key == "" {
			return "", false, ErrNoPartner
		}
	}
	return key, false, nil
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

// run calls h under the configured deadline, and sets c's result, its
// latency and c.at to its end on the breaker's clock: two clock reads per call in
// all, each of the monotonic clock alone with the wall clock (see wallNow;
// a breaker on another clock adds two reads of the wall clock, for the
// deadline). The handler's context is a callCtx
// (one allocation; none with NoTimeout, but for a probe's mark); the
// message's own context is restored before run returns, so a later
// publish or retry never sees the timed-out one. It returns false when h
// panicked: the call is then reported as a failure and its error is a
// retryable *PanicError, so the message is diverted with its attempt
// counted, and a message that always panics ends in the dead letters
// instead of looping.
func (g *guard) run(h message.HandlerFunc, msg *message.Message, c *call) (returned bool) {
	parent := msg.Context()
	wall := g.isWall(c)
	var cc *callCtx
	if g.cfg.Timeout > 0 {
		wallStart := c.at
		if !wall {
			wallStart = wallNow()
		}
		cc = newCallCtx(parent, wallStart.Add(g.cfg.Timeout), c.isProbe())
		msg.SetContext(cc)
	} else if c.isProbe() {
		msg.SetContext(context.WithValue(parent, probeKey{}, true))
	}
	defer func() {
		if !returned { // h panicked, or exited its goroutine
			v := recover()
			end := g.now(c)
			restore(msg, parent, cc, wall, end)
			c.latency, c.at = end.Sub(c.at), end
			if v != nil {
				g.panicked(msg, c, v)
			}
		}
	}()
	c.out, c.err = h(msg)
	var end time.Time
	if wall { // g.now(c), a frame shallower
		end = monoBase.Add(time.Since(monoBase))
	} else {
		end = g.now(c)
	}
	restore(msg, parent, cc, wall, end)
	c.latency, c.at = end.Sub(c.at), end
	return true
}

// report judges the result of c's handler, which returned, and reports it
// to the breaker through c's permit or lease (see judge), with its
// latency, at its end. It runs after run returned, so the breaker's frames are
// not stacked on run's.
func (g *guard) report(msg *message.Message, c *call) {
	// Cancelled, not timed out: an outer Watermill Timeout middleware is a
	// deadline on the partner and must count as a failure, and so is a
	// subscriber giving up at its ack deadline when it says so in the
	// cancel cause (jsq.ErrAckWait wraps context.DeadlineExceeded).
	parent := msg.Context()
	shutdown := c.err != nil && errors.Is(parent.Err(), context.Canceled) &&
		!errors.Is(context.Cause(parent), context.DeadlineExceeded)
	var cancelled bool
	c.outcome, c.fate, cancelled = g.judge(c, shutdown)
	if cancelled {
		c.cancel()
	} else {
		c.recordAt(c.at, c.outcome, c.latency)
	}
}

// restore ends the handler's context cc, if any, at end (on the wall
// clock when wall, else read now) and gives msg back its own context.
func restore(msg *message.Message, parent context.Context, cc *callCtx, wall bool, end time.Time) {
	if cc != nil {
		if !wall {
			end = wallNow()
		}
		cc.end(end)
	}
	msg.SetContext(parent)
}

// panicked reports c, whose handler panicked with v, as a failure at
// c.at, and sets its error to a retryable *PanicError.
func (g *guard) panicked(msg *message.Message, c *call, v any) {
	c.recordAt(c.at, breaker.OutcomeFailure, c.latency)
	err := &PanicError{Value: v, Stack: debug.Stack()}
	g.cfg.Logger.Error("floodgate: handler panicked; the message is diverted as a failure", err,
		watermill.LogFields{"message_uuid": msg.UUID, "stack": string(err.Stack)})
	c.out, c.err, c.fate, c.outcome = nil, err, fateRetry, breaker.OutcomeFailure
}

// judge classifies the result of c's handler, first match wins:
//
//  1. nil, or a [deliver.Warning] in err's chain: a success; the message
//     is delivered (with the warning in its event).
//  2. a [deliver.ParkError] in err's chain: neutral; the partner is
//     parked (see park) and the message diverted for failure.
//  3. [ErrNotAttempted] in err's chain: the permit is cancelled (nothing
//     counted) and the message diverted as not attempted.
//  4. shutdown (the message's own context cancelled during the call): the
//     permit is cancelled, a probe's too (a half-open breaker waits for
//     evidence; MaxProbeWait expires a probe never reported); the message
//     is diverted for failure, so it is not lost.
//  5. [Config.IsPermanent]: neutral (the partner answered); dead-lettered.
//  6. [deliver.ErrLocal] in err's chain: neutral (the partner answered
//     well; a step on our side failed, e.g. storing an asynchronous
//     receipt's record); diverted for failure with its attempt counted.
//  7. otherwise the Classifier of the breaker that admitted c decides the
//     outcome (default: a failure), and the message is diverted for failure with its attempt
//     counted, whatever the Classifier said: the partner was contacted and
//     the message not delivered.
//
// It is not inlined, so the frame of the breaker's report does not stack on
// its own.
//
//go:noinline
func (g *guard) judge(c *call, shutdown bool) (o breaker.Outcome, f fate, cancelled bool) {
	err := c.err
	switch {
	case err == nil:
		return breaker.OutcomeSuccess, fateRetry, false
	case deliver.IsWarning(err):
		return breaker.OutcomeSuccess, fateWarned, false
	case deliver.AsPark(err) != nil:
		return breaker.OutcomeNeutral, fateParked, false
	case errors.Is(err, ErrNotAttempted):
		return breaker.OutcomeNeutral, fateNotAttempted, true
	case shutdown:
		return breaker.OutcomeNeutral, fateRetry, true
	case g.cfg.IsPermanent(err):
		return breaker.OutcomeNeutral, fatePermanent, false
	case errors.Is(err, deliver.ErrLocal):
		return breaker.OutcomeNeutral, fateRetry, false
	}
	if classify := g.classifierOf(c); classify != nil {
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
