// Package capture records what a program under test prints and publishes,
// for tests that search it (the canary-secret tests of the examples):
//
//   - [Buffer]: an io.Writer safe for concurrent writes (a program's
//     stdout and stderr);
//   - [Tap]: a NATS wiretap, a subscription to ">" that records every
//     message published in an account (stream messages, KV entries, the
//     JetStream API's requests and replies), so what a program stores is
//     seen even if it deletes its streams or buckets before it ends;
//   - [Scraper]: a metrics endpoint fetched until the program ends.
//
// It is internal test support; its API may change with the tests.
package capture
