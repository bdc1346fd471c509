package retryqueue

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/floodgate-go/floodgate/jsq"
	"github.com/floodgate-go/floodgate/partner"
	"github.com/nats-io/nats.go/jetstream"
)

// ReplayFilter selects the dead letters [Queue.Replay] moves. The zero
// value selects all of them.
type ReplayFilter struct {
	// Service selects dead letters of this service's routes (the service
	// token of their subject, [RouteSubject]).
	// Optional. Default "": any service.
	Service string
	// Partner selects dead letters of this partner key's routes (the
	// partner token of their subject). It does not select [DefaultPartner]
	// when empty: use DefaultPartner for those.
	// Optional. Default "": any partner.
	Partner string
	// OriginalTopic selects dead letters whose [MetaOriginalTopic] is this
	// topic.
	// Optional. Default "": any topic.
	OriginalTopic string
	// OlderThan selects dead letters dead-lettered at least this long ago
	// ([MetaDeadAt], or the stream's timestamp when it is missing or does
	// not parse), measured on [Config.Clock].
	// Optional. Default 0: any age. Valid range >= 0.
	OlderThan time.Duration
	// MatchReason, if not nil, selects the dead letters whose
	// [MetaDeadReason] ("" when absent) it returns true for; "floodgate
	// replay -reason" passes the match of "floodgate deadletters list". It
	// is called on Replay's goroutine.
	// Optional. Default nil: any reason.
	MatchReason func(reason string) bool
	// Limit stops after this many dead letters were selected.
	// Optional. Default 0: no limit. Valid range >= 0.
	Limit int
	// DryRun only lists what would be replayed; nothing is published or
	// removed.
	// Optional. Default false.
	DryRun bool
	// Progress, if not nil, is called on Replay's goroutine after each
	// dead letter looked at, with the number looked at so far and the
	// number stored when Replay started (a progress bar's total). It must
	// not block for long.
	// Optional. Default nil.
	Progress func(scanned, total uint64)
}

// ReplayResult is what [Queue.Replay] did.
type ReplayResult struct {
	// Scanned counts the dead letters looked at.
	Scanned int `json:"scanned"`
	// Selected counts those the filter selected.
	Selected int `json:"selected"`
	// Replayed counts those moved: published to the retry topic (confirmed)
	// and then removed from the dead-letter stream. 0 on a dry run.
	Replayed int `json:"replayed"`
	// UUIDs are the selected messages' UUIDs, in stream order.
	UUIDs []string `json:"uuids"`
	// Restored counts, among Replayed, the dead letters whose payload was
	// kept in the payload bucket ([DeadReasonTooLarge]): read back
	// ([Queue.Restore]) and published to their original topic.
	Restored int `json:"restored"`
	// Skipped lists the selected dead letters left in place, and why.
	Skipped []ReplaySkip `json:"skipped,omitempty"`
}

// ReplaySkip is a dead letter [Queue.Replay] selected and left in place.
type ReplaySkip struct {
	// UUID is the dead letter's message UUID.
	UUID string `json:"uuid"`
	// Why says why it was not replayed.
	Why string `json:"why"`
}

