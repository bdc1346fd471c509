package exampleutil

import (
	"sync"
	"sync/atomic"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/middleware"
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
