// Package jsq configures Watermill publishers and subscribers on NATS
// JetStream for at-least-once delivery, for floodgate's source topics, its
// retry queue and its dead letters.
//
// # Topics and streams
//
// A Watermill topic is a NATS subject: one token ("edi_orders") or several
// separated by '.' ("edi.orders.850"), without wildcards, '/', '\\' or
// whitespace ([ValidateTopic]). It maps to one JetStream stream with the
// single subject topic, in file storage ([StreamConfig]). The stream is
// named [StreamName](topic): the topic itself when it has no '.' (as in
// earlier releases), else its injective encoding ("edi=2Eorders=2E850"),
// so distinct topics never share a stream.
//
// # Connections
//
// [Publisher] and [Subscriber] open a connection of their own to a URL, or
// use one the application gives them ([PublisherConfig.Conn],
// [SubscriberConfig.Conn]) or a JetStream context on one
// ([PublisherConfig.JetStream], [SubscriberConfig.JetStream]), so an
// application needs a single connection. Close closes only a connection it
// opened.
//
// # Watermill conformance
//
// The package passes Watermill's Pub/Sub conformance suite
// (pubsub/tests.TestPubSub) with these features: Persistent, ConsumerGroups
// (a group is a durable consumer, [SubscriberConfig.ConsumerName]; its
// subscribers share its messages), at-least-once rather than exactly-once,
// and GuaranteedOrder only at Concurrency 1 with a single subscriber of the
// consumer, while no message is nacked or outlives AckWait.
//
// # Moving from another subscriber
//
// [TakeOver] moves a topic from another durable consumer (a watermill-nats
// subscriber's, say) to jsq: it binds to the consumer when it equals jsq's,
// and otherwise creates jsq's consumer at the old one's ack floor + 1. The
// messages above the ack floor are then delivered again; of those, the
// ones the old subscribers had acked out of order, at most the old
// consumer's delivered count above its ack floor less its pending acks
// ([Takeover.Duplicates]), are handled twice.
//
// # Existing streams and consumers
//
// jsq creates a stream or durable consumer that is missing, and never
// updates one that exists. An existing one is bound as it is when it equals
// what jsq would create in every field jsq sets:
//
//   - streams ([EnsureStream], [Subscriber.Subscribe], retryqueue.Provision):
//     Subjects (as a set) and Storage ([CheckStream]); Retention is set on
//     creation only: any retention keeps a source message until jsq's
//     consumer acks it (retryqueue.Provision requires its own);
//   - consumers ([Subscriber.Subscribe], the retry queue's drainer):
//     AckPolicy, DeliverPolicy, DeliverSubject (a pull consumer), AckWait,
//     MaxDeliver, MaxAckPending ([CheckConsumer], [EnsureConsumer]); the
//     subscriber also accepts DeliverPolicy by start sequence, the
//     consumer [TakeOver] creates.
//
// Otherwise it is refused, unchanged, with a [*ConfigMismatchError]
// ([ErrConfigMismatch]) naming each differing field with the server's and
// jsq's values; edit or delete it, or configure jsq to match. Fields jsq
// does not set (replicas, placement, limits, description, filter subjects,
// ...) are the operator's and not compared. A field an operator left to
// the server's default compares as the value the server filled in: a
// consumer created with no AckWait, MaxDeliver or MaxAckPending has 30s,
// -1 and 1000, jsq's defaults. Before floodgate refused them, changed
// settings (say, a new [SubscriberConfig.AckWait]) were applied by
// overwriting the consumer; now the operator changes the consumer first.
//
// # Wire format
//
// A Watermill message is a NATS message whose data is the payload, whose
// header "_watermill_message_uuid" is the UUID and whose other headers are the
// metadata, one value each: the format of watermill-nats' NATSMarshaler, so
// watermill-nats publishers and subscribers interoperate with this package.
// NATS trims header values and replaces CR and LF in them with spaces, so a
// metadata value survives the trip only if it has neither. Headers starting
// with "Nats-" belong to the server ([Reserved]) and never become metadata.
//
// # Acknowledgement path of [Subscriber]
//
// The subscriber uses a durable pull consumer (explicit ack, MaxDeliver
// unlimited by default: see "Finite MaxDeliver"). It asks the server for
// messages in batches, never for more than
// [SubscriberConfig.Concurrency] + [SubscriberConfig.Prefetch] (default
// max(4×Concurrency, 32)) messages delivered and not yet settled, and
// hands them to the Watermill router with at most Concurrency awaiting
// their outcome; the rest wait in the subscriber, oldest first.
//
// A waiting message's AckWait runs on the server from its delivery. So
// that none runs out, the subscriber sends an in-progress ack
// (msg.InProgress, which restarts the server's AckWait) for every message
// that has waited AckWait/5 since its delivery or its last one, every
// AckWait/5, and again when it hands over a message that waited longer than
// AckWait/10. A handler therefore has between 9/10 of AckWait and AckWait
// from hand-over before the subscriber gives up on it (below); the
// subscriber gives up when the server's AckWait runs out, never later.
// When the subscription ends, messages still waiting are nakked without
// delay, so the next subscriber of the durable consumer gets them at once;
// only a message the server sent in the instant of closing may still wait
// for its AckWait. For each message handed over:
//
//   - The handler returns nil: the router acks; the subscriber acks to the
//     server with a reply subject and awaits the server's confirmation (as
//     DoubleAck does) in the background, on one NATS subscription per
//     [Subscriber.Subscribe], while the next message is handed over; the
//     subscription's channel closes only after every confirmation, or 5 s
//     after the last ack. If one fails (server gone, consumer deleted) the
//     error is logged and the server redelivers the message after AckWait:
//     a duplicate, never a loss.
//   - The handler returns an error (or panics): the router nacks; the
//     subscriber naks with the delay of [SubscriberConfig.NakDelay] (default
//     exponential in the delivery count), so a failing message does not
//     spin. If the nak cannot be sent the server redelivers after AckWait.
//   - The handler has not finished when the message's AckWait runs out
//     (at least 9/10 of [SubscriberConfig.AckWait] after hand-over): the
//     subscriber gives up, sends nothing and cancels the message's context
//     with cause [ErrAckWait] (a [context.DeadlineExceeded]: floodgate's
//     middleware counts the call as a timeout); the server redelivers the
//     message after AckWait. A later Ack is ignored.
//   - The router closes (the subscription's context is done) or the
//     subscriber closes while a message is in the handler: the handler keeps
//     running for [SubscriberConfig.CloseGrace]; an ack or nack within it is
//     sent. After it the subscriber sends nothing and cancels the message's
//     context with cause [ErrClosing]; the server redelivers the message to the next subscriber of
//     the durable consumer after AckWait. A later Ack is ignored. Close
//     never deletes the consumer.
//
// # Finite MaxDeliver
//
// After a nack, or an AckWait expiry, on the last delivery a consumer's
// MaxDeliver allows, the server gives up on the message: it is never
// delivered again and no stream records it (it stays in a limits-retention
// source stream, skipped, and the server publishes a MAX_DELIVERIES
// advisory). jsq therefore defaults to MaxDeliver -1 (unlimited) and
// refuses a finite [SubscriberConfig.MaxDeliver] unless
// [SubscriberConfig.AllowFiniteMaxDeliver] is set. The subscriber puts each
// message's [Delivery] (stream, sequence, delivery count, the consumer's
// MaxDeliver) in its context ([DeliveryFrom]) and logs an error when it
// naks or gives up on a last delivery. floodgate's middleware reads it: on
// the last delivery it dead-letters, with reason "max-deliver", a message
// it would otherwise nack (its diversion or dead-letter publish failed, or
// its context was done before admission), and when even that publish fails
// it logs the stream and sequence and emits a Nacked event with reason
// "max-deliver". A handler without the middleware must do the same itself.
// A finite MaxDeliver also turns prefetch off ([SubscriberConfig.Prefetch]
// defaults to none, and a positive one is refused): a message waiting in
// the subscriber is nakked on Close without passing through any handler,
// which on its last delivery would drop it.
//
// The unmarshaler ([Unmarshal]) never fails: a header with several values
// keeps its first and marks the message with the metadata key
// [MetaMalformed], so the handler can dead-letter it.
//
// # Why not watermill-nats' pkg/jetstream Subscriber
//
// Its v2.1.3 Subscriber, used as is, loses the properties above: its default
// consumer is ephemeral (deleted on Close, taking unacked messages with it);
// its Consume prefetches up to 500 messages and lets their AckWait run
// out while they wait; its DefaultUnmarshaler errors
// on a multi-valued header, after which it dereferences a nil message and
// the process crashes; Close drains and closes any connection it was given;
// and on close it closes its output channel while a message callback may
// still be sending on it (a data race the race detector reports, and a
// possible "send on closed channel" panic).
package jsq
