package fleet

import "errors"

// Sentinel errors. Test for them with [errors.Is].
var (
	// ErrInvalidReplicas is returned (wrapped) by [Simulate] for a fleet
	// size outside 1..64.
	ErrInvalidReplicas = errors.New("fleet: replicas must be in 1..64")

	// ErrUnsupportedScenario is returned (wrapped) by [Simulate] and
	// [Compare] for a valid [sim.Scenario] that uses a feature this
	// package does not model: a healthy Capacity, Overflow slow, a
	// SlowOutage, a Backlog or a HealthCheck. The error names the field.
	ErrUnsupportedScenario = errors.New("fleet: scenario feature not modelled")
)
