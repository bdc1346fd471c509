// Package middleware composes floodgate's parts into a Watermill
// [message.HandlerMiddleware] that guards the delivery of each message to an
// external partner.
//
// For every message the middleware:
//
//  1. dead-letters it with a reason if its floodgate metadata is malformed
//     (see [retryqueue.Queue.Malformed]), so a bad message never crashes the
//     router and is never silently dropped. Only a message with a metadata
//     key starting with "floodgate_" is checked (every drained one, and any
//     live one claiming floodgate state); another is checked when it is
//     diverted, and dead-lettered then if it cannot be queued;
//  2. dead-letters it with reason [DeadReasonMetadataTooLarge] if its own
//     metadata is larger than [Config.MaxMetadataSize] (32 KiB by default),
//     counted in the same pass over the metadata as step 1's check;
//  3. with per-key ordering on ([retryqueue.Config.OrderingKey]), diverts it
//     (reason "ordering") while its key still has messages in the backlog;
//  4. asks the [breaker.Breaker] for a permit. When the breaker rejects the call
//     (open, or half-open with every probe slot taken) the message is diverted
//     to the durable retry queue with reason "open", "probe-limit" or, while
//     a ramp or adaptive recovery throttles, "ramp";
//  5. when admitted, runs the wrapped handler under a deadline
//     ([Config.Timeout], or none with [NoTimeout]) and reports the outcome
//     with its latency to the breaker, which judges slow calls ([IsProbe]
//     tells the handler its call is a half-open probe);
//  6. diverts a retryable failure to the retry queue (reason "failure") and
//     dead-letters a permanent one ([Config.IsPermanent]).
//
// # Handler errors
//
// The middleware honours the breaker's Classifier
// ([breaker.Config.Classifier]) for what the breaker counts, but not
// before its own rules. A handler error is judged in this order, the first
// match wins:
//
//	error                                 breaker                    message
//	nil                                   success (slow if slow)     delivered, acked
//	deliver.Warning in its chain          success (slow if slow)     delivered, acked; Event.Warning set
//	deliver.ParkError in its chain        neutral; breaker forced    diverted "parked", attempt counted
//	                                      open (the partner parked)
//	wraps ErrNotAttempted                 permit cancelled           diverted "not-attempted", no attempt counted
//	shutdown (own context cancelled)      permit cancelled           diverted "failure"
//	IsPermanent                           neutral                    dead-lettered "permanent"
//	wraps deliver.ErrLocal                neutral                    diverted "failure", attempt counted
//	any other (a panic: always failure)   the Classifier's outcome   diverted "failure", attempt counted
//	                                      (default: failure)
//
// A [deliver.Warning] (the partner took the message, its answer was
// imperfect) is a success whatever else its chain holds: sending again
// would deliver twice. So [ErrNotAttempted] wins over IsPermanent, and IsPermanent over the
// Classifier: the Classifier decides only what the breaker counts (a
// neutral verdict is counted by nothing), never the message's fate, since
// the partner was contacted and the message not delivered. A cancelled
// permit frees its slot (and a fleet's probe lease) and counts nothing: a
// probe refused by a local throttle or bulkhead, or cut short by shutdown,
// leaves the breaker half-open with its trip count unchanged; the next
// call is a probe, and MaxProbeWait still expires a probe never reported. A message
// diverted as not attempted comes back only after a backoff on its own
// counter, or its [NotAttemptedError.RetryAfter] when longer (see
// [retryqueue.ReasonNotAttempted]); MaxAge still dead-letters it.
//
// The handler returns nil, so the router acks the source message, only after
// the outcome is durable: delivered, or confirmed by JetStream in the retry or
// dead-letter stream. When a diversion or dead-letter publish is not confirmed
// the handler returns an error, the router nacks, and the broker redelivers
// the message: it is never dropped. The exception is a source consumer
// with a finite MaxDeliver (jsq's [jsq.SubscriberConfig.AllowFiniteMaxDeliver]),
// whose broker drops a message nacked on its last delivery: there the
// middleware dead-letters it with reason [DeadReasonMaxDeliver] instead of
// nacking, and when even that publish fails it logs the message's stream
// and sequence and emits Nacked with that reason ([jsq.Delivery] tells the
// last delivery). Diversions and dead-letter publishes run
// on their own context and timeout, never on the handler's possibly cancelled
// one.
//
// The same wrapped handler serves the retry queue's drainer
// ([retryqueue.Drainer]), so backlog messages go through exactly the same
// breaker-guarded path as live ones.
//
// # Per-partner mode
//
// With [Config.Partners] (a [partner.Registry]) instead of
// [Config.Breaker], one middleware guards many partners, each with its own
// breaker and bulkhead, created on first use from the registry's template.
// A live message's partner key is [Config.PartnerKey] of it (untrusted
// input: any byte string, mapped to a safe token by [partner.Token]), or
// [Config.DefaultPartner] when that is ""; a drained message's is its
// route's ([retryqueue.DrainedPartner]), never chosen again from its
// payload or metadata. A handler that delivers by key must do the same:
// take a drained message's partner from retryqueue.DrainedPartner(
// msg.Context(), msg), not from its metadata. Every diversion and dead
// letter goes to the partner's route ([retryqueue.Queue.RouteTo],
// [retryqueue.Queue.DeadLetterTo]), and [Event.Partner] is its token.
// Admission ([partner.Registry.Acquire]) adds these outcomes to the
// table above; the breaker's own rejections divert as in single-partner
// mode, and the lease reports the outcome exactly as a permit does:
//
//	admission fails with         message                                       event (Action / Reason)
//	no key, no DefaultPartner    dead-lettered, empty key's route ("=")        dead-lettered / no-partner, Partner ""
//	partner.ErrPartnerLimit      diverted as not attempted, no attempt counted diverted / partner-limit
//	partner.ErrBulkheadFull      diverted as not attempted, no attempt counted diverted / bulkhead
//	partner.ErrKeyTooLong        dead-lettered                                 dead-lettered / partner-key-too-long
//	partner.ErrInvalidConfig     dead-lettered (Override's bug, logged)        dead-lettered / partner-config
//	partner.ErrClosed            nacked (shutting down)                        nacked
//
// A partner-limit or bulkhead diversion is a not-attempted one in the
// queue ([retryqueue.ReasonNotAttempted] in its metadata, the cause in its
// history), so it backs off on its own counter and is never dead-lettered
// for the cap; the distinct Event.Reason ([ReasonPartnerLimit],
// [ReasonBulkhead]) is one of a fixed set, a bounded label value. A
// per-partner drainer takes each partner's budget from [PartnerDrainGate].
//
// # Cost
//
// A healthy message (closed breaker, no floodgate metadata, delivered)
// reads the breaker's clock twice (admission and end), takes no lock and
// allocates nothing with [NoTimeout], one small object at a Timeout (the
// handler's context, whose timer is made only if the handler waits on
// it); its stack frames stay small, as Watermill runs each message on a
// new goroutine. See BENCHMARKS.md for the numbers against Watermill's
// CircuitBreaker middleware.
package middleware
