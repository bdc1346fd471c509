package retryqueue

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/floodgate-go/floodgate/jsq"
	"github.com/nats-io/nats.go/jetstream"
)

// RetryStreamConfig returns the stream [Provision] creates for the retry
// topic: the topic as name, the subjects topic.> (one subject per route,
// [RouteSubject]), file storage, work-queue retention (a message is removed
// once the drainer acked it, so the stream holds exactly the backlog).
// A work-queue stream refuses two consumers whose filter subjects overlap:
// each route's drainer filters on its own subject, so two routes can never
// share a consumer, and a configuration that would is refused when the
// drainer starts ([ErrRouteConflict]). Read it for inspection with direct
// gets, or stream info.
func RetryStreamConfig(topic string) jetstream.StreamConfig {
	c := jsq.StreamConfig(topic)
	c.Subjects = []string{StreamSubjects(topic)}
	c.Retention = jetstream.WorkQueuePolicy
	return c
}

// DeadLetterStreamConfig returns the stream [Provision] creates for the
// dead-letter topic: the topic as name, the subjects topic.> (one per
// route), file storage, limits retention with no limits (dead letters stay
// until removed).
func DeadLetterStreamConfig(topic string) jetstream.StreamConfig {
	c := jsq.StreamConfig(topic)
	c.Subjects = []string{StreamSubjects(topic)}
	return c
}

// Provision creates the retry stream ([RetryStreamConfig]), the
// dead-letter stream ([DeadLetterStreamConfig]) and the payload bucket
// ([PayloadBucketConfig], a JetStream Object Store) for cfg's topics
// (defaults applied) if they are missing. Existing ones are left as they
// are (replicas, placement and storage are the operator's), but one that
// would lose messages is refused with an error wrapping [ErrStreamConfig]
// that names the stream and the field:
//   - a stream of the previous release's layout, whose subjects include
//     the bare topic (also [ErrPreviousLayout]: run [Migrate]), or whose
//     subjects lack topic.>;
//   - a retry stream without work-queue retention;
//   - any of the three with a limit (MaxAge, MaxMsgs, MaxBytes,
//     MaxMsgsPerSubject) that discards messages;
//   - a retry or dead-letter stream whose MaxMsgSize is below that of a
//     source stream named in sources (the topics the middleware consumes),
//     or, with no sources given, below the server's max_payload (any
//     source may hold a message that large). A MaxMsgSize of 0 or -1 means
//     the server's max_payload. Even then a message filling the source's
//     limit does not fit with floodgate's metadata: it is dead-lettered
//     with its payload in the bucket ([DeadReasonTooLarge]).
//
// An existing stream that differs in Subjects or Storage is refused,
// unchanged, with a [*jsq.ConfigMismatchError] ([jsq.CheckStream]).
//
// A source stream that does not exist is an error. It returns an error
// wrapping [ErrInvalidConfig] that names the field (RetryTopic,
// DeadLetterTopic, PayloadBucket) for invalid or equal names, before
// creating anything, or the JetStream API error. It checks only the names:
// the other fields of cfg, Publisher included, may be zero.
func Provision(ctx context.Context, js jetstream.JetStream, cfg Config, sources ...string) error {
	cfg.setDefaults()
	if err := cfg.validateTopics(); err != nil {
		return err
	}
	limit, from, err := sourceLimit(ctx, js, sources)
	if err != nil {
		return err
	}
	for _, sc := range []jetstream.StreamConfig{RetryStreamConfig(cfg.RetryTopic), DeadLetterStreamConfig(cfg.DeadLetterTopic)} {
		st, err := js.Stream(ctx, sc.Name)
		if err == nil {
			got := st.CachedInfo().Config
			if err := checkExisting(got, sc); err != nil {
				return err
			}
			if size := effectiveMsgSize(js, got.MaxMsgSize); size < limit {
				return fmt.Errorf("%w: stream %q has MaxMsgSize %d, below %s (%d bytes); want >= it, or -1 for the server's max_payload",
					ErrStreamConfig, got.Name, got.MaxMsgSize, from, limit)
			}
			if err := jsq.CheckStream(got, sc); err != nil {
				return err
			}
			continue
		}
		if !errors.Is(err, jetstream.ErrStreamNotFound) {
			return fmt.Errorf("retryqueue: look up stream %q: %w", sc.Name, err)
		}
		if _, err := js.CreateStream(ctx, sc); err != nil && !errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			return fmt.Errorf("retryqueue: create stream %q: %w", sc.Name, err)
		}
	}
	return provisionBucket(ctx, js, cfg.PayloadBucket)
}

