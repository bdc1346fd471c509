package breaker

import (
	"context"
	"fmt"
	"time"
)

// SharedState is the state a fleet of breakers with the same [Config.Name]
// shares through a [Store] (see [Fleet]). Everything on the closed-state hot
// path stays local; only transitions, the probe outcomes and the ramp start
// are shared. The zero value is a closed breaker that never tripped.
type SharedState struct {
	// State is closed, open or half-open.
	State State `json:"state"`
	// Epoch grows by one with every published transition (and with the
	// start of a ramp or adaptive recovery). A writer that has not seen the
	// latest epoch loses its compare-and-swap.
	Epoch uint64 `json:"epoch"`
	// Trips counts the consecutive trips since the last clean close; it
	// drives the open window's backoff ([Config.OpenWindowStep]).
	Trips int `json:"trips"`
	// Window is the jittered open window of the last trip.
	Window time.Duration `json:"window"`
	// OpenUntil is when the open window ends (on the breakers' clock, the
	// wall clock in production); zero unless open and not forced.
	OpenUntil time.Time `json:"open_until,omitzero"`
	// Forced reports an operator's force open or force close: a forced open
	// fleet stays open until closed or reset.
	Forced bool `json:"forced,omitempty"`
	// Successes counts the consecutive good probes of the current half-open
	// period across the fleet.
	Successes int `json:"successes,omitempty"`
	// RampStart is when the probes passed and the ramp (or adaptive
	// recovery) began, for the ramp and adaptive policies; every replica
	// steps its ramp from this time, so the fleet admits the same share.
	RampStart time.Time `json:"ramp_start,omitzero"`
	// By names the replica ([FleetConfig.Replica]) or tool that wrote it.
	By string `json:"by,omitempty"`
	// Reason says why, e.g. "failure rate 0.60 >= 0.50 over 10 calls".
	Reason string `json:"reason,omitempty"`
	// UpdatedAt is when it was written.
	UpdatedAt time.Time `json:"updated_at,omitzero"`
}

// String summarises the state for logs and the status command.
func (s SharedState) String() string {
	out := fmt.Sprintf("%s epoch=%d trips=%d", s.State, s.Epoch, s.Trips)
	if s.Forced {
		out += " forced"
	}
	if !s.OpenUntil.IsZero() {
		out += " open_until=" + s.OpenUntil.UTC().Format(time.RFC3339Nano)
	}
	if s.State == StateHalfOpen {
		out += fmt.Sprintf(" successes=%d", s.Successes)
	}
	return out
}

// ProbeLease is one of the fleet's [Config.ProbeConcurrency] probe slots,
// held by one replica for one probe. It expires by itself after its TTL, so
// the slot of a replica that crashed frees itself.
type ProbeLease struct {
	// Name is the breaker's name.
	Name string
	// Slot is the slot index, 0..slots-1.
	Slot int
	// Revision is the store's revision of the lease; a release is checked
	// against it, so it never frees a slot another replica took after this
	// lease expired.
	Revision uint64
	// Holder is the replica holding it.
	Holder string
}

// Store holds the [SharedState] of named breakers and their probe leases,
// for a [Fleet]. Package breaker/natskv implements it on NATS JetStream
// Key-Value; [MemoryStore] implements it in memory, for one process
// (simulations, tests). Implementations must be safe for concurrent use.
// Every method that does I/O takes ctx first and returns when it is done.
type Store interface {
	// Load returns name's state and its revision (> 0). A breaker never
	// written returns the zero SharedState, revision 0 and a nil error.
	Load(ctx context.Context, name string) (SharedState, uint64, error)

	// CompareAndSwap writes st if name's revision is still rev (0: only if
	// never written) and returns the new revision. When the revision moved
	// on it returns an error matching [ErrStaleRevision] and writes
	// nothing: a stale compare-and-swap never wins.
	CompareAndSwap(ctx context.Context, name string, st SharedState, rev uint64) (uint64, error)

	// Watch starts delivering name's updates to fn, in revision order,
	// beginning with the current state if there is one, and returns once
	// the watch is started. It may skip revisions (a NATS KV watch of a
	// bucket keeping one revision per key delivers the latest): a [Fleet]
	// assumes only that each delivery is newer than the last. It stops when ctx is done. If the watch fails
	// later (the store became unreachable), fn is called once with a
	// non-nil err and the watch is over. fn must not block for long.
	Watch(ctx context.Context, name string, fn func(st SharedState, rev uint64, err error)) error

	// AcquireProbe takes a free slot among slots probe slots of name for
	// ttl. It returns an error matching [ErrNoProbeSlot] when all are held,
	// or the store's error when it is unreachable.
	AcquireProbe(ctx context.Context, name string, slots int, ttl time.Duration, holder string) (ProbeLease, error)

	// ReleaseProbe frees the lease's slot if the lease still holds it (a
	// lease that expired and was taken again is left alone).
	ReleaseProbe(ctx context.Context, lease ProbeLease) error
}

// NameChecker is implemented by a [Store] that cannot hold every breaker
// name (breaker/natskv: one KV key token). [JoinFleet] calls CheckName with
// the breaker's [Config.Name] and fails if it returns an error, rather than
// joining a fleet whose every store call would fail.
type NameChecker interface {
	CheckName(name string) error
}
