package retryqueue

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/floodgate-go/floodgate/jsq"
	"github.com/floodgate-go/floodgate/partner"
)

// Queue diverts messages to the retry topic and dead-letters them. It never
// acks or nacks a message: it returns nil only once the copy is confirmed
// stored, and the caller then acks the source (or nacks it on an error). It
// is safe for concurrent use.
type Queue struct {
	cfg     Config
	service string // partner.Token(cfg.Service)

	// keys is the per-key ordering index behind Holds (Config.OrderingKey
	// only, else nil).
	keys *keyIndex

	// hooks hear of every confirmed diversion ([PartnerDrainer]).
	hooks divertHooks

	diverted     atomic.Uint64
	deadLettered atomic.Uint64
	failed       atomic.Uint64
}

// QueueStats are a [Queue]'s counters since [New].
type QueueStats struct {
	// Diverted counts diversions the broker confirmed.
	Diverted uint64
	// DeadLettered counts dead letters the broker confirmed, including those
	// Divert made instead of a diversion.
	DeadLettered uint64
	// PublishErrors counts diversions and dead letters not confirmed (the
	// caller nacked the source; some may still have been stored).
	PublishErrors uint64
}

// New returns a [Queue]. It returns an error wrapping "invalid config" and
// [ErrInvalidConfig] naming the field and its allowed range.
func New(cfg Config) (*Queue, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("invalid config: %w", err)
	}
	q := &Queue{cfg: cfg, service: partner.Token(cfg.Service)}
	if cfg.OrderingKey != nil {
		q.keys = newKeyIndex(cfg.OrderingBuckets)
	}
	return q, nil
}

// RetryTopic returns the retry stream name.
func (q *Queue) RetryTopic() string { return q.cfg.RetryTopic }

// DeadLetterTopic returns the dead-letter stream name.
func (q *Queue) DeadLetterTopic() string { return q.cfg.DeadLetterTopic }

// Service returns the route's service name ([Config.Service]).
func (q *Queue) Service() string { return q.cfg.Service }

// Partner returns the partner key of the queue's route ([Config.Partner]).
func (q *Queue) Partner() string { return q.cfg.Partner }

// RetrySubject returns the subject [Queue.Divert] publishes to:
// [RouteSubject](RetryTopic, Service, Partner).
func (q *Queue) RetrySubject() string { return q.routeOf(q.cfg.Partner).subject(q.cfg.RetryTopic) }

// DeadLetterSubject returns the subject [Queue.DeadLetter] publishes to:
// [RouteSubject](DeadLetterTopic, Service, Partner).
func (q *Queue) DeadLetterSubject() string {
	return q.routeOf(q.cfg.Partner).subject(q.cfg.DeadLetterTopic)
}

// Stats returns the counters.
func (q *Queue) Stats() QueueStats {
	return QueueStats{
		Diverted:      q.diverted.Load(),
		DeadLettered:  q.deadLettered.Load(),
		PublishErrors: q.failed.Load(),
	}
}

