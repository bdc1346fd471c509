package partner

import (
	"github.com/floodgate-go/floodgate/breaker"
)

// Sweep evicts, now (by [Config.Clock]), every partner that has gone
// unused for [Config.IdleAfter] and can be evicted, and returns how many it
// evicted. The registry also sweeps by itself when it creates a partner
// (see [Config.SweepInterval]); call Sweep from a loop you already run to
// bound how long idle partners stay. It runs in the calling goroutine,
// visits every partner (O(partners)) and calls [Config.HasBacklog] and
// [Config.OnEvict] with no lock of the registry held (they must not call
// Sweep). Sweeps do not overlap: a Sweep waits for one in progress.
func (r *Registry) Sweep() int {
	r.sweepMu.Lock()
	defer r.sweepMu.Unlock()
	return r.sweepLocked(r.now())
}

// sweep runs an automatic sweep at now if one is still due and none is in
// progress (a caller never waits for a sweep, nor deadlocks when a hook
// called by one creates a partner).
func (r *Registry) sweep(now int64) {
	if !r.sweepMu.TryLock() {
		return
	}
	defer r.sweepMu.Unlock()
	if now-r.lastSweep.Load() >= int64(r.cfg.SweepInterval) {
		r.sweepLocked(now)
	}
}

// sweepLocked requires sweepMu held.
//
// Idle time is tracked without reading the clock on the hot path: a use
// stores the sweep epoch in Partner.seen. A sweep starts a new epoch; a
// partner whose seen is the epoch that just ended was used since the last
// sweep, so its idleSince becomes now (at most the true idle time, never
// more). Any other partner has been idle since its idleSince.
func (r *Registry) sweepLocked(now int64) int {
	r.lastSweep.Store(now)
	e := r.epoch.Add(1) - 1
	idle := int64(r.cfg.IdleAfter)
	evicted := 0
	r.m.Range(func(_, v any) bool {
		p := v.(*Partner)
		switch {
		case p.seen.Load() >= e:
			p.idleSince.Store(now)
		case now-p.idleSince.Load() >= idle && r.evict(p, e):
			evicted++
		}
		return true
	})
	return evicted
}

// evict removes p if it can be evicted: nothing in flight, closed, not
// forced, its backoff ladder at its base, no backlog, and unused since
// epoch e began. It calls the breaker
// and HasBacklog without the registry's lock, then takes the lock and
// marks p evicted with a compare-and-swap on the word read before those
// checks: any admission since (every call and every With advances the
// word's sequence) makes it fail, so a breaker found closed cannot have
// left the closed state meanwhile through a call of ours.
func (r *Registry) evict(p *Partner, e uint64) bool {
	w := p.word.Load()
	if w&(countMask|evictedBit) != 0 {
		return false
	}
	if s := p.b.Snapshot(); s.State != breaker.StateClosed || s.Forced || s.ConsecutiveTrips != 0 {
		return false
	}
	if r.cfg.HasBacklog != nil && r.cfg.HasBacklog(p) {
		return false
	}
	r.mu.Lock()
	if r.closed || p.seen.Load() >= e || !p.word.CompareAndSwap(w, w|evictedBit) {
		r.mu.Unlock()
		return false
	}
	r.m.CompareAndDelete(p.key, p)
	r.n--
	r.mu.Unlock()
	p.retire()
	if r.cfg.OnEvict != nil {
		r.cfg.OnEvict(p)
	}
	return true
}
