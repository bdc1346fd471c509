package breaker

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// MemoryStore is a [Store] in memory, shared by the breakers of one process:
// simulations of a fleet on virtual time (package sim/fleet) and tests. Its
// lease TTLs run on the given clock. Watchers are called synchronously, in
// the goroutine that wrote, after the store's lock is released, so a
// simulation on one goroutine stays deterministic. It is safe for concurrent
// use.
type MemoryStore struct {
	clock Clock

	mu       sync.Mutex
	states   map[string]memState
	leases   map[string]memLease // name/slot
	rev      uint64
	watchers map[string][]*memWatcher
	down     bool
}

type memState struct {
	st  SharedState
	rev uint64
}

type memLease struct {
	rev     uint64
	holder  string
	expires time.Time
}

type memWatcher struct {
	fn      func(SharedState, uint64, error)
	stopped bool
}

// NewMemoryStore returns an empty store whose lease TTLs run on clock (nil:
// the wall clock).
func NewMemoryStore(clock Clock) *MemoryStore {
	if clock == nil {
		clock = wallClock{}
	}
	return &MemoryStore{
		clock:    clock,
		states:   map[string]memState{},
		leases:   map[string]memLease{},
		watchers: map[string][]*memWatcher{},
	}
}

// SetDown makes every call fail with [ErrStoreDown] (true) or work again
// (false), to test a fleet's fallback to its local breakers. Setting it down
// ends the running watches with ErrStoreDown.
func (m *MemoryStore) SetDown(down bool) {
	m.mu.Lock()
	m.down = down
	var ended []*memWatcher
	if down {
		for name, ws := range m.watchers {
			ended = append(ended, ws...)
			delete(m.watchers, name)
		}
	}
	m.mu.Unlock()
	for _, w := range ended {
		w.fn(SharedState{}, 0, ErrStoreDown)
	}
}

// Load implements [Store].
func (m *MemoryStore) Load(_ context.Context, name string) (SharedState, uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.down {
		return SharedState{}, 0, ErrStoreDown
	}
	s := m.states[name]
	return s.st, s.rev, nil
}

// CompareAndSwap implements [Store].
func (m *MemoryStore) CompareAndSwap(_ context.Context, name string, st SharedState, rev uint64) (uint64, error) {
	m.mu.Lock()
	if m.down {
		m.mu.Unlock()
		return 0, ErrStoreDown
	}
	if cur := m.states[name]; cur.rev != rev {
		m.mu.Unlock()
		return 0, fmt.Errorf("%w: %s at revision %d, not %d", ErrStaleRevision, name, cur.rev, rev)
	}
	m.rev++
	nrev := m.rev
	m.states[name] = memState{st: st, rev: nrev}
	ws := append([]*memWatcher(nil), m.watchers[name]...)
	m.mu.Unlock()
	for _, w := range ws {
		m.mu.Lock()
		stopped := w.stopped
		m.mu.Unlock()
		if !stopped {
			w.fn(st, nrev, nil)
		}
	}
	return nrev, nil
}

// Watch implements [Store]. The current state is delivered before Watch
// returns.
func (m *MemoryStore) Watch(ctx context.Context, name string, fn func(SharedState, uint64, error)) error {
	m.mu.Lock()
	if m.down {
		m.mu.Unlock()
		return ErrStoreDown
	}
	w := &memWatcher{fn: fn}
	m.watchers[name] = append(m.watchers[name], w)
	cur := m.states[name]
	m.mu.Unlock()
	if cur.rev > 0 {
		fn(cur.st, cur.rev, nil)
	}
	if ctx.Done() != nil {
		context.AfterFunc(ctx, func() {
			m.mu.Lock()
			defer m.mu.Unlock()
			w.stopped = true
			ws := m.watchers[name]
			for i := range ws {
				if ws[i] == w {
					m.watchers[name] = append(ws[:i:i], ws[i+1:]...)
					break
				}
			}
		})
	}
	return nil
}

// AcquireProbe implements [Store]. An expired lease frees its slot.
func (m *MemoryStore) AcquireProbe(_ context.Context, name string, slots int, ttl time.Duration, holder string) (ProbeLease, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.down {
		return ProbeLease{}, ErrStoreDown
	}
	now := m.clock.Now()
	for i := range slots {
		k := fmt.Sprintf("%s/%d", name, i)
		if l, ok := m.leases[k]; ok && now.Before(l.expires) {
			continue
		}
		m.rev++
		m.leases[k] = memLease{rev: m.rev, holder: holder, expires: now.Add(ttl)}
		return ProbeLease{Name: name, Slot: i, Revision: m.rev, Holder: holder}, nil
	}
	return ProbeLease{}, fmt.Errorf("%w: %d of %d held (%s)", ErrNoProbeSlot, slots, slots, name)
}

// ReleaseProbe implements [Store].
func (m *MemoryStore) ReleaseProbe(_ context.Context, lease ProbeLease) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.down {
		return ErrStoreDown
	}
	k := fmt.Sprintf("%s/%d", lease.Name, lease.Slot)
	if l, ok := m.leases[k]; ok && l.rev == lease.Revision {
		delete(m.leases, k)
	}
	return nil
}

// LeasesHeld returns the number of unexpired probe leases of name.
func (m *MemoryStore) LeasesHeld(name string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.clock.Now()
	n := 0
	prefix := name + "/"
	for k, l := range m.leases {
		if len(k) > len(prefix) && k[:len(prefix)] == prefix && now.Before(l.expires) {
			n++
		}
	}
	return n
}
