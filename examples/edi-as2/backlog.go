package main

import (
	"sync"

	"github.com/floodgate-go/floodgate/middleware"
)

// backlogCount follows the retry backlog from events, not from samples: a
// message is in it from its diversion (confirmed in the retry stream) until
// it is drained or dead-lettered. Its peak is a backlog the 100 ms sampler
// may miss when a loaded machine starves it. Safe for concurrent use.
type backlogCount struct {
	mu   sync.Mutex
	in   map[string]bool // UUIDs diverted, not yet drained or dead-lettered
	done map[string]bool // UUIDs drained or dead-lettered: a late diversion event of one is not counted
	peak int
}

// event counts a middleware event: a diversion, or a dead letter.
func (b *backlogCount) event(ev middleware.Event) {
	switch ev.Action {
	case middleware.Diverted:
		b.mu.Lock()
		defer b.mu.Unlock()
		if b.in == nil {
			b.in, b.done = map[string]bool{}, map[string]bool{}
		}
		if !b.done[ev.UUID] {
			b.in[ev.UUID] = true
			b.peak = max(b.peak, len(b.in))
		}
	case middleware.DeadLettered:
		b.settled(ev.UUID)
	}
}

// settled takes the message with this UUID out of the backlog: it was
// drained (or dead-lettered).
func (b *backlogCount) settled(uuid string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.in == nil {
		b.in, b.done = map[string]bool{}, map[string]bool{}
	}
	delete(b.in, uuid)
	b.done[uuid] = true
}

// highest returns the largest backlog counted.
func (b *backlogCount) highest() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.peak
}

// peakRate keeps the highest drain rate limit seen. Safe for concurrent
// use.
type peakRate struct {
	mu   sync.Mutex
	peak float64
}

func (p *peakRate) see(r float64) {
	p.mu.Lock()
	p.peak = max(p.peak, r)
	p.mu.Unlock()
}

func (p *peakRate) get() float64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.peak
}
