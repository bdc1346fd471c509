// Package webhooktest is an in-process webhook consumer for examples and
// tests: an [http.Handler] that verifies the signature headers of
// [github.com/floodgate-go/floodgate/deliver/webhook] (Standard Webhooks by
// default) with a [webhook.Verifier], records every delivery by its
// webhook-id (or Idempotency-Key) (so duplicates from at-least-once
// delivery are counted, and the effect is applied once), and follows a
// latency fault script.
//
// # Fault script
//
// A [Consumer] follows a script of [Phase]s, each lasting a Duration from
// the script's start (t=0, set by [Consumer.Start] or by the first request);
// the last phase lasts forever. In a phase every request waits Latency,
// except a fraction SlowFraction of them, chosen evenly (request n is slow
// when floor(n·f) > floor((n-1)·f), so the choice is deterministic) that
// wait SlowLatency: a phase with SlowFraction 0.05 and SlowLatency 900 ms
// has a P99 of 900 ms. A phase with Status answers that status instead
// (after the latency), as a consumer that is down.
//
// [Degraded] builds the script of the geofence design note: the P99 spikes
// to a latency until a recovery time, then the consumer is fast.
//
// # Records
//
// A request is processed when its latency has elapsed, whether or not the
// client is still waiting: the consumer did the work and only the answer
// was lost, which is what makes the sender retry and the idempotency key
// matter. [Consumer.Deliveries] maps each key to the number of times it was
// processed; Stats counts the rest.
package webhooktest
