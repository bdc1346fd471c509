// Package integration holds floodgate's end-to-end tests: the breaker
// middleware, the JetStream retry queue and its drainer, and an AS2 partner
// over real HTTP, on a real NATS JetStream server with file storage.
//
// The tests prove the retry queue's promises under failure:
//
//   - outage and drain: live traffic at 100 msg/s through an outage, then a
//     partner with a capacity of 200 msg/s (a compressed time scale with
//     the same ratios): nothing lost, duplicates counted and reported, no
//     re-trip caused by the drain, and the backlog drained within 1.25 ×
//     backlog / (capacity − live rate);
//   - the consumer process killed with SIGKILL mid-drain and restarted (the
//     test binary re-executes itself as the consumer): nothing lost;
//   - the NATS server restarted mid-drain: nothing lost;
//   - MaxAckPending = 2 with the breaker open: 500 messages all diverted
//     within a few seconds.
//   - two services wired as the README shows, with every route default, on
//     one NATS, each in its own process: one partner's outage, the healthy
//     service killed with SIGKILL mid-drain and restarted: nothing lost,
//     nothing delivered to the other service's partner.
//
// Tests that do not stop or restart the server use the one named by the
// NATS_URL environment variable when set, else an embedded one; the others
// always start their own embedded server.
//
// Run them with
//
//	go test -race ./integration/
//
// and with -short to skip them.
package integration
