package jsq

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// Takeover is what [TakeOver] found and did.
type Takeover struct {
	// Consumer is the durable consumer the [Subscriber] is to use for the
	// topic: set [SubscriberConfig.ConsumerName] to return it. It is the
	// old consumer itself when Bound, else jsq's own
	// ([SubscriberConfig.ConsumerName] of the topic).
	Consumer string
	// Bound reports that the old consumer equals jsq's in every field jsq
	// sets ([CheckConsumer]) and is used as it is: nothing is redelivered
	// beyond what the old consumer itself would redeliver.
	Bound bool
	// Existed reports that jsq's consumer already existed (an earlier
	// TakeOver, or a subscriber that ran before) and was left as it is; the
	// counts below are then zero.
	Existed bool
	// StartSeq is the stream sequence jsq's new consumer starts at: the old
	// consumer's ack floor + 1. Zero when Bound or Existed.
	StartSeq uint64
	// Redelivered is how many messages the old consumer had delivered above
	// its ack floor (its Delivered.Stream − AckFloor.Stream): jsq's
	// consumer delivers them again. At most this many; fewer when some
	// were deleted from the stream.
	Redelivered uint64
	// Duplicates bounds those of them that the old consumer's subscribers
	// had already acked (acked out of order, above the ack floor):
	// Redelivered − the old consumer's NumAckPending. They are handled
	// twice; the rest were never acked and would have been redelivered
	// anyway. JetStream has no API listing the acks above the ack floor,
	// so which ones cannot be told.
	Duplicates uint64
}

// TakeOver prepares a [Subscriber] to take topic over from another durable
// consumer, from, on the topic's stream, such as a watermill-nats
// subscriber's, losing no message. Stop every subscriber of from first.
//
//   - If from equals the consumer cfg would create in every field jsq
//     sets ([CheckConsumer]: a pull consumer with explicit ack, deliver
//     all, and cfg's AckWait, MaxDeliver, MaxAckPending), it is bound:
//     Takeover.Consumer is from.
//   - Otherwise (a push consumer, as watermill-nats' pkg/nats creates,
//     cannot become a pull consumer; other settings are the old
//     subscriber's) TakeOver creates jsq's durable consumer
//     (cfg.ConsumerName(topic)) starting at from's ack floor + 1, with
//     DeliverPolicy by start sequence, which [Subscriber.Subscribe]
//     accepts in place of deliver all. Every message above the ack floor
//     is delivered again: at most [Takeover.Duplicates] of them, those
//     from's subscribers acked out of order, twice. If jsq's consumer
//     exists already, it is left as it is (Takeover.Existed).
//
// TakeOver never modifies or deletes from: delete it afterwards (nats
// consumer rm), since on an interest or work-queue stream it keeps
// messages. The topic's stream must exist and pass [CheckStream]. It
// returns an error wrapping [ErrInvalidTopic], "invalid config" and
// [ErrInvalidConfig], [ErrConsumerActive] (from has a subscriber, or a
// pull request waiting), a [*ConfigMismatchError] (the stream, or an
// existing jsq consumer, differs), or the JetStream API's error, wrapped.
func TakeOver(ctx context.Context, js jetstream.JetStream, topic, from string, cfg SubscriberConfig) (Takeover, error) {
	if err := ValidateTopic(topic); err != nil {
		return Takeover{}, err
	}
	cfg.URL, cfg.Conn, cfg.JetStream = "", nil, js // only the consumer settings matter
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return Takeover{}, fmt.Errorf("invalid config: %w", err)
	}
	stream := StreamName(topic)
	st, err := js.Stream(ctx, stream)
	if err != nil {
		return Takeover{}, fmt.Errorf("jsq: look up stream %q: %w", stream, err)
	}
	if err := CheckStream(st.CachedInfo().Config, StreamConfig(topic)); err != nil {
		return Takeover{}, err
	}
	info, err := anyConsumerInfo(ctx, js, stream, from)
	if err != nil {
		return Takeover{}, fmt.Errorf("jsq: look up consumer %q on %q: %w", from, stream, err)
	}
	want := cfg.consumerConfig(topic)
	bind := want
	bind.Name, bind.Durable = from, from
	if CheckConsumer(stream, info.Config, bind) == nil {
		return Takeover{Consumer: from, Bound: true}, nil
	}
	if info.PushBound || info.NumWaiting > 0 {
		return Takeover{}, fmt.Errorf("%w: consumer %q on %q (push subscriber bound %t, pull requests waiting %d); stop its subscribers first",
			ErrConsumerActive, from, stream, info.PushBound, info.NumWaiting)
	}
	if want.Durable == from {
		return Takeover{}, CheckConsumer(stream, info.Config, want)
	}
	if c, err := js.Consumer(ctx, stream, want.Durable); err == nil {
		if err := checkSubscriberConsumer(stream, c.CachedInfo().Config, want); err != nil {
			return Takeover{}, err
		}
		return Takeover{Consumer: want.Durable, Existed: true}, nil
	} else if !errors.Is(err, jetstream.ErrConsumerNotFound) {
		return Takeover{}, fmt.Errorf("jsq: look up consumer %q on %q: %w", want.Durable, stream, err)
	}
	t := Takeover{Consumer: want.Durable, StartSeq: info.AckFloor.Stream + 1}
	if info.Delivered.Stream > info.AckFloor.Stream {
		t.Redelivered = info.Delivered.Stream - info.AckFloor.Stream
	}
	if p := uint64(max(info.NumAckPending, 0)); t.Redelivered > p {
		t.Duplicates = t.Redelivered - p
	}
	want.DeliverPolicy, want.OptStartSeq = jetstream.DeliverByStartSequencePolicy, t.StartSeq
	if _, err := js.CreateConsumer(ctx, stream, want); err != nil {
		return Takeover{}, fmt.Errorf("jsq: create consumer %q on %q at stream sequence %d: %w", want.Durable, stream, t.StartSeq, err)
	}
	return t, nil
}

// checkSubscriberConsumer is [CheckConsumer] for a subscriber's consumer,
// which may deliver by start sequence instead of all: a consumer
// [TakeOver] created.
func checkSubscriberConsumer(stream string, existing, want jetstream.ConsumerConfig) error {
	if existing.DeliverPolicy == jetstream.DeliverByStartSequencePolicy && want.DeliverPolicy == jetstream.DeliverAllPolicy {
		want.DeliverPolicy = existing.DeliverPolicy
	}
	return CheckConsumer(stream, existing, want)
}

// anyConsumerInfo returns the current info of a pull or push consumer.
func anyConsumerInfo(ctx context.Context, js jetstream.JetStream, stream, name string) (*jetstream.ConsumerInfo, error) {
	c, err := js.Consumer(ctx, stream, name)
	if err == nil {
		return c.Info(ctx)
	}
	if !errors.Is(err, jetstream.ErrNotPullConsumer) {
		return nil, err
	}
	pc, err := js.PushConsumer(ctx, stream, name)
	if err != nil {
		return nil, err
	}
	return pc.Info(ctx)
}
