package retryqueue

import (
	"context"
	"errors"
	"fmt"

	"github.com/floodgate-go/floodgate/jsq"
	"github.com/nats-io/nats.go/jetstream"
)

// RetryStreamConfig returns the stream [Provision] creates for the retry
// topic: the topic as name and only subject, file storage, work-queue
// retention (a message is removed once the drainer acked it, so the stream
// holds exactly the backlog). A work-queue stream accepts only one consumer
// without a subject filter: the drainer's durable consumer. Read it for
// inspection with direct gets, or stream info.
func RetryStreamConfig(topic string) jetstream.StreamConfig {
	c := jsq.StreamConfig(topic)
	c.Retention = jetstream.WorkQueuePolicy
	return c
}

// DeadLetterStreamConfig returns the stream [Provision] creates for the
// dead-letter topic: the topic as name and only subject, file storage,
// limits retention with no limits (dead letters stay until removed).
func DeadLetterStreamConfig(topic string) jetstream.StreamConfig {
	return jsq.StreamConfig(topic)
}

// Provision creates the retry stream ([RetryStreamConfig]) and the
// dead-letter stream ([DeadLetterStreamConfig]) for cfg's topics (defaults
// applied) if they are missing. Existing streams are never changed
// (replicas and placement are the operator's), but one that would lose
// messages is refused with an error wrapping [ErrStreamConfig]: a retry
// stream without work-queue retention, or either stream with a limit
// (MaxAge, MaxMsgs, MaxBytes, MaxMsgsPerSubject) that discards messages;
// one that differs in Subjects or Storage is refused with a
// [*jsq.ConfigMismatchError] ([jsq.CheckStream]). It
// returns an error wrapping [ErrInvalidConfig] that names the field
// (RetryTopic, DeadLetterTopic) for invalid or equal topics, before creating
// anything, or the JetStream API error. It checks only the topics: the
// other fields of cfg, Publisher included, may be zero.
func Provision(ctx context.Context, js jetstream.JetStream, cfg Config) error {
	cfg.setDefaults()
	if err := cfg.validateTopics(); err != nil {
		return err
	}
	for _, sc := range []jetstream.StreamConfig{RetryStreamConfig(cfg.RetryTopic), DeadLetterStreamConfig(cfg.DeadLetterTopic)} {
		st, err := js.Stream(ctx, sc.Name)
		if err == nil {
			if err := checkExisting(st.CachedInfo().Config, sc); err != nil {
				return err
			}
			if err := jsq.CheckStream(st.CachedInfo().Config, sc); err != nil {
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
	return nil
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
// messages floodgate holds.
func checkExisting(got, want jetstream.StreamConfig) error {
	switch {
	case got.Retention != want.Retention:
		return fmt.Errorf("%w: stream %q has %s retention, want %s", ErrStreamConfig, got.Name, got.Retention, want.Retention)
	case got.MaxAge > 0, got.MaxMsgs > 0, got.MaxBytes > 0, got.MaxMsgsPerSubject > 0:
		return fmt.Errorf("%w: stream %q has a limit that discards messages (MaxAge %v, MaxMsgs %d, MaxBytes %d, MaxMsgsPerSubject %d); want none",
			ErrStreamConfig, got.Name, got.MaxAge, got.MaxMsgs, got.MaxBytes, got.MaxMsgsPerSubject)
	}
	return nil
}