// Divert publishes a copy of msg to the queue's retry subject
// ([Queue.RetrySubject]) and returns nil once the broker confirmed it; the
// caller then acks msg. A message a [Drainer] handed over (ctx is its
// context) goes back to the route it was drained from instead. The copy
// keeps msg's UUID, payload and metadata (except [jsq.Reserved] keys) and
// sets:
//   - the route: [MetaService], [MetaPartnerToken] and [MetaPartner],
//     replacing any msg carried;
//   - [MetaAttempt]: incremented for [ReasonFailure] only (a message rejected
//     by the breaker was not attempted); 0 if absent otherwise;
//   - [MetaReason], [MetaDivertedAt], [MetaDiversions] (incremented);
//   - [MetaOriginalTopic]: kept if present, else the topic msg was consumed
//     from ([message.SubscribeTopicFromCtx]);
//   - [MetaFirstDivertedAt]: kept if present, else now;
//   - for [ReasonFailure]: [MetaLastError] from cause (truncated to
//     [Config.MaxErrorLen]) and [MetaNotBefore] = now + [Config.Backoff],
//     or + the partner's Retry-After hint when cause carries a longer one
//     ([RetryAfterError]; capped at [Config.MaxRetryAfter] and at the
//     [Config.MaxAge] deadline), recorded in [HistoryEntry.RetryAfter];
//   - for [ReasonNotAttempted]: [MetaNotAttempted] incremented (n) and
//     [MetaNotBefore] = now + the larger of Backoff(n) and cause's
//     Retry-After hint (capped at MaxRetryAfter), cut at the MaxAge
//     deadline; cause's text goes to the history entry only, since no
//     delivery was attempted ([MetaLastError] keeps the last failure's).
//
// Instead of diverting, it dead-letters msg (see [Queue.DeadLetter]) when
// its metadata is malformed ([Queue.Malformed], [DeadReasonMalformed]), when
// the attempt reaches [Config.MaxAttempts] ([DeadReasonMaxAttempts]), when
// [Config.MaxAge] has passed since the first diversion ([DeadReasonMaxAge]),
// or when the copy does not fit the retry stream even with floodgate's
// metadata compacted ([DeadReasonTooLarge]). Either way a nil error means a
// durable copy exists.
//
// A message a [Drainer] handed over (ctx is its context, see [FromDrain])
// and diverted for a reason other than [ReasonFailure] and
// [ReasonNotAttempted] (the breaker turned it away: open, probe slots
// taken, ramp) is not published again: Divert
// returns nil and the drainer leaves it in place in the backlog, nakked
// with a delay of [DrainerConfig.PollInterval] and counted as Deferred,
// with no attempt counted; the drainer then waits a poll interval before
// its next fetch. So a drain that races the breaker neither copies nor
// reorders the backlog, and fetches at most once per poll interval while
// the breaker turns it away.
//
// The publish uses its own timeout, [Config.PublishTimeout], on a context
// detached from ctx's cancellation (ctx may be a handler's cancelled
// context; its values are kept). If the publish is not confirmed it returns
// an error wrapping [ErrPublish]; the caller must nack msg. It returns
// [ErrInvalidReason] for an unknown reason.
func (q *Queue) Divert(ctx context.Context, msg *message.Message, reason Reason, cause error) error {
	_, err := q.Route(ctx, msg, reason, cause)
	return err
}

// Route is [Queue.Divert] that also reports what it did: deadReason is empty
// when msg went to the retry queue, and otherwise the reason it was
// dead-lettered instead ([DeadReasonMalformed], [DeadReasonMaxAttempts],
// [DeadReasonMaxAge], [DeadReasonTooLarge], or "too-large: " and one of the
// others). The middleware uses it to report dead letters as such. It
// returns the errors Divert returns.
func (q *Queue) Route(ctx context.Context, msg *message.Message, reason Reason, cause error) (deadReason string, err error) {
	return q.RouteTo(ctx, msg, q.cfg.Partner, reason, cause)
}

