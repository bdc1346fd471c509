// Package exampleutil holds the wiring that floodgate's runnable examples
// (examples/edi-as2, examples/geofence) share, so each example's own code is
// about its domain:
//
//   - [StartNATS]: an embedded JetStream server (its store in a temporary
//     folder) or an external one named by a URL, a connection, a JetStream
//     context and a confirming publisher; the streams it provisions are
//     deleted again on an external server by [NATS.Close], so a run leaves
//     it as it found it.
//   - [NewGuard]: a breaker-guarded delivery on the retry queue, wired the
//     same way in every example: [retryqueue.Provision] and [retryqueue.New],
//     [middleware.New] around the delivery handler, a [retryqueue.Drainer]
//     behind [middleware.DrainGate], and a breaker listener that counts trips
//     and wakes the drainer.
//   - [Counters]: what the middleware and the breaker reported, for the
//     per-second timeline and the summary.
//   - [Summary]: the keys every example's -summary JSON has, and
//     [Summary.Account], which checks what a partner received against what
//     was produced.
//   - [FlagCheck]: range checks for command-line flags whose errors name the
//     flag.
//
// It is internal: its API serves the examples and may change with them.
package exampleutil
