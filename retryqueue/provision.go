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
// applied) if they are missing. Existing streams are left as they are. It
// returns an error wrapping [ErrInvalidConfig] for invalid topics, or the
// JetStream API error.
func Provision(ctx context.Context, js jetstream.JetStream, cfg Config) error {
	cfg.setDefaults()
	for _, sc := range []jetstream.StreamConfig{RetryStreamConfig(cfg.RetryTopic), DeadLetterStreamConfig(cfg.DeadLetterTopic)} {
		if err := jsq.ValidateTopic(sc.Name); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
		}
		_, err := js.Stream(ctx, sc.Name)
		if err == nil {
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
