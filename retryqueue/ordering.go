package retryqueue

import (
	"context"
	"sync"

	"github.com/ThreeDotsLabs/watermill/message"
)

// key returns msg's ordering key, "" when per-key ordering is off.
func (q *Queue) key(msg *message.Message) string {
	if q.cfg.OrderingKey == nil {
		return ""
	}
	return q.cfg.OrderingKey(msg)
}

// Ordered reports whether per-key ordering is on ([Config.OrderingKey]).
func (q *Queue) Ordered() bool { return q.cfg.OrderingKey != nil }

// Holds reports whether msg must be diverted ([ReasonOrdering]) to keep its
// key's order: per-key ordering is on, msg has a key, msg is live traffic
// (not handed over by a [Drainer], see [FromDrain]) and the retry backlog
// holds messages of that key. Call it before asking the breaker. It is
// cheap (one map lookup under a mutex) and safe for concurrent use.
//
// The count behind it is kept in memory by this process: it grows with
// every diversion of a keyed message and shrinks as the drainer acks them;
// [Drainer.Run] rebuilds it from the retry stream when it starts, and
// clears it whenever it finds the backlog empty.
func (q *Queue) Holds(msg *message.Message) bool {
	if q.cfg.OrderingKey == nil || FromDrain(msg.Context()) {
		return false
	}
	k := q.cfg.OrderingKey(msg)
	if k == "" {
		return false
	}
	q.keysMu.Lock()
	defer q.keysMu.Unlock()
	return q.keys[k] > 0
}

// HeldKeys returns the number of distinct ordering keys with messages in
// the backlog, as [Queue.Holds] sees them.
func (q *Queue) HeldKeys() int {
	q.keysMu.Lock()
	defer q.keysMu.Unlock()
	return len(q.keys)
}

func (q *Queue) hold(key string) {
	if key == "" {
		return
	}
	q.keysMu.Lock()
	q.keys[key]++
	q.keysGen++
	q.keysMu.Unlock()
}

// Release records that one backlog message of key left the retry stream.
// The [Drainer] calls it after each confirmed ack; call it only if you
// remove retry messages yourself. An empty key does nothing.
func (q *Queue) Release(key string) {
	if key == "" {
		return
	}
	q.keysMu.Lock()
	if q.keys[key] <= 1 {
		delete(q.keys, key)
	} else {
		q.keys[key]--
	}
	q.keysMu.Unlock()
}

// keysGeneration returns the index generation, for resetKeys.
func (q *Queue) keysGeneration() uint64 {
	q.keysMu.Lock()
	defer q.keysMu.Unlock()
	return q.keysGen
}

// resetKeys replaces the index by counts if no key was held since gen.
func (q *Queue) resetKeys(gen uint64, counts map[string]int) bool {
	q.keysMu.Lock()
	defer q.keysMu.Unlock()
	if q.keysGen != gen {
		return false
	}
	q.keys = counts
	return true
}

// outcome is what the queue did with a message the drainer handed over,
// as the drainer learns it through the message's context.
type outcome int

const (
	outcomeNone     outcome = iota // delivered (or the handler did not use the queue)
	outcomeDiverted                // diverted again, see slot.reason
	outcomeDead                    // dead-lettered
	outcomeDeferred                // turned away by the breaker: back to the backlog in place
)

// slot carries the queue's outcome for one drained message back to the
// drainer.
type slot struct {
	uuid   string // the drained message's
	route  route  // the route it was drained from
	mu     sync.Mutex
	what   outcome
	reason Reason
}

func (s *slot) set(o outcome, r Reason) {
	s.mu.Lock()
	s.what, s.reason = o, r
	s.mu.Unlock()
}

func (s *slot) get() (outcome, Reason) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.what, s.reason
}

type slotKey struct{}

// slotFor returns the slot of ctx if msg is the message the drainer handed
// over with it: a handler that diverts another message under the drained
// message's context changes nothing for the drained one.
func slotFor(ctx context.Context, msg *message.Message) *slot {
	if ctx == nil {
		return nil
	}
	s, _ := ctx.Value(slotKey{}).(*slot)
	if s == nil || s.uuid != msg.UUID {
		return nil
	}
	return s
}
