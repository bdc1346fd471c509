// Package exampleutil holds the wiring that floodgate's runnable examples
// (examples/edi-as2, examples/geofence) share, so each example's own code is
// about its domain:
//
//   - [StartNATS]: an embedded JetStream server (its store in a temporary
//     folder) or an external one named by a URL, a connection, a JetStream
//     context and a confirming publisher; the streams it provisions are
//     deleted again on an external server by [NATS.Close], so a run leaves
//     it as it found it.
//   - [MetricsFlags]: a Prometheus registry served at -metrics-addr (a
//     port alone binds to loopback), over HTTPS with -metrics-tlscert and
//     -metrics-tlskey, mTLS with -metrics-tlsca, for
//     floodgate.Config.Metrics.
//   - [Counters] and [PartnerCounters]: what the middleware and each
//     partner's breaker reported, for the per-second timeline and the
//     summary; [DrainTimer]: a partner's drain time.
//   - [Summary]: the keys every example's -summary JSON has, totals over
//     its partners; [PartnerSummary.Account] checks what each partner
//     received against what was produced for it, counting what another
//     partner received as misdelivered.
//   - [FlagCheck]: range checks for command-line flags whose errors name the
//     flag.
//
// It is internal: its API serves the examples and may change with them.
package exampleutil
