// Package floodgate wires floodgate in one call: a circuit breaker and a
// bulkhead per partner, a durable retry queue on NATS JetStream, a drain per
// partner and its feedback, and optional Prometheus metrics, around one
// Watermill handler that delivers messages to external partners.
//
//	fg, err := floodgate.New(ctx, router, floodgate.Config{
//		Name: "send-orders", Topic: "orders", Subscriber: sub, JetStream: js,
//		PartnerKey: func(m *message.Message) string { return m.Metadata.Get("AS2-To") },
//		Deliver:    sendToPartner,
//	})
//
// [New] adds two handlers to the router. The guarded handler consumes the
// topic: for each message it picks the partner (Config.PartnerKey), asks
// that partner's breaker and bulkhead, delivers, and reports the outcome.
// A message the breaker turns away, or whose delivery failed, is diverted to
// the retry stream under its route (service and partner) and acked only once
// JetStream confirmed the copy; a permanent failure is dead-lettered with a
// reason. The drain handler ([DrainHandlerName]) feeds each partner's backlog
// back through the same guarded handler, only as fast as that partner's
// breaker admits and its adaptive rate allows, and never lets one partner's
// backlog hold up another's. Both handlers start with the router's Run and
// stop with its Close.
//
// One message's walk, and the package that holds each step:
//
//	jsq (subscriber) → middleware → partner (registry) → breaker → Config.Deliver
//	                       │ turned away / failed
//	                       ▼
//	           retryqueue (route subject) → retryqueue.PartnerDrainer → middleware …
//
// The lower-level packages stay public for programs that compose their own
// (per-key ordering, a breaker shared with other code): see the README's
// "Composing the parts yourself".
package floodgate
