// Package asyncmdn completes asynchronous AS2 receipts (RFC 4130 §7.3,
// Receipt-Delivery-Option) for [as2.Sender]s configured with
// [as2.MDNAsync]: a JetStream KV [Store] of pending receipts, and a
// [Resolver] that serves the receipt endpoint and sweeps deadlines.
//
// # Model
//
// Under [as2.MDNAsync] the partner answers the POST with a bare 2xx and
// posts the MDN to our receipt URL later, perhaps hours later, far beyond
// any ack deadline. So [as2.Sender.Send] stores an [as2.PendingReceipt]
// (Message-ID, partner, the MIC and micalg computed, whether a signed
// receipt was asked for, deadline, and the original payload and metadata)
// in the [Store] before it reports success, and the source message is
// acked. From then on the record is the message's only state, shared by
// every replica:
//
//   - the receipt endpoint ([Resolver.ServeHTTP]) of any replica reads an
//     MDN, finds its record by Original-Message-ID, judges the MDN with
//     the Sender's own receipt policy ([as2.Sender.ResolveReceipt]:
//     MDNCert, RequireSignedMDN, RequireMIC, WarnOnMICMismatch), and
//     resolves the record: delivered (with a warning or not), or, for a
//     negative receipt (processed/error, failed, a MIC mismatch), a dead
//     letter with reason [retryqueue.DeadReasonPermanent] and the MDN's
//     disposition as its error. An MDN for no pending record, whose
//     signature does not verify, or unsigned while a signed one was asked
//     for, resolves nothing; one that may be early (no record yet) or
//     that meets a claim is answered 503 with Retry-After, so the partner
//     posts it again (see [Resolver.ServeHTTP] for every answer).
//   - the deadline sweep ([Resolver.SweepAt]) dead-letters a record with
//     no MDN by its deadline with reason [retryqueue.DeadReasonMDNTimeout],
//     never resending it: the partner answered 2xx, so it has the message.
//
// Each resolution happens once across replicas: a delivered record is
// deleted with its last revision, and a record to dead-letter is first
// claimed (updated with its last revision, a lease of
// [Config.ClaimLease]), then dead-lettered, then deleted. A replica that
// dies between claim and delete leaves the claim to expire, and the record
// is resolved again (at-least-once: a dead letter may then be doubled,
// never lost). Every outcome goes to [Config.OnOutcome].
//
// The breaker is not involved: it judged the HTTP exchange when Send
// returned. A record Send could not store is [as2.ErrPendingStore], which
// wraps [deliver.ErrLocal]: the middleware diverts the message and reports
// the call as neutral, never as the partner's failure.
//
// # Services
//
// Each service (retryqueue.Config.Service) is best given its own bucket
// ([StoreConfig.Bucket]): the least-privilege grants ([ServiceAccess])
// are per bucket, so services sharing one can read and change each
// other's records. Services that do share a bucket set
// [StoreConfig.Service] on their Stores: [Store.PutPending] stamps it on
// each record ([as2.PendingReceipt.Service]), [New] requires it to equal
// [Config.Queue]'s service, and a Resolver then sweeps and resolves only
// its own service's records, each dead letter going to that service's
// route; an MDN for another service's record is answered as an early one
// (503, see [Resolver.ServeHTTP]). A record naming no service (a Store
// without Service) is swept and resolved by every Resolver on the bucket,
// into its own Queue's route, as when the bucket serves one service.
// Records are keyed by Message-ID alone, so services sharing a bucket
// need distinct Message-IDs (as2.Config.MessageIDDomain per service).
//
// # Metrics
//
// With [Config.Metrics] every answer of the endpoint and every sweep dead
// letter is counted in floodgate_as2_async_receipts_total by outcome and
// reason, and each sweep sets floodgate_as2_async_pending_receipts.
//
// # Sizes
//
// A record carries the payload, so KV values are bounded by
// [StoreConfig.MaxValueSize] (default 1 MiB, the default NATS
// max_payload); [Store.MaxPayload] (about three quarters of it, less
// 64 KiB for the other fields) is the largest payload Send accepts under
// [as2.MDNAsync], a larger one being refused before it is sent. The
// endpoint reads at most [Config.MaxBodySize] bytes of an MDN.
package asyncmdn
