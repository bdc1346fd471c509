// Package fleet simulates a fleet of N consumer replicas in front of one
// dependency, each with its own [breaker.Breaker], and compares independent
// breakers with breakers that share their state through a
// [breaker.MemoryStore] ([breaker.JoinFleet], the seam that package
// breaker/natskv implements on NATS JetStream KV).
//
// Time is virtual, as in package sim: arrivals, call completions and every
// breaker's timers are events in one queue run in time order on one
// goroutine, and the fleets run Inline (store calls synchronous), so a seed
// gives the same result every run. Arrivals and latencies draw from
// separate random streams of [sim.Scenario.Seed] (the streams package sim
// uses), so every fleet of one seed, whatever its size, sharing or
// strategy, is offered the same calls as package sim's single breaker.
//
// It has its own, simpler engine than package sim's, and models a subset of
// [sim.Scenario]:
//
//   - the offered load: Rate, Arrivals (Poisson or uniform), spread
//     round-robin over the replicas; Duration and Seed;
//   - the dependency's phases: healthy, down (RecoverAt, Outage: every call
//     fails), fragile (Fragile, FragileCapacity: a token bucket with a
//     burst of 100 ms of capacity; the excess fails), healthy again;
//   - the latency of every call, drawn from Healthy;
//   - the breakers of the sim strategies ([sim.StrategyConfig]), with the
//     scenario's SlowCallDuration, open window and trip window settings.
//
// It does not model a healthy Capacity, Overflow slow, a SlowOutage, a
// Backlog (a diverted call is not retried) or a HealthCheck: [Simulate] and
// [Compare] return an error wrapping [ErrUnsupportedScenario] that names
// the field rather than ignore it. (Slow and DrainRate are used only by
// those features.)
//
// [Result] reports the probes that reached the dependency during the
// outage, the most probes in flight at once across the fleet, the errors
// after recovery and the time to full traffic, which here means every
// replica closed for good (package sim's time to close, taken over the
// fleet), not package sim's time to full traffic.
package fleet