// RouteTo is [Queue.Route] for the route of partner key partnerKey (any
// byte string, see [partner.Token]) instead of [Config.Partner]: the copy
// goes to [RouteSubject](RetryTopic, Service, partnerKey), or dead-lettered
// to the same route under DeadLetterTopic, for a drainer of that route. A
// message a [Drainer] handed over keeps the route it was drained from,
// whatever partnerKey says. Safe for concurrent use.
func (q *Queue) RouteTo(ctx context.Context, msg *message.Message, partnerKey string, reason Reason, cause error) (deadReason string, err error) {
	if !reason.Valid() {
		return "", fmt.Errorf("%w: %q", ErrInvalidReason, reason)
	}
	r := q.resolve(ctx, msg, partnerKey)
	if why, bad := q.Malformed(msg); bad {
		return q.deadLetter(ctx, msg, r, DeadReasonMalformed, fmt.Errorf("%w: %s", ErrMalformed, why))
	}
	now := q.cfg.Clock.Now()
	attempt := Attempt(msg)
	if reason == ReasonFailure {
		attempt++
	}
	// A live message's first diversion (the hot path of an outage) has
	// none of the values parsed here: look them up first, since a failed
	// parse allocates its error.
	first, firstText := now, ""
	if v, ok := msg.Metadata[MetaFirstDivertedAt]; ok {
		if t, err := time.Parse(TimeFormat, v); err == nil {
			first, firstText = t, formatTime(t)
		}
	}
	diversions := metaCount(msg, MetaDiversions)
	nowText := formatTime(now)
	if firstText == "" {
		firstText = nowText
	}

	c := q.copy(msg)
	c.Metadata.Set(MetaAttempt, strconv.Itoa(attempt))
	c.Metadata.Set(MetaReason, string(reason))
	c.Metadata.Set(MetaFirstDivertedAt, firstText)
	c.Metadata.Set(MetaDivertedAt, nowText)
	c.Metadata.Set(MetaDiversions, strconv.Itoa(diversions+1))
	entry := HistoryEntry{At: now.UTC(), Event: EventDiverted, Reason: string(reason), Attempt: attempt}
	switch reason {
	case ReasonFailure:
		if cause != nil {
			c.Metadata.Set(MetaLastError, truncate(cause.Error(), q.cfg.MaxErrorLen))
			entry.Error = truncate(cause.Error(), q.cfg.MaxErrorLen)
		}
		// The partner's Retry-After hint, if the cause carries one, is a
		// minimum delay: it lengthens the backoff, within MaxRetryAfter
		// and the MaxAge deadline.
		hint := retryAfter(cause)
		entry.RetryAfter = hint
		c.Metadata.Set(MetaNotBefore, formatTime(now.Add(q.cfg.failureDelay(attempt, hint, now, first))))
	case ReasonNotAttempted:
		// Refused by the handler before the partner was contacted: no
		// attempt, but a backoff on its own counter, so a throttle or
		// bulkhead that always refuses cannot loop at the drain rate.
		n := NotAttempted(msg) + 1
		c.Metadata.Set(MetaNotAttempted, strconv.Itoa(n))
		if cause != nil {
			entry.Error = truncate(cause.Error(), q.cfg.MaxErrorLen)
		}
		hint := retryAfter(cause)
		entry.RetryAfter = hint
		c.Metadata.Set(MetaNotBefore, formatTime(now.Add(q.cfg.notAttemptedDelay(n, hint, now, first))))
	}
	var lastErr error
	if reason == ReasonFailure {
		lastErr = cause
	}
	dead := ""
	switch {
	case reason == ReasonFailure && attempt >= q.cfg.MaxAttempts:
		dead = DeadReasonMaxAttempts
	case now.Sub(first) >= q.cfg.MaxAge:
		dead = DeadReasonMaxAge
	}
	if dead != "" {
		out, err := q.deadLetter(ctx, c, r, dead, lastErr)
		if s := slotFor(ctx, msg); s != nil && err == nil {
			s.set(outcomeDead, reason) // a drained message's partner outcome, for the drainer
		}
		return out, err
	}
	if LeftInPlace(ctx, msg, reason) {
		// A drained message the breaker turned away: the drainer leaves
		// it where it is in the backlog (a delayed nak), so the drain
		// publishes no copy and keeps the backlog's order.
		slotFor(ctx, msg).set(outcomeDeferred, reason)
		return "", nil
	}
	appendHistory(c, entry, q.cfg.MaxHistory)
	key := q.key(msg)
	// Count the key before the publish, so no live message of the key can
	// pass between the confirmation and the count; undo on failure.
	q.hold(key)
	q.stamp(c, r)
	if err := q.publish(ctx, r.subject(q.cfg.RetryTopic), c); err != nil {
		q.Release(key)
		if errors.Is(err, ErrTooLarge) {
			// Not even the compacted copy fits: it would fail on every
			// redelivery, so it ends here, its payload kept aside.
			return q.deadLetter(ctx, c, r, DeadReasonTooLarge, lastErr)
		}
		return "", err
	}
	q.diverted.Add(1)
	if s := slotFor(ctx, msg); s != nil {
		s.set(outcomeDiverted, reason)
	}
	q.hooks.notify(r)
	return "", nil
}

// LeftInPlace reports whether [Queue.Divert] leaves msg in place in the
// backlog instead of publishing a copy: msg is the message a [Drainer]
// handed over with ctx, and reason is neither [ReasonFailure] nor
// [ReasonNotAttempted] (the breaker turned it away). Divert still
// dead-letters such a message whose MaxAge has passed. A not-attempted
// message is published again, since its copy carries the counter and
// [MetaNotBefore] of its backoff. Safe for concurrent use.
func LeftInPlace(ctx context.Context, msg *message.Message, reason Reason) bool {
	return reason != ReasonFailure && reason != ReasonNotAttempted && slotFor(ctx, msg) != nil
}

