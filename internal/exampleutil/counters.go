package exampleutil

import (
	"sync"
	"sync/atomic"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/middleware"
	"github.com/floodgate-go/floodgate/partner"
)

// Counters tally what the middleware ([Counters.OnEvent]) and the breaker
// ([Counters.OnTransition]) reported. The zero value is ready to use; all
// methods and fields are safe for concurrent use.
type Counters struct {
	// Admitted counts messages the breaker admitted (the handler ran).
	Admitted atomic.Int64
	// Probes counts admitted half-open probes.
	Probes atomic.Int64
	// Delivered counts messages the handler delivered.
	Delivered atomic.Int64
	// Diverted counts messages confirmed in the retry queue.
	Diverted atomic.Int64
	// DeadLettered counts messages confirmed in the dead-letter stream.
	DeadLettered atomic.Int64
	// Nacked counts messages whose diversion or dead letter was not
	// confirmed, or whose context was done before admission (the broker
	// redelivers them).
	Nacked atomic.Int64
	// Deferred counts drained messages the breaker turned away (left in
	// place in the backlog).
	Deferred atomic.Int64
	// Trips counts transitions to open, from closed or half-open.
	Trips atomic.Int64
	// Drained counts backlog messages the partner took: the example's
	// delivery function adds them (retryqueue.FromDrain tells them).
	Drained atomic.Int64

	mu   sync.Mutex
	dead map[string]bool // UUIDs dead-lettered
}

// OnEvent counts one middleware event; pass it as middleware.Config.OnEvent.
func (c *Counters) OnEvent(ev middleware.Event) {
	if ev.Admitted {
		c.Admitted.Add(1)
		if ev.Probe {
			c.Probes.Add(1)
		}
	}
	switch ev.Action {
	case middleware.Delivered:
		c.Delivered.Add(1)
	case middleware.Diverted:
		c.Diverted.Add(1)
	case middleware.DeadLettered:
		c.DeadLettered.Add(1)
		c.mu.Lock()
		if c.dead == nil {
			c.dead = map[string]bool{}
		}
		c.dead[ev.UUID] = true
		c.mu.Unlock()
	case middleware.Nacked:
		c.Nacked.Add(1)
	case middleware.Deferred:
		c.Deferred.Add(1)
	}
}

// OnTransition counts trips; pass it to breaker.Breaker.AddListener.
func (c *Counters) OnTransition(t breaker.Transition) {
	if t.To == breaker.StateOpen {
		c.Trips.Add(1)
	}
}

// Dead reports whether the message with this UUID was dead-lettered.
func (c *Counters) Dead(uuid string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dead[uuid]
}

// PartnerCounters are [Counters] per partner key, fed by floodgate's
// Config.OnEvent ([PartnerCounters.OnEvent]) and Config.OnTransition
// ([PartnerCounters.OnTransition]). The zero value is ready to use; its
// methods are safe for concurrent use.
type PartnerCounters struct {
	mu sync.Mutex
	m  map[string]*Counters
}

// Of returns key's counters, creating them on first use.
func (p *PartnerCounters) Of(key string) *Counters {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.m[key]
	if c == nil {
		if p.m == nil {
			p.m = map[string]*Counters{}
		}
		c = &Counters{}
		p.m[key] = c
	}
	return c
}

// OnEvent counts ev for its partner (ev.PartnerKey).
func (p *PartnerCounters) OnEvent(ev middleware.Event) { p.Of(ev.PartnerKey).OnEvent(ev) }

// OnTransition counts t for partner pt.
func (p *PartnerCounters) OnTransition(pt *partner.Partner, t breaker.Transition) {
	p.Of(pt.Key()).OnTransition(t)
}

// Sum adds f over every partner's counters, e.g. the admitted messages of
// all partners: Sum(func(c *Counters) int64 { return c.Admitted.Load() }).
func (p *PartnerCounters) Sum(f func(*Counters) int64) int64 {
	p.mu.Lock()
	cs := make([]*Counters, 0, len(p.m))
	for _, c := range p.m {
		cs = append(cs, c)
	}
	p.mu.Unlock()
	var n int64
	for _, c := range cs {
		n += f(c)
	}
	return n
}

// Dead reports whether the message with this UUID was dead-lettered, for
// any partner.
func (p *PartnerCounters) Dead(uuid string) bool {
	p.mu.Lock()
	cs := make([]*Counters, 0, len(p.m))
	for _, c := range p.m {
		cs = append(cs, c)
	}
	p.mu.Unlock()
	for _, c := range cs {
		if c.Dead(uuid) {
			return true
		}
	}
	return false
}
