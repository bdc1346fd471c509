package breaker

import (
	"reflect"
	"sync"
	"time"
)

// fleetWorkers is the most goroutines a hub runs store calls on at once.
const fleetWorkers = 4

// fleetHub runs the store calls of every [Fleet] on one [Store] in a
// process (not Inline): a work queue served by at most fleetWorkers
// goroutines, started when there is work and ended when there is none, and
// one resync timer. A fleet costs no goroutine, ticker or timer of its own,
// so an idle fleet costs only its memory, and a process with thousands of
// fleets runs a few goroutines. Hubs are shared by store (when the store's
// type is comparable; else each fleet gets its own) and dropped when their
// last fleet leaves.
type fleetHub struct {
	key any // in hubs.m; nil for a private hub

	mu       sync.Mutex
	fleets   map[*Fleet]struct{}
	queue    []*Fleet
	head     int
	workers  int
	interval time.Duration // the smallest ResyncInterval of the fleets
	timer    *time.Timer
}

var hubs struct {
	sync.Mutex
	m map[any]*fleetHub
}

// joinHub adds f to the hub of its store and sets f.hub, before the hub's
// tick can see f.
func joinHub(f *Fleet) {
	var key any
	if reflect.TypeOf(f.store).Comparable() {
		key = f.store
	}
	hubs.Lock()
	h := hubs.m[key]
	if key == nil || h == nil {
		h = &fleetHub{key: key, fleets: map[*Fleet]struct{}{}}
		if key != nil {
			if hubs.m == nil {
				hubs.m = map[any]*fleetHub{}
			}
			hubs.m[key] = h
		}
	}
	h.mu.Lock()
	f.hub = h
	h.fleets[f] = struct{}{}
	if h.interval == 0 || f.cfg.ResyncInterval < h.interval {
		h.interval = f.cfg.ResyncInterval
		if h.timer != nil {
			h.timer.Reset(h.interval)
		}
	}
	if h.timer == nil {
		h.timer = time.AfterFunc(h.interval, h.tick)
	}
	h.mu.Unlock()
	hubs.Unlock()
}

// leave removes f; the last fleet to leave drops the hub and its timer.
func (h *fleetHub) leave(f *Fleet) {
	hubs.Lock()
	defer hubs.Unlock()
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.fleets, f)
	if len(h.fleets) > 0 {
		return
	}
	if h.timer != nil {
		h.timer.Stop()
		h.timer = nil
	}
	h.interval = 0
	if h.key != nil && hubs.m[h.key] == h {
		delete(hubs.m, h.key)
	}
}

// enqueue queues f for a step and starts a worker if fewer than
// fleetWorkers run.
func (h *fleetHub) enqueue(f *Fleet) {
	h.mu.Lock()
	h.queue = append(h.queue, f)
	start := h.workers < fleetWorkers
	if start {
		h.workers++
	}
	h.mu.Unlock()
	if start {
		go h.work()
	}
}

// work steps queued fleets until the queue is empty.
func (h *fleetHub) work() {
	for {
		h.mu.Lock()
		if h.head == len(h.queue) {
			h.queue, h.head = h.queue[:0], 0
			h.workers--
			h.mu.Unlock()
			return
		}
		f := h.queue[h.head]
		h.queue[h.head] = nil
		h.head++
		h.mu.Unlock()
		f.queued.Store(false)
		f.step()
	}
}

// tick marks for a resync every fleet due for one that is not quiet (see
// [Fleet.quiet]), and rearms the timer.
func (h *fleetHub) tick() {
	now := time.Now().UnixNano()
	h.mu.Lock()
	if h.timer == nil {
		h.mu.Unlock()
		return
	}
	var due []*Fleet
	for f := range h.fleets {
		if now >= f.nextResync.Load() && !f.quiet() {
			f.nextResync.Store(now + int64(f.cfg.ResyncInterval))
			due = append(due, f)
		}
	}
	h.timer.Reset(h.interval)
	h.mu.Unlock()
	for _, f := range due {
		f.mu.Lock()
		f.resync = true
		f.mu.Unlock()
		f.kick()
	}
}

// size returns the number of fleets on the hub (for tests).
func (h *fleetHub) size() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.fleets)
}