// DeadLetter publishes a copy of msg to the queue's dead-letter subject
// ([Queue.DeadLetterSubject]; a drained message's own route under
// DeadLetterTopic) and returns nil once the broker confirmed it; the caller
// then acks msg. The copy carries its route as [Queue.Divert]'s does. Dead letters are
// never redelivered automatically. The copy keeps msg's UUID, payload and
// metadata (its history: attempt, first_diverted_at, last_error, ...) and
// sets [MetaDeadReason] = reason, [MetaDeadAt], [MetaOriginalTopic] (as
// [Queue.Divert]) and, if cause is not nil, [MetaLastError]. Metadata keys
// that cannot travel as NATS headers are left out and listed in
// [MetaDroppedKeys], so a malformed message can always be dead-lettered.
//
// A copy that does not fit the dead-letter stream even with floodgate's
// metadata compacted is dead-lettered without its payload, which is kept in
// [Config.PayloadBucket] ([DeadReasonTooLarge], [MetaPayloadObject]); its
// reason becomes "too-large: " and reason.
//
// Like Divert it publishes with its own timeout, detached from ctx's
// cancellation, and returns an error wrapping [ErrPublish] if the publish
// was not confirmed; the caller must then nack msg.
func (q *Queue) DeadLetter(ctx context.Context, msg *message.Message, reason string, cause error) error {
	return q.DeadLetterTo(ctx, msg, q.cfg.Partner, reason, cause)
}

// DeadLetterTo is [Queue.DeadLetter] for the route of partner key
// partnerKey instead of [Config.Partner] (see [Queue.RouteTo]).
func (q *Queue) DeadLetterTo(ctx context.Context, msg *message.Message, partnerKey string, reason string, cause error) error {
	_, err := q.deadLetter(ctx, msg, q.resolve(ctx, msg, partnerKey), reason, cause)
	return err
}

// deadLetter dead-letters msg under route r and returns the reason the
// dead letter carries: reason, or the too-large reason when its payload had
// to be kept aside.
func (q *Queue) deadLetter(ctx context.Context, msg *message.Message, r route, reason string, cause error) (string, error) {
	c := q.copy(msg)
	q.stamp(c, r)
	var dropped []string
	for k := range c.Metadata {
		if !jsq.ValidHeaderKey(k) {
			dropped = append(dropped, strconv.Quote(k))
			delete(c.Metadata, k)
		}
	}
	if len(dropped) > 0 {
		sort.Strings(dropped)
		c.Metadata.Set(MetaDroppedKeys, strings.Join(dropped, ","))
	}
	now := q.cfg.Clock.Now()
	reason = truncate(reason, q.cfg.MaxErrorLen)
	c.Metadata.Set(MetaDeadReason, reason)
	c.Metadata.Set(MetaDeadAt, formatTime(now))
	entry := HistoryEntry{At: now.UTC(), Event: EventDeadLettered, Reason: reason, Attempt: Attempt(c)}
	if cause != nil {
		c.Metadata.Set(MetaLastError, truncate(cause.Error(), q.cfg.MaxErrorLen))
		entry.Error = truncate(cause.Error(), q.cfg.MaxErrorLen)
	}
	appendHistory(c, entry, q.cfg.MaxHistory)
	subject := r.subject(q.cfg.DeadLetterTopic)
	err := q.publish(ctx, subject, c)
	if errors.Is(err, ErrTooLarge) {
		if reason != DeadReasonTooLarge {
			reason = truncate(DeadReasonTooLarge+": "+reason, q.cfg.MaxErrorLen)
			c.Metadata.Set(MetaDeadReason, reason)
		}
		err = q.deadLetterTooLarge(ctx, subject, c)
	}
	if err != nil {
		return reason, err
	}
	q.deadLettered.Add(1)
	if s := slotFor(ctx, msg); s != nil {
		s.set(outcomeDead, "")
	}
	return reason, nil
}

