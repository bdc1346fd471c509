package retryqueue

import (
	"context"
	"sync"
	"sync/atomic"
)

// fairShare is the in-flight bound a [PartnerDrainer] shares among its
// partners' drainers: size slots, one per drained message from its fetch
// until it is settled. Free slots go to a drainer at once when nobody waits;
// otherwise to the waiters in FIFO order, skipping a waiter that already
// holds its fair share (size / the drainers holding or waiting) while one
// below it waits. So a partner whose calls are slow cannot pile up slots
// while the others wait (max-min fairness over slots), and a partner that
// needs fewer leaves the rest to the others. Safe for concurrent use.
type fairShare struct {
	mu    sync.Mutex
	size  int
	used  int
	held  map[*Drainer]int // slots held, by drainer; absent at 0
	queue []*shareWaiter   // FIFO
}

type shareWaiter struct {
	d       *Drainer
	ready   chan struct{}
	granted bool
}

func newFairShare(size int) *fairShare {
	return &fairShare{size: size, held: map[*Drainer]int{}}
}

// acquire returns between 1 and want slots for d, waiting for the first one
// in turn; it returns ctx's error (and no slot) if ctx ends first.
func (s *fairShare) acquire(ctx context.Context, d *Drainer, want int) (int, error) {
	want = max(want, 1)
	s.mu.Lock()
	if len(s.queue) == 0 && s.used < s.size {
		g := min(want, s.size-s.used)
		s.grantLocked(d, g)
		s.mu.Unlock()
		return g, nil
	}
	w := &shareWaiter{d: d, ready: make(chan struct{})}
	s.queue = append(s.queue, w)
	s.mu.Unlock()
	select {
	case <-w.ready:
	case <-ctx.Done():
		s.mu.Lock()
		defer s.mu.Unlock()
		if w.granted {
			s.releaseLocked(d, 1)
		} else {
			for i, q := range s.queue {
				if q == w {
					s.queue = append(s.queue[:i], s.queue[i+1:]...)
					break
				}
			}
		}
		return 0, ctx.Err()
	}
	// One slot came in turn; more only if nobody else waits.
	s.mu.Lock()
	defer s.mu.Unlock()
	g := 1
	if len(s.queue) == 0 && s.used < s.size {
		extra := min(want-1, s.size-s.used)
		s.grantLocked(d, extra)
		g += extra
	}
	return g, nil
}

// tryAcquire returns up to want slots for d without waiting: what is free
// while nobody waits, else none.
func (s *fairShare) tryAcquire(d *Drainer, want int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.queue) > 0 || s.used >= s.size || want <= 0 {
		return 0
	}
	g := min(want, s.size-s.used)
	s.grantLocked(d, g)
	return g
}

// release gives back n of d's slots.
func (s *fairShare) release(d *Drainer, n int) {
	if n <= 0 {
		return
	}
	s.mu.Lock()
	s.releaseLocked(d, n)
	s.mu.Unlock()
}

// inUse returns the slots held.
func (s *fairShare) inUse() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.used
}

// grantLocked requires s.mu held.
func (s *fairShare) grantLocked(d *Drainer, n int) {
	if n <= 0 {
		return
	}
	s.used += n
	s.held[d] += n
}

// releaseLocked frees n of d's slots and hands free slots to the waiters.
// Requires s.mu held.
func (s *fairShare) releaseLocked(d *Drainer, n int) {
	s.used -= n
	if s.held[d] -= n; s.held[d] <= 0 {
		delete(s.held, d)
	}
	if s.used >= s.size || len(s.queue) == 0 {
		return
	}
	active := len(s.held)
	for _, w := range s.queue {
		if _, ok := s.held[w.d]; !ok {
			active++
		}
	}
	share := max(1, (s.size+active-1)/active)
	for s.used < s.size && len(s.queue) > 0 {
		i := 0
		for j, w := range s.queue {
			if s.held[w.d] < share {
				i = j
				break
			}
		}
		w := s.queue[i]
		s.queue = append(s.queue[:i], s.queue[i+1:]...)
		s.grantLocked(w.d, 1)
		w.granted = true
		close(w.ready)
	}
}

// releaseShare gives back n of d's slots of its [PartnerDrainer]'s shared
// in-flight bound, if it has one.
func (d *Drainer) releaseShare(n int) {
	if d.share != nil {
		d.share.release(d, n)
	}
}

// handlersIdle reports whether no FIFO-mode handler is running.
func (d *Drainer) handlersIdle() bool { return len(d.slots) == 0 }

// divertHooks are the functions a [Queue] calls after each confirmed
// diversion, with the route diverted to. Safe for concurrent use; the
// common case, no hook, costs one atomic load.
type divertHooks struct {
	n   atomic.Int32
	mu  sync.Mutex
	id  uint64
	fns map[uint64]func(route)
}

// add registers fn and returns its removal.
func (h *divertHooks) add(fn func(route)) (remove func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.fns == nil {
		h.fns = map[uint64]func(route){}
	}
	h.id++
	id := h.id
	h.fns[id] = fn
	h.n.Add(1)
	return func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if _, ok := h.fns[id]; ok {
			delete(h.fns, id)
			h.n.Add(-1)
		}
	}
}

// notify calls the hooks with r, outside the lock.
func (h *divertHooks) notify(r route) {
	if h.n.Load() == 0 {
		return
	}
	h.mu.Lock()
	fns := make([]func(route), 0, len(h.fns))
	for _, fn := range h.fns {
		fns = append(fns, fn)
	}
	h.mu.Unlock()
	for _, fn := range fns {
		fn(r)
	}
}
