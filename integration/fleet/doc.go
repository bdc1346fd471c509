// Package fleet holds the integration tests of the fleet-wide breaker
// (breaker.JoinFleet with the breaker/natskv store): a 3-node NATS
// JetStream cluster started in-process on loopback, and consumer replicas
// run as separate processes (the test binary re-executed), each with its
// own connections, sharing one partner (an httptest server that records
// how many probes are in flight). The package has no non-test code.
//
// Each replica runs the product's composition, as a production consumer
// does: a Watermill router consuming the work topic through a jsq
// subscriber (one durable consumer shared by the replicas), floodgate's
// middleware around a webhook delivery to the partner, a retry queue that
// takes what the breaker rejects or what failed, and a drainer that drains
// that backlog back through the same guarded handler. The work, retry and
// dead-letter streams and the KV bucket have 3 replicas. Every test checks
// that no message is lost: each is delivered, dead-lettered with a reason,
// or still queued.
//
// TestPartnerOutage logs where the partner's errors after recovery come
// from (the wave that trips, calls admitted after another replica tripped,
// probes) and how fast each trip reached every replica. Set
// FLOODGATE_FLEET_TIMELINE=1 to print every request around each trip.
package fleet
