// Package fleet holds the integration tests of the fleet-wide breaker
// (breaker.JoinFleet with the breaker/natskv store): a 3-node NATS
// JetStream cluster started in-process on loopback, and consumer replicas
// run as separate processes (the test binary re-executed), each with its
// own connections, sharing one partner (an httptest server that records
// how many probes are in flight). The package has no non-test code.
package fleet
