package retryqueue

import (
	"sync"
	"time"
)

// keyOrder is the drainer's per-key ordering state (see [Drainer]):
//
//   - holds: a key whose earliest message is waiting out its not-before, or
//     was diverted again (its copy is at the back of the stream): only that
//     message (by UUID) may go next;
//   - pending: stream sequences of a key's messages the drainer nakked
//     (deferred, or failed) and that will come back: a later message of the
//     key waits for them, since redeliveries and new messages interleave.
//
// Entries lapse, so a message removed from the stream by other means
// (purge) cannot block its key for good, but only once the drain has
// caught up after their expiry: a fetch found nothing more to deliver, so
// the message they wait for, published or due for redelivery before, would
// have come back. Expiry alone is not enough: a copy at the back of a large
// backlog, or a redelivery behind many others, can take longer than any
// fixed time to come back, and its key's later messages must not pass it
// meanwhile. Time the drain spends paused (the gate closed) does not count
// toward the expiry, and a head the breaker keeps turning away, or that
// the handler failed, renews its hold.
//
// Memory: an entry lives while its message is out of the drainer's hands
// and due back (nakked with a delay, or a copy diverted again to the back
// of the stream): a map entry, its key and a hold's UUID. A lapsed entry is
// dropped when its key is next admitted, and by a sweep when the drain
// catches up, run once the entries have doubled since the last sweep (so
// its cost is amortized): the entries of keys that never come back (unique
// keys, purged messages) do not pile up beyond twice the live ones.
type keyOrder struct {
	mu      sync.Mutex
	holds   map[string]hold
	pending map[string]map[uint64]time.Time // key -> seq -> expiry
	caught  time.Time                       // the last fetch that found nothing more to deliver was sent
	swept   int                             // keys in holds and pending after the last sweep
}

// sweepMin is how many keys holds and pending may hold before the first
// sweep.
const sweepMin = 64

// heldRecheck is how long a message held behind its key's head is
// deferred at least: long enough that the deferred messages do not crowd
// the consumer's redeliveries.
func heldRecheck(poll time.Duration) time.Duration { return max(5*poll, 100*time.Millisecond) }

// recheck is how long a message held back behind its key's head for the
// deliveries-th time is deferred: base, doubling with each delivery up to
// 32 × base. A held message comes back before new messages (JetStream
// redelivers first), so a backlog of held messages rechecked at a fixed
// short delay would take every fetch and starve the head's copy at the back
// of the stream: the drain would barely progress.
func recheck(base time.Duration, deliveries uint64) time.Duration {
	return base << min(max(deliveries, 1)-1, 5)
}

// hold is a held ordering key: only the message uuid may go, not before
// until.
type hold struct {
	uuid    string
	until   time.Time
	expires time.Time
}

// admit decides whether it (a keyed message, now on the queue's clock) may
// be delivered now. If not, it returns how long to defer it. If it may, its
// own pending entry is cleared. A message not yet eligible by its
// not-before becomes the key's hold.
func (o *keyOrder) admit(it item, now time.Time, poll time.Duration) (time.Duration, bool) {
	wall := time.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	h, held := o.holds[it.key]
	if held && o.lapsedLocked(h.expires) {
		delete(o.holds, it.key)
		held = false
	}
	switch {
	case held && h.uuid != it.wm.UUID:
		// Recheck when the head may have gone: after its not-before, or
		// (diverted for another reason) a few polls on.
		return max(h.until.Sub(now), recheck(heldRecheck(poll), it.n)), true
	case !held:
		// The key's earlier messages that will come back go first.
		for seq, exp := range o.pending[it.key] {
			if o.lapsedLocked(exp) {
				delete(o.pending[it.key], seq)
				continue
			}
			if seq < it.seq {
				return poll, true
			}
		}
	}
	if nb, ok := NotBefore(it.wm); ok && nb.After(now) {
		o.holds[it.key] = hold{uuid: it.wm.UUID, until: nb, expires: wall.Add(nb.Sub(now) + 2*time.Minute)}
		return nb.Sub(now), true
	}
	o.deletePendingLocked(it.key, it.seq)
	return 0, false
}

// lapsedLocked reports whether an entry expiring at expires has lapsed:
// the drain caught up after it expired. Requires o.mu held.
func (o *keyOrder) lapsedLocked(expires time.Time) bool { return o.caught.After(expires) }

// caughtUp records that a fetch sent at sent found nothing more to deliver
// (it returned fewer messages than asked): every message published, and
// every redelivery due, before sent has been delivered since.
func (o *keyOrder) caughtUp(sent time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !sent.After(o.caught) {
		return
	}
	o.caught = sent
	if len(o.holds)+len(o.pending) >= 2*o.swept+sweepMin {
		o.sweepLocked()
	}
}

// sweepLocked drops every lapsed hold and pending entry. Requires o.mu
// held.
func (o *keyOrder) sweepLocked() {
	for k, h := range o.holds {
		if o.lapsedLocked(h.expires) {
			delete(o.holds, k)
		}
	}
	for k, m := range o.pending {
		for seq, exp := range m {
			if o.lapsedLocked(exp) {
				delete(m, seq)
			}
		}
		if len(m) == 0 {
			delete(o.pending, k)
		}
	}
	o.swept = len(o.holds) + len(o.pending)
}

// head returns the UUID of the message holding key, "" if none.
func (o *keyOrder) head(key string) string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.holds[key].uuid
}

func (o *keyOrder) addPending(key string, seq uint64, expires time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	m := o.pending[key]
	if m == nil {
		m = map[uint64]time.Time{}
		o.pending[key] = m
	}
	m[seq] = expires
}

// deletePendingLocked requires o.mu held.
func (o *keyOrder) deletePendingLocked(key string, seq uint64) {
	if m := o.pending[key]; m != nil {
		delete(m, seq)
		if len(m) == 0 {
			delete(o.pending, key)
		}
	}
}

// setHold holds key for the message uuid, not eligible before until.
func (o *keyOrder) setHold(key, uuid string, until time.Time, ackWait time.Duration) {

	expires := time.Now().Add(2 * ackWait)
	if wait := time.Until(until); wait > 0 {
		expires = expires.Add(wait)
	}
	o.mu.Lock()
	o.holds[key] = hold{uuid: uuid, until: until, expires: expires}
	o.mu.Unlock()
}

// unhold releases key if uuid holds it.
func (o *keyOrder) unhold(key, uuid string) {

	o.mu.Lock()
	if h, ok := o.holds[key]; ok && h.uuid == uuid {
		delete(o.holds, key)
	}
	o.mu.Unlock()
}

// renew extends key's hold to at least expires if uuid holds it.
func (o *keyOrder) renew(key, uuid string, expires time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if h, ok := o.holds[key]; ok && h.uuid == uuid && h.expires.Before(expires) {
		h.expires = expires
		o.holds[key] = h
	}
}

// extend moves every hold's and pending entry's expiry d later: the time
// the drain was paused, during which nothing could come back.
func (o *keyOrder) extend(d time.Duration) {
	if d <= 0 {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	for k, h := range o.holds {
		h.expires = h.expires.Add(d)
		o.holds[k] = h
	}
	for _, m := range o.pending {
		for seq, exp := range m {
			m[seq] = exp.Add(d)
		}
	}
}
