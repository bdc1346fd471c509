// Package fleet simulates a fleet of N consumer replicas in front of one
// dependency, each with its own [breaker.Breaker], and compares independent
// breakers with breakers that share their state through a
// [breaker.MemoryStore] ([breaker.JoinFleet], the seam that package
// breaker/natskv implements on NATS JetStream KV).
//
// Time is virtual, as in package sim: arrivals, call completions and every
// breaker's timers are events in one queue run in time order on one
// goroutine, and the fleets run Inline (store calls synchronous), so a seed
// gives the same result every run. The offered load ([sim.Scenario.Rate])
// is spread round-robin over the replicas; the dependency follows the
// scenario's phases (healthy, down, fragile with a capacity whose excess
// fails, healthy). [Result] reports the probes that reached the dependency
// during the outage, the most probes in flight at once across the fleet,
// the errors after recovery and the time to full traffic (every replica
// closed for good).
package fleet
