package retryqueue

import (
	"context"
	"sync"
	"sync/atomic"

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
// cheap (a hash and a counter read under a mutex, no allocation) and safe
// for concurrent use.
//
// The index behind it is a fixed table of [Config.OrderingBuckets]
// counters indexed by a hash of the key (a counting filter), kept in
// memory by this process: a diversion of a keyed message increments its
// key's counter, the drainer's confirmed ack decrements it. It never
// reports a key with backlog as free; a key without backlog whose counter
// it shares with one that has (a collision) is held too, with probability
// about [Queue.HeldKeys] / OrderingBuckets: that message is diverted
// with [ReasonOrdering] when it need not be, which costs a diversion and
// keeps every key's order. Its memory is fixed, whatever the number of
// keys. [Drainer.Run] rebuilds it from the retry stream when it starts,
// and clears it whenever it finds the backlog empty.
func (q *Queue) Holds(msg *message.Message) bool {
	if q.cfg.OrderingKey == nil || FromDrain(msg.Context()) {
		return false
	}
	k := q.cfg.OrderingKey(msg)
	if k == "" {
		return false
	}
	return q.keys.held(k)
}

// HeldKeys returns the number of the ordering index's counters in use
// (see [Queue.Holds]): the number of distinct ordering keys with messages
// in the backlog, less one for each key sharing its counter with another
// (at most [Config.OrderingBuckets]). It is 0 exactly when no key is held,
// and 0 without per-key ordering. HeldKeys / OrderingBuckets estimates the
// chance that a live message whose key has no backlog is held anyway.
func (q *Queue) HeldKeys() int {
	if q.keys == nil {
		return 0
	}
	return q.keys.inUse()
}

func (q *Queue) hold(key string) {
	if key == "" {
		return
	}
	q.keys.add(key)
}

// Release records that one backlog message of key left the retry stream.
// The [Drainer] calls it after each confirmed ack; call it only if you
// remove retry messages yourself, and only once per message the index
// counted (a diversion since the index was last rebuilt or cleared): an
// unmatched Release may free another key sharing its counter. An empty key
// does nothing.
func (q *Queue) Release(key string) {
	if key == "" || q.keys == nil {
		return
	}
	q.keys.remove(key)
}

// keysGeneration returns the index generation, for resetKeys.
func (q *Queue) keysGeneration() uint64 {
	if q.keys == nil {
		return 0
	}
	return q.keys.generation()
}

// newKeyCounts returns an empty table for a rebuild of the index
// (resetKeys), nil without per-key ordering.
func (q *Queue) newKeyCounts() *keyCounts {
	if q.keys == nil {
		return nil
	}
	return q.keys.fresh()
}

// countKey counts a message of key in c, a table from newKeyCounts.
func (q *Queue) countKey(c *keyCounts, key string) {
	if key != "" && c != nil {
		q.keys.tally(c, key)
	}
}

// resetKeys replaces the index by counts (from newKeyCounts; nil clears
// it) if no key was held since gen.
func (q *Queue) resetKeys(gen uint64, counts *keyCounts) bool {
	if q.keys == nil {
		return true
	}
	return q.keys.reset(gen, counts)
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
	// unadmitted is the drainer's count of its calls the gate does not
	// count yet (nil: not counted, per-key ordering); admitted says this
	// one left it.
	unadmitted *atomic.Int32
	admitted   atomic.Bool
}

// uuidSet is a multiset of message UUIDs (a UUID redelivered while its
// first delivery runs is held twice). Unlike a sync.Map, adding a string
// allocates nothing once the map has grown; has takes no lock while the
// set is empty (no drain running: the live path's case). The zero value
// is ready to use; it is safe for concurrent use.
type uuidSet struct {
	n  atomic.Int64 // the UUIDs held, counted before they are added
	mu sync.Mutex
	m  map[string]int
}

func (u *uuidSet) add(id string) {
	u.n.Add(1)
	u.mu.Lock()
	if u.m == nil {
		u.m = map[string]int{}
	}
	u.m[id]++
	u.mu.Unlock()
}

func (u *uuidSet) remove(id string) {
	u.mu.Lock()
	if u.m[id] <= 1 {
		delete(u.m, id)
	} else {
		u.m[id]--
	}
	u.mu.Unlock()
	u.n.Add(-1)
}

func (u *uuidSet) has(id string) bool {
	if u.n.Load() == 0 {
		return false
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.m[id] > 0
}

// admit takes the slot's message out of its drainer's unadmitted calls,
// once.
func (s *slot) admit() {
	if s.unadmitted != nil && s.admitted.CompareAndSwap(false, true) {
		s.unadmitted.Add(-1)
	}
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
