// Package jsq configures Watermill publishers and subscribers on NATS
// JetStream for at-least-once delivery, for floodgate's source topics, its
// retry queue and its dead letters.
//
// # Topics and streams
//
// A Watermill topic maps to one JetStream stream of the same name with the
// single subject of the same name, in file storage ([StreamConfig]). Topics
// must therefore be valid stream names: no '.', '*', '>', '/', '\\' or
// whitespace ([ValidateTopic]).
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
// unlimited) and pull loops that each fetch one message, hand it to the
// Watermill router and wait for its outcome before fetching the next, so no
// message waits prefetched in the client with its AckWait running. For each
// message:
//
//   - The handler returns nil: the router acks; the subscriber acks to the
//     server and waits for the server's confirmation (DoubleAck). If that
//     confirmation fails (server gone) the error is logged and the server
//     redelivers the message after AckWait: a duplicate, never a loss.
//   - The handler returns an error (or panics): the router nacks; the
//     subscriber naks with the delay of [SubscriberConfig.NakDelay] (default
//     exponential in the delivery count), so a failing message does not
//     spin. If the nak cannot be sent the server redelivers after AckWait.
//   - The handler has not finished after [SubscriberConfig.AckWait]: the
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
// [SubscriberConfig.Concurrency] runs several loops on the same durable
// consumer.
//
// The unmarshaler ([Unmarshal]) never fails: a header with several values
// keeps its first and marks the message with the metadata key
// [MetaMalformed], so the handler can dead-letter it.
//
// # Why not watermill-nats' pkg/jetstream Subscriber
//
// Its v2.1.3 Subscriber, used as is, loses the properties above: its default
// consumer is ephemeral (deleted on Close, taking unacked messages with it);
// its Consume prefetches up to 500 messages; its DefaultUnmarshaler errors
// on a multi-valued header, after which it dereferences a nil message and
// the process crashes; Close drains and closes any connection it was given;
// and on close it closes its output channel while a message callback may
// still be sending on it (a data race the race detector reports, and a
// possible "send on closed channel" panic).
package jsq
