package jsq

import (
	"context"
	"errors"
	"fmt"
)

// ErrInvalidTopic is returned for a topic that is not a valid JetStream
// stream name.
var ErrInvalidTopic = errors.New("jsq: invalid topic")

// ErrInvalidConfig is wrapped by the constructors' config errors.
var ErrInvalidConfig = errors.New("jsq: invalid config")

// ErrAckWait is the cause ([context.Cause]) with which the subscriber
// cancels a message's context when the handler has not acked or nacked it
// within [SubscriberConfig.AckWait]. It wraps [context.DeadlineExceeded]:
// the handler ran out of time, so a middleware can count the call as a
// timeout rather than as a shutdown.
var ErrAckWait = fmt.Errorf("jsq: handler exceeded AckWait: %w", context.DeadlineExceeded)

// ErrClosing is the cause with which the subscriber cancels a message's
// context when the subscription closes and [SubscriberConfig.CloseGrace]
// has run out.
var ErrClosing = errors.New("jsq: subscriber closing")

// ErrConfigMismatch is matched ([errors.Is]) by a [*ConfigMismatchError]:
// an existing stream or consumer differs from what jsq would create in a
// field jsq sets, so jsq refuses to use it and leaves it unchanged.
var ErrConfigMismatch = errors.New("jsq: existing stream or consumer differs")

// ErrConsumerActive is returned by [TakeOver] when the consumer to take
// over from still has a subscriber (push) or waiting pull requests: its
// ack floor may still move, so starting after it could skip a message.
var ErrConsumerActive = errors.New("jsq: consumer still in use")
