// Package natskv is a [breaker.Store] on NATS JetStream Key-Value, so the
// breakers of a fleet of consumer replicas share one state and one probe
// budget (see [breaker.JoinFleet]).
//
// # Layout
//
// One KV bucket (default "floodgate_breakers") holds, per breaker name N:
//
//	N.state     the breaker.SharedState as JSON; every write is a
//	            compare-and-swap on the key's revision (KV Update with the
//	            last revision, or Create for the first write), so a stale
//	            writer never wins
//	N.probe.i   probe slot i (0 <= i < ProbeConcurrency): created with a
//	            per-key TTL (JetStream message TTL, nats-server 2.11+) by the
//	            replica that takes it, deleted (revision-checked) when the
//	            probe reports; a replica that crashed leaves it to expire
//
// Replicas learn of changes through a KV watch on N.state. The bucket keeps
// one revision per key (History 1) and enables per-key TTLs
// (LimitMarkerTTL).
//
// # Production
//
// On a NATS cluster create the bucket with [Config.Replicas] = 3, so the
// shared state survives the loss of a node (the integration test in
// integration/fleet kills one node of three during an outage). The same
// applies to the retry-queue and dead-letter streams; see docs/fleet.md in
// the floodgate repository ("Running a fleet").
package natskv