// Replay moves the dead letters selected by f back into the retry queue,
// oldest first, and returns what it did. Only dead letters stored when it
// starts are looked at, of every route (narrow with f.Service and
// f.Partner). For each selected one it publishes a copy to the retry
// subject of the dead letter's own route (its subject
// DeadLetterTopic.<service>.<partner> becomes RetryTopic.<service>.<partner>,
// whatever the queue's own route) and, only after JetStream confirmed that
// publish, deletes the
// dead letter from its stream: a crash in between leaves both copies (a
// duplicate later, never a loss). The copy keeps the UUID, payload and
// metadata, with [MetaDeadReason], [MetaDeadAt], [MetaNotBefore] and
// [MetaNotAttempted] removed, [MetaAttempt] reset to 0 and [MetaFirstDivertedAt] set to now
// (so [Config.MaxAttempts] and [Config.MaxAge] count afresh),
// [MetaReason] = [ReasonReplay], [MetaReplays] incremented and a
// [EventReplayed] entry added to [MetaHistory]. A dead letter stored by the
// previous release (on the bare DeadLetterTopic subject) has no route: it
// is listed in [ReplayResult.Skipped] until [Migrate] moved it.
//
// A dead letter whose payload was kept in the payload bucket
// ([DeadReasonTooLarge]) does not fit the retry stream: it goes back to its
// original topic instead, as the message was first consumed (UUID, its own
// metadata, the payload read back byte for byte with [Queue.Restore]; no
// floodgate metadata), and passes through the pipeline afresh. Because
// [MetaOriginalTopic] comes with the message, this happens only when
// f.OriginalTopic names that topic; the dead letter and then its objects
// are removed after the publish was confirmed. One that cannot be replayed
// (no f.OriginalTopic, payload gone, too large for the topic too) is left
// in place and listed in [ReplayResult.Skipped] with the reason.
//
// js must reach the server holding the dead-letter stream. Replay reads
// the stream with an ephemeral ordered consumer (the server removes it
// once idle), so it runs alongside a live pipeline. It returns the result so far with an error
// wrapping [ErrInvalidConfig] for a bad filter, [ErrPublish] for an
// unconfirmed publish, or the JetStream error.
func (q *Queue) Replay(ctx context.Context, js jetstream.JetStream, f ReplayFilter) (ReplayResult, error) {
	var res ReplayResult
	if f.OlderThan < 0 || f.Limit < 0 {
		return res, fmt.Errorf("%w: ReplayFilter OlderThan and Limit must be >= 0, got %s and %d", ErrInvalidConfig, f.OlderThan, f.Limit)
	}
	st, err := js.Stream(ctx, q.cfg.DeadLetterTopic)
	if err != nil {
		return res, fmt.Errorf("retryqueue: replay: dead-letter stream %q: %w", q.cfg.DeadLetterTopic, err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		return res, fmt.Errorf("retryqueue: replay: stream info: %w", err)
	}
	if info.State.Msgs == 0 {
		return res, nil
	}
	last := info.State.LastSeq
	cons, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverAllPolicy})
	if err != nil {
		return res, fmt.Errorf("retryqueue: replay: consumer: %w", err)
	}
	now := q.cfg.Clock.Now()
	for {
		batch, err := cons.Fetch(256, jetstream.FetchMaxWait(time.Second))
		if err != nil {
			return res, fmt.Errorf("retryqueue: replay: fetch: %w", err)
		}
		n := 0
		done := false
		for jm := range batch.Messages() {
			n++
			if done {
				// The limit or the last stored dead letter was reached:
				// leave the rest of the batch untouched (it is only read,
				// never acknowledged) and let the batch run out.
				continue
			}
			md, err := jm.Metadata()
			if err != nil {
				return res, fmt.Errorf("retryqueue: replay: metadata: %w", err)
			}
			if md.Sequence.Stream > last {
				done = true
				continue
			}
			res.Scanned++
			if f.Progress != nil {
				f.Progress(uint64(res.Scanned), info.State.Msgs)
			}
			wm := jsq.Unmarshal(jm)
			r, routed := routeFromSubject(q.cfg.DeadLetterTopic, jm.Subject())
			if !f.selects(wm, r, routed, md.Timestamp, now) {
				done = done || md.Sequence.Stream == last || md.NumPending == 0
				continue
			}
			res.Selected++
			res.UUIDs = append(res.UUIDs, wm.UUID)
			switch {
			case f.DryRun:
			case wm.Metadata.Get(MetaPayloadObject) != "":
				why, err := q.replayTooLarge(ctx, st, wm, md.Sequence.Stream, f.OriginalTopic)
				if err != nil {
					return res, err
				}
				if why != "" {
					res.Skipped = append(res.Skipped, ReplaySkip{UUID: wm.UUID, Why: why})
					break
				}
				res.Replayed++
				res.Restored++
			case !routed:
				res.Skipped = append(res.Skipped, ReplaySkip{UUID: wm.UUID, Why: fmt.Sprintf(
					"subject %q names no route (a dead letter of the previous release): run retryqueue.Migrate first", jm.Subject())})
			default:
				if err := q.replayOne(ctx, st, wm, r, md.Sequence.Stream, now); err != nil {
					return res, err
				}
				res.Replayed++
			}
			if (f.Limit > 0 && res.Selected >= f.Limit) || md.Sequence.Stream == last || md.NumPending == 0 {
				done = true
			}
		}
		if err := batch.Error(); err != nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, jetstream.ErrNoMessages) {
			return res, fmt.Errorf("retryqueue: replay: fetch: %w", err)
		}
		if done || n == 0 {
			return res, nil
		}
	}
}

