// Package bench compares the closed-state path of floodgate's breaker with
// its peers, github.com/sony/gobreaker/v2 and
// github.com/failsafe-go/failsafe-go, and measures floodgate's closed path
// with many calls in flight and the heap an idle breaker takes beside its
// peers' (inflight_test.go), and the whole pipeline end to end on an
// embedded JetStream server: jsq and watermill-nats, with floodgate's
// middleware, Watermill's CircuitBreaker or none (e2e_test.go). It is a
// separate module, so users of
// floodgate do not inherit the peers. See BENCHMARKS.md at the repository
// root for results and the command that reproduces them.
package bench