// provisionBucket creates the payload bucket if missing and refuses an
// existing one with a limit that discards payloads.
func provisionBucket(ctx context.Context, js jetstream.JetStream, bucket string) error {
	_, err := js.ObjectStore(ctx, bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		_, err = js.CreateObjectStore(ctx, PayloadBucketConfig(bucket))
		if err != nil && !errors.Is(err, jetstream.ErrBucketExists) {
			return fmt.Errorf("retryqueue: create payload bucket %q: %w", bucket, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("retryqueue: look up payload bucket %q: %w", bucket, err)
	}
	st, err := js.Stream(ctx, "OBJ_"+bucket)
	if err != nil {
		return fmt.Errorf("retryqueue: payload bucket %q stream: %w", bucket, err)
	}
	got := st.CachedInfo().Config
	return checkExisting(got, jetstream.StreamConfig{Retention: got.Retention})
}

// sourceLimit returns the largest message the source streams accept, and
// which stream (or the server) sets it.
func sourceLimit(ctx context.Context, js jetstream.JetStream, sources []string) (int64, string, error) {
	if len(sources) == 0 {
		return effectiveMsgSize(js, -1), "the server's max_payload", nil
	}
	var limit int64
	var from string
	for _, name := range sources {
		st, err := js.Stream(ctx, jsq.StreamName(name))
		if err != nil {
			return 0, "", fmt.Errorf("retryqueue: source stream %q: %w", name, err)
		}
		if size := effectiveMsgSize(js, st.CachedInfo().Config.MaxMsgSize); size > limit {
			limit, from = size, fmt.Sprintf("source stream %q's MaxMsgSize", name)
		}
	}
	return limit, from, nil
}

// effectiveMsgSize is the largest message a stream with MaxMsgSize max
// accepts: max, bounded by the server's max_payload (unknown: unbounded).
func effectiveMsgSize(js jetstream.JetStream, max int32) int64 {
	payload := int64(math.MaxInt64)
	if nc := js.Conn(); nc != nil && nc.MaxPayload() > 0 {
		payload = nc.MaxPayload()
	}
	if max <= 0 {
		return payload
	}
	return min(int64(max), payload)
}

// Depth returns the backlog of consumer on stream: messages not yet
// delivered (NumPending) plus delivered and not yet acked, including those
// waiting out their [MetaNotBefore] (NumAckPending).
func Depth(ctx context.Context, js jetstream.JetStream, stream, consumer string) (uint64, error) {
	c, err := js.Consumer(ctx, stream, consumer)
	if err != nil {
		return 0, fmt.Errorf("retryqueue: consumer %q on %q: %w", consumer, stream, err)
	}
	info, err := c.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("retryqueue: consumer %q on %q info: %w", consumer, stream, err)
	}
	return info.NumPending + uint64(info.NumAckPending), nil
}

// checkExisting refuses an existing stream whose settings would drop
// messages floodgate holds, or whose subjects are not the route layout.
func checkExisting(got, want jetstream.StreamConfig) error {
	if want.Subjects != nil {
		if slices.Contains(got.Subjects, got.Name) {
			return fmt.Errorf("%w: %w: stream %q has subjects %q, the previous release's layout (one subject for every service); stop the previous release's services and drainers, then run retryqueue.Migrate with this service's Config to move its messages to route subjects (no message is lost)",
				ErrStreamConfig, ErrPreviousLayout, got.Name, got.Subjects)
		}
		if !slices.Contains(got.Subjects, want.Subjects[0]) {
			return fmt.Errorf("%w: stream %q has subjects %q; want them to include %q (one subject per route)", ErrStreamConfig, got.Name, got.Subjects, want.Subjects[0])
		}
	}
	switch {
	case got.Retention != want.Retention:
		return fmt.Errorf("%w: stream %q has %s retention, want %s", ErrStreamConfig, got.Name, got.Retention, want.Retention)
	case got.MaxAge > 0, got.MaxMsgs > 0, got.MaxBytes > 0, got.MaxMsgsPerSubject > 0:
		return fmt.Errorf("%w: stream %q has a limit that discards messages (MaxAge %v, MaxMsgs %d, MaxBytes %d, MaxMsgsPerSubject %d); want none",
			ErrStreamConfig, got.Name, got.MaxAge, got.MaxMsgs, got.MaxBytes, got.MaxMsgsPerSubject)
	}
	return nil
}
