// Package retryqueue is floodgate's durable retry queue on NATS JetStream:
// it diverts messages the breaker rejected, or whose delivery failed, to a
// retry stream, dead-letters those that cannot be delivered, and drains the
// backlog back through the breaker-guarded handler only as fast as the
// breaker admits.
//
// # Diversion (at-least-once)
//
// [Queue.Divert] publishes a copy of the message (same UUID, payload and
// metadata, plus the floodgate metadata: [MetaAttempt], [MetaReason],
// [MetaOriginalTopic], [MetaFirstDivertedAt], [MetaDivertedAt],
// [MetaLastError], [MetaNotBefore]) to the retry topic and returns nil only
// after JetStream confirmed it. The caller, the breaker middleware, then
// returns nil so the router acks the source message; on an error it returns
// the error so the router nacks the source, which JetStream redelivers. The
// queue itself never acks or nacks. A copy whose source was redelivered
// anyway (its ack was lost) is a duplicate, never a loss: delivery is
// at-least-once, and partners deduplicate by the message UUID.
//
// A diversion costs one publish round trip and never waits for the open
// window. Its publish runs on its own timeout ([Config.PublishTimeout]),
// detached from the handler's context, which may already be cancelled.
//
// # Dead letters
//
// A message goes to the dead-letter topic instead, with [MetaDeadReason],
// when its delivery failed [Config.MaxAttempts] times, when [Config.MaxAge]
// has passed since its first diversion, when its floodgate metadata is
// malformed ([Queue.Malformed]), or when the caller reports a permanent
// error ([Queue.DeadLetter]). Dead letters are never redelivered
// automatically.
//
// # Drain
//
// A [Drainer] consumes the retry stream with a durable pull consumer. It
// fetches only as many messages as its [Gate] (the breaker) admits right
// now and its token bucket allows, so nothing sits prefetched while the
// breaker is open; it respects each message's [MetaNotBefore] (the
// per-message backoff after a failed delivery) by nakking not-yet-eligible
// messages with a delay; and it acks a message only after the handler
// returned nil for it.
//
// # Streams
//
// Topics are JetStream streams of the same name with one subject of the same
// name, in file storage. [Provision] creates the retry stream (work-queue
// retention: it holds exactly the backlog) and the dead-letter stream. The
// source topics' subscriber and publisher that keep the at-least-once
// guarantee are in the module's internal/jsq package.
package retryqueue