func (f ReplayFilter) selects(m *message.Message, r route, routed bool, stored, now time.Time) bool {
	if f.Service != "" && (!routed || r.service != partner.Token(f.Service)) {
		return false
	}
	if f.Partner != "" && (!routed || r.partnerToken != partner.Token(f.Partner)) {
		return false
	}
	if f.OriginalTopic != "" && m.Metadata.Get(MetaOriginalTopic) != f.OriginalTopic {
		return false
	}
	if f.MatchReason != nil && !f.MatchReason(m.Metadata.Get(MetaDeadReason)) {
		return false
	}
	if f.OlderThan > 0 {
		at := stored
		if t, err := time.Parse(TimeFormat, m.Metadata.Get(MetaDeadAt)); err == nil {
			at = t
		}
		if now.Sub(at) < f.OlderThan {
			return false
		}
	}
	return true
}

// replayOne publishes the retry copy of dead letter wm (stream sequence
// seq, route r: its subject's) to r's retry subject and then deletes the
// dead letter. The copy keeps the dead letter's route metadata: a drainer
// of r checks it.
func (q *Queue) replayOne(ctx context.Context, st jetstream.Stream, wm *message.Message, r route, seq uint64, now time.Time) error {
	c := q.copy(wm)
	for _, k := range []string{MetaDeadReason, MetaDeadAt, MetaNotBefore, MetaNotAttempted} {
		delete(c.Metadata, k)
	}
	replays, _ := strconv.Atoi(c.Metadata.Get(MetaReplays))
	diversions, _ := strconv.Atoi(c.Metadata.Get(MetaDiversions))
	c.Metadata.Set(MetaAttempt, "0")
	c.Metadata.Set(MetaReason, string(ReasonReplay))
	c.Metadata.Set(MetaFirstDivertedAt, formatTime(now))
	c.Metadata.Set(MetaDivertedAt, formatTime(now))
	c.Metadata.Set(MetaDiversions, strconv.Itoa(diversions+1))
	c.Metadata.Set(MetaReplays, strconv.Itoa(replays+1))
	appendHistory(c, HistoryEntry{At: now.UTC(), Event: EventReplayed, Reason: string(ReasonReplay)}, q.cfg.MaxHistory)
	key := q.key(c)
	q.hold(key)
	if err := q.publish(ctx, r.subject(q.cfg.RetryTopic), c); err != nil {
		q.Release(key)
		return err
	}
	q.diverted.Add(1)
	if err := st.DeleteMsg(ctx, seq); err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
		return fmt.Errorf("retryqueue: replay: %s is in the retry queue but its dead letter (seq %d) was not removed: %w", wm.UUID, seq, err)
	}
	return nil
}

// replayTooLarge publishes too-large dead letter wm (stream sequence seq),
// restored, to its original topic topic, then deletes the dead letter and
// its objects. It returns why it left wm in place, or an error.
func (q *Queue) replayTooLarge(ctx context.Context, st jetstream.Stream, wm *message.Message, seq uint64, topic string) (why string, err error) {
	if topic == "" {
		return fmt.Sprintf("payload in bucket %q, object %q: too large for the retry stream; replay it to its original topic %q by selecting that topic (ReplayFilter.OriginalTopic, -original-topic)",
			wm.Metadata.Get(MetaPayloadBucket), wm.Metadata.Get(MetaPayloadObject), wm.Metadata.Get(MetaOriginalTopic)), nil
	}
	full, err := q.Restore(ctx, wm)
	if errors.Is(err, ErrPayloadUnavailable) {
		return err.Error(), nil
	}
	if err != nil {
		return "", err
	}
	orig := message.NewMessage(full.UUID, full.Payload)
	for k, v := range full.Metadata {
		if !strings.HasPrefix(k, metaPrefix) {
			orig.Metadata.Set(k, v)
		}
	}
	if err := q.publishTopic(ctx, topic, orig); errors.Is(err, ErrTooLarge) {
		return fmt.Sprintf("does not fit its original topic %q either: %v", topic, err), nil
	} else if err != nil {
		return "", err
	}
	if err := st.DeleteMsg(ctx, seq); err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
		return "", fmt.Errorf("retryqueue: replay: %s is back in %q but its dead letter (seq %d) was not removed: %w", wm.UUID, topic, seq, err)
	}
	if err := q.removeObjects(ctx, wm); err != nil {
		return "", fmt.Errorf("retryqueue: replay: %s is back in %q but its payload objects in bucket %q were not removed: %w", wm.UUID, topic, wm.Metadata.Get(MetaPayloadBucket), err)
	}
	return "", nil
}