// copy returns a copy of msg (UUID, payload, metadata without reserved keys)
// with MetaOriginalTopic set when it can be known.
func (q *Queue) copy(msg *message.Message) *message.Message {
	c := message.NewMessage(msg.UUID, msg.Payload)
	// Sized for the keys floodgate adds, so the map never grows.
	c.Metadata = make(message.Metadata, len(msg.Metadata)+copyExtraKeys)
	for k, v := range msg.Metadata {
		if !jsq.Reserved(k) {
			c.Metadata.Set(k, v)
		}
	}
	for _, k := range payloadRefKeys {
		delete(c.Metadata, k)
	}
	if c.Metadata.Get(MetaOriginalTopic) == "" {
		if t := message.SubscribeTopicFromCtx(msg.Context()); t != "" {
			c.Metadata.Set(MetaOriginalTopic, t)
		}
	}
	return c
}

// copyExtraKeys is how many metadata keys a copy usually gains: the
// floodgate keys of a first diversion (a larger hint makes a larger map to
// clear than growing once would).
const copyExtraKeys = 10

// publish publishes m to subject through JetStream, awaiting the PubAck,
// bounded by PublishTimeout on a context detached from ctx's cancellation.
func (q *Queue) publish(ctx context.Context, subject string, m *message.Message) error {
	return q.publishWith(ctx, subject, m, func(pctx context.Context) error {
		_, err := q.cfg.JetStream.PublishMsg(pctx, jsq.Marshal(subject, m))
		return err
	})
}

// publishTopic publishes m to a Watermill topic through the Publisher,
// bounded as publish is: the path of a restored too-large dead letter
// back to its original topic.
func (q *Queue) publishTopic(ctx context.Context, topic string, m *message.Message) error {
	return q.publishWith(ctx, topic, m, func(pctx context.Context) error {
		if cp, ok := q.cfg.Publisher.(ContextPublisher); ok {
			return cp.PublishContext(pctx, topic, m)
		}
		done := make(chan error, 1)
		go func() { done <- q.cfg.Publisher.Publish(topic, m) }()
		select {
		case err := <-done:
			return err
		case <-pctx.Done():
			return pctx.Err()
		}
	})
}

// publishWith runs send bounded by PublishTimeout on a context detached
// from ctx's cancellation, compacting m once if it is too large.
func (q *Queue) publishWith(ctx context.Context, topic string, m *message.Message, send func(context.Context) error) error {
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), q.cfg.PublishTimeout)
	defer cancel()
	err := send(pctx)
	cancel()
	if tooLarge(err) {
		if compact(m) {
			return q.publishWith(ctx, topic, m, send) // once: compact reports false the second time
		}
		// Not counted as a publish error: the caller dead-letters the
		// message with its payload kept aside.
		return fmt.Errorf("%w: %w: %s to %q: %w", ErrPublish, ErrTooLarge, m.UUID, topic, err)
	}
	if err != nil {
		q.failed.Add(1)
		return fmt.Errorf("%w: %s to %q: %w", ErrPublish, m.UUID, topic, err)
	}
	return nil
}

// compactErrorLen bounds the error texts of a compacted copy.
const compactErrorLen = 64

// compact shrinks the metadata floodgate added to m, so a copy that grew
// past the server's max_payload or the stream's MaxMsgSize (history, error
// texts) fits again: it drops
// the history (counting it in [MetaHistoryDropped]) and cuts the error and
// dead-letter reason texts. It reports whether it changed anything, so a
// publish is retried at most once.
func compact(m *message.Message) bool {
	changed := false
	if h := m.Metadata.Get(MetaHistory); h != "" {
		entries, _ := History(m)
		dropped, _ := strconv.Atoi(m.Metadata.Get(MetaHistoryDropped))
		delete(m.Metadata, MetaHistory)
		m.Metadata.Set(MetaHistoryDropped, strconv.Itoa(dropped+len(entries)))
		changed = true
	}
	for _, k := range []string{MetaLastError, MetaDeadReason} {
		if v := m.Metadata.Get(k); len(v) > compactErrorLen {
			m.Metadata.Set(k, truncate(v, compactErrorLen))
			changed = true
		}
	}
	return changed
}
