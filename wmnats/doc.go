// Package wmnats makes watermill-nats' pkg/jetstream subscriber (v2.1.3)
// safe to run under floodgate's middleware, for applications that keep
// watermill-nats rather than move to [github.com/floodgate-go/floodgate/jsq].
//
// [NewSubscriber] returns a [*Subscriber], a message.Subscriber that is a
// watermill-nats subscriber configured as the README's "Using
// watermill-nats" recipe and wrapped in a close gate:
//
//   - one durable pull consumer per topic, shared by every router handler
//     on it and never deleted on Close, so a restart resumes at the ack
//     floor instead of re-sending the stream;
//   - the stream and the consumer are created if absent and bound as they
//     are if equal, never updated: one that differs is refused, unchanged,
//     with a [*jsq.ConfigMismatchError] ([jsq.EnsureStream],
//     [jsq.EnsureConsumer]);
//   - MaxDeliver -1 (the broker never drops a message; floodgate
//     dead-letters), MaxAckPending 2 × [Config.Handlers], one prefetched
//     message per subscription, so no message waits in the client past
//     AckWait;
//   - synchronous acks (DoubleAck: acked once the server confirms), a
//     static nak delay (never watermill-nats' MaxRetryDelay, whose Term
//     drops the message), and [jsq.Unmarshaler], which marks a message
//     with a multi-valued header malformed where watermill-nats'
//     DefaultUnmarshaler crashes the process;
//   - a close gate: Close stops passing new messages, waits for those in
//     handlers to be acked or nacked, and only then closes the
//     watermill-nats subscriber, which otherwise drops their acks and can
//     panic with "send on closed channel".
//
// Concurrency is one message at a time per router handler: add
// [Config.Handlers] handlers on the same topic with the same Subscriber.
// integration/wmnats_test.go runs it through the checks jsq passes
// (outage and drain, close mid-diversion, restart, a multi-valued header,
// the retry stream away).
package wmnats
