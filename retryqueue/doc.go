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
// [MetaLastError], [MetaNotBefore], and a bounded [MetaHistory]) to the
// retry topic and returns nil only after JetStream confirmed it. The caller, the breaker middleware, then
// returns nil so the router acks the source message; on an error it returns
// the error so the router nacks the source, which JetStream redelivers. The
// queue itself never acks or nacks. A copy whose source was redelivered
// anyway (its ack was lost) is a duplicate, never a loss: delivery is
// at-least-once, and partners deduplicate by the message UUID.
//
// A diversion costs one publish round trip and never waits for the open
// window. Its publish runs on its own timeout ([Config.PublishTimeout]),
// detached from the handler's context, which may already be cancelled.
// Because the source message is acked as soon as its copy is stored (and
// nacked with a delay otherwise), diversion neither uses up the source
// consumer's MaxDeliver (jsq sets it unlimited) nor leaves source
// messages pending ack while the breaker is open: a source consumer with
// MaxAckPending = 2 diverts hundreds of messages a second. A message
// diverted after a failed delivery carries [MetaNotBefore], its
// attempt-based backoff ([Config.Backoff]), lengthened by the partner's
// Retry-After hint when the failure carries a longer one
// ([RetryAfterError]); the drainer does not deliver it before then. A
// message the handler refused before contacting the partner
// ([ReasonNotAttempted]: a local throttle or bulkhead) counts no attempt;
// it gets a backoff on its own counter ([MetaNotAttempted]) instead, so a
// handler that always refuses cannot loop, and [Config.MaxAge] still ends
// it.
//
// Shutdown: a diversion whose publish is not confirmed (the publisher or
// connection closed under it, the server gone) returns an error, so the
// source is nacked or, if even that cannot be sent, redelivered after its
// AckWait: closing a router mid-diversion loses nothing. Close the
// publisher's connection only after the router has closed.
//
// # Dead letters
//
// A message goes to the dead-letter topic instead, with [MetaDeadReason],
// when its delivery failed [Config.MaxAttempts] times, when [Config.MaxAge]
// has passed since its first diversion, when its floodgate metadata is
// malformed ([Queue.Malformed]), when no copy fits the retry stream
// ([DeadReasonTooLarge], below), or when the caller reports a permanent
// error ([Queue.DeadLetter]). Dead letters are never redelivered
// automatically. They keep the message's history: [MetaHistory] lists the
// last [Config.MaxHistory] diversions, dead-letterings and replays with
// time, reason, attempt and error ([History] reads it); [MetaHistoryDropped]
// counts older entries dropped to bound the metadata.
//
// # Messages too large for the retry stream
//
// A message that fills the source stream's limit (the server's max_payload,
// headers and payload together) does not fit the retry stream once
// floodgate's metadata is added. The queue first compacts the copy (drops
// the history, cuts error texts); if it still does not fit (the client's
// max_payload check, or the stream's MaxMsgSize), no later delivery can
// divert it either, so it is dead-lettered at once with
// [DeadReasonTooLarge], at its first failed call or first rejection: at
// most one partner call. If the dead letter does not fit either, its
// payload goes to a JetStream Object Store bucket, [Config.PayloadBucket]
// (chunked, so any size fits), and the dead letter keeps the metadata, an
// empty payload and the reference ([MetaPayloadBucket],
// [MetaPayloadObject], [MetaPayloadSize]); when even the message's own
// metadata does not fit, it goes to the bucket too ([MetaMetadataObject]).
// The objects are confirmed before the dead letter is published, and the
// source is acked only after both: nothing is lost, and a redelivery
// overwrites the same objects (named by a digest of UUID and payload).
// [Queue.Restore] reads a dead letter's payload back, byte for byte. The
// bucket is created by [Provision]; the queue writes it through
// [Config.JetStream] (the [jsq.Publisher]'s by default), whose user needs
// the JetStream API for stream OBJ_<bucket> and publish rights on
// $O.<bucket>.>. Replay removes a replayed dead letter's objects;
// "floodgate purge" does not (remove them with "nats object rm", or purge
// the bucket once its dead letters are gone). Keeping the message in the
// source stream instead was rejected: a work-queue or interest source
// deletes it on ack, and the source would have to keep every message
// whose reference a dead letter holds.
//
// [Queue.Replay] (and the "floodgate replay" command) moves selected dead
// letters — all, or by original topic, or by age — back into the retry
// queue: it publishes each copy and removes the dead letter only after the
// publish was confirmed. A too-large dead letter goes back, restored, to
// its original topic instead, when the replay selects that topic.
//
// # Drain
//
// A [Drainer] consumes the retry stream with a durable pull consumer. It
// fetches only while its [Gate] (the breaker) admits messages, and only as
// many as its token bucket allows; it starts a message's call only when
// the gate has room for it, and hands back a message fetched ahead that
// finds none (the breaker opened, or the partner's bulkhead stayed full),
// so nothing sits fetched while the breaker is open and AckWait never runs
// out on a message waiting here; it respects each message's [MetaNotBefore] (the
// per-message backoff after a failed delivery) by nakking not-yet-eligible
// messages with a delay; and it acks a message only after the handler
// returned nil for it. While the breaker is half-open and no live traffic
// arrives, the gate's free probe slots make the probes come from the
// backlog, so recovery never waits for new traffic. The drain pauses at
// once when the gate admits nothing (the breaker left closed) and resumes
// on [Drainer.Wake] or the next poll.
//
// The drain rate is adaptive (AIMD): it grows while deliveries are clean
// (at first by half per interval, or doubling every 100ms while a fast
// partner answers quickly: slow start; then additively) and backs off
// multiplicatively on failed or slow deliveries, within an optional
// [DrainerConfig.MaxRate]. The drainer sees its own deliveries' outcomes;
// [Drainer.Observe] feeds it live ones. Since every drained message passes
// through the breaker-guarded handler, live and drained messages together
// never exceed what the breaker admits. [Drainer.Status] reports the
// backlog depth, the measured drain rate, the dead letters and the
// estimated time to empty.
//
// # Drain per partner
//
// A [PartnerDrainer] drains every partner of one service without
// head-of-line blocking: each partner with a backlog gets its own [Drainer]
// on its own durable consumer ([ConsumerName], filtered on the partner's
// route subject), under its own breaker's [Gate]
// ([PartnerDrainerConfig.Gate]) and its own adaptive drain rate. An open
// partner's drainer fetches nothing, so its backlog, however large, is
// never read and delays no one; a service-wide consumer would have to
// fetch it to skip it.
//
// The partners take turns on a bounded number of lanes
// ([PartnerDrainerConfig.MaxDraining]): a partner whose gate admits
// messages and whose rate has a batch ready queues for a lane, creates its
// consumer (state in server memory: the work-queue stream, not the
// consumer, holds the messages), fetches for a slice of 100ms and, while
// others wait, goes to the back of the queue; once its handlers are done
// it keeps the consumer for its next turn (at most
// [PartnerDrainerConfig.KeepConsumers] partners do) or deletes it. So
// every partner with a backlog gets a slice per round of turns, and the
// consumers on the stream stay few whatever the number of partners: the
// server checks every consumer of a work-queue stream on each ack, which
// made a consumer per partner 10-30 times slower than one consumer at
// 1,000 partners (and the lanes share the in-flight bound, so fewer lanes
// fetch larger batches). The drained messages in handlers are bounded
// across partners ([PartnerDrainerConfig.MaxInFlight]) and shared max-min
// fairly: free slots go to waiting partners in turn, and a partner holding
// its fair share waits behind those below it, so slow partner calls cannot
// crowd out the others (a partner gives its lane up before its handlers
// finish).
//
// Many partners draining at once each on their own consumer still cost
// the server: a filtered consumer walks past the other partners'
// interleaved messages to find its own. So while many partners have a
// backlog ([PartnerDrainerConfig.ServiceConsumerFrom]: by default more
// than there are lanes) and every one of them is closed without a recent
// failure, they park, delete their consumers, and the service
// drains through one consumer ([ServiceConsumerName]) that reads the
// stream in order; each message still meets its partner's own drain rate,
// and its breaker and bulkhead in the handler. The first call a partner
// does not take, or a partner leaving closed, ends it, and the partners
// go on from their own rates.
//
// A partner's drain starts when its Queue diverts a message to it, on
// [PartnerDrainer.Wake] (call it from the breaker's state listener), or
// when discovery finds its subject non-empty (the retry stream's
// per-subject counts, read at start and every
// [PartnerDrainerConfig.DiscoverInterval]: other replicas' diversions and
// backlogs from before a restart; a hashed token's key comes from its last
// message, [PartnerKey]). It stops once its backlog is empty, and deletes
// its consumer: an idle partner costs no goroutine, no consumer and no poll
// loop. This loses nothing, since the work-queue retry stream keeps every
// unacked message for the next consumer, and a [Drainer] whose consumer is
// deleted under it (by another replica) creates it again. Server-side
// InactiveThreshold was not used: it would remove the consumer only after
// the threshold (which must outlast the slowest handler), so the consumers
// would pile up again. Use [PartnerDrainer.HasBacklog] as the partner
// registry's HasBacklog, and [PartnerDrainer.Observe] to feed live
// outcomes to a partner's drain rate. A Queue with [Config.OrderingKey]
// needs one [Drainer] with [DrainerConfig.AllPartners] instead.
//
// # Order
//
// The drain is FIFO by default: stream order, a batch handled
// concurrently, and a message that fails again goes to the back of the
// stream with its backoff. With [Config.OrderingKey] set, a key's messages
// reach the partner in order: [Queue.Holds] reports live messages whose key
// has messages in the backlog, and the caller diverts them too
// ([ReasonOrdering]); the drainer runs a key's messages one at a time and
// holds the key's later messages back while an earlier one waits out its
// backoff or was diverted again, however long its copy takes to come back
// through the backlog (a hold lapses only once the drain has caught up — a
// fetch found nothing more to deliver — after its expiry, so only a
// message removed from the stream by other means, such as a purge, frees
// its key early). The cost: a live message of a held key
// pays a diversion and waits for the backlog instead of going straight to
// the partner (so one failing key delays all its later messages, though no
// other key's); the drain handles a key's messages serially; the queue
// keeps an in-memory index of the keys with messages in the backlog, a
// fixed table of [Config.OrderingBuckets] counters indexed by a hash of
// the key (1 MiB by default, whatever the number of keys), rebuilt at
// [Drainer.Run] by reading every backlog message once, in which a key
// sharing a counter with a key that has backlog is held too (a needless
// diversion, order kept; about K/OrderingBuckets of live messages with K
// keys in the backlog); and across a crash of the drainer the order of a key whose head
// was waiting out its backoff can be broken once, as can the order of a
// message whose ack or fetch reply was lost and that JetStream redelivers
// after the ack wait (at-least-once). Live consumption must be
// ordered per key too (one pull loop, or a subject per key partition): two
// messages of a key handled at once by the router can pass each other
// whatever the queue does. While the drain cannot outrun the live rate of a
// key, every live message of that key goes through the backlog.
//
// # Routes
//
// A route is a service and a partner. The service is [Config.Service], by
// default [ServiceName] of the topic the guarded handler consumes
// ([Config.Source]) and its handler name ([Config.Handler]): replicas of
// one service share it, two programs on different topics do not. The
// partner is [Config.Partner] ([DefaultPartner] when empty), or a key per
// message with [Queue.RouteTo]. A route's messages are stored under the
// subject <stream>.<service token>.<partner token> ([RouteSubject]; tokens
// from [partner.Token], injective, so "a.b" and "a_b" never share a
// subject), and carry the route in [MetaService], [MetaPartner] and
// [MetaPartnerToken]. A [Drainer]'s durable consumer is named for its
// route and filters on its route's subject, so it never receives another
// route's message: two services sharing RetryTopic, with every default,
// cannot deliver each other's messages. A drained message whose route
// metadata disagrees with its subject is dead-lettered
// ([DeadReasonRoute]), never delivered.
//
// The work-queue retry stream refuses consumers whose filters overlap, and
// [Drainer.Run] refuses a consumer of its name that filters on another
// route: both fail at start with [ErrRouteConflict], naming the setting.
//
// # Streams
//
// Topics are JetStream streams of the same name with the subjects
// <topic>.>, in file storage. [Provision] creates the retry stream
// (work-queue retention: it holds exactly the backlog), the dead-letter
// stream and the payload bucket, and refuses a retry or dead-letter stream
// whose MaxMsgSize is below a source stream's, or that has the previous
// release's layout (the topic itself as subject, [ErrPreviousLayout]):
// [Migrate] moves such a stream's messages to route subjects. The
// source topics' subscriber and publisher that keep the at-least-once
// guarantee are in package [github.com/floodgate-go/floodgate/jsq].
package retryqueue
