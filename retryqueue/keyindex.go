package retryqueue

import (
	"hash/maphash"
	"math"
	"math/bits"
	"sync"
)

// DefaultOrderingBuckets is the default [Config.OrderingBuckets]: 2^18
// counters, 1 MiB.
const DefaultOrderingBuckets = 1 << 18

// maxOrderingBuckets is the largest valid [Config.OrderingBuckets]: 2^26
// counters, 256 MiB.
const maxOrderingBuckets = 1 << 26

// keyIndex is the per-key ordering index behind [Queue.Holds]: a counting
// filter. It is a fixed table of counters indexed by a hash of the key,
// seeded at random per process so keys cannot be chosen to collide. A
// diversion increments its key's bucket, a confirmed removal from the
// stream decrements it, and a live message is held while its bucket is
// non-zero. Its memory is fixed at 4 bytes per bucket, whatever the number
// of keys or messages.
//
// It never reports a key with messages in the backlog as free (no false
// negatives), as long as every decrement matches an earlier increment: a
// bucket is the sum of the counts of the keys hashed to it. Keys sharing a
// bucket (a collision) only hold a live message whose own key has no
// backlog: it takes the ordered diversion path unnecessarily. With K keys
// in the backlog and n buckets, a key without backlog is held with
// probability 1-(1-1/n)^K, about K/n while K is small against n (the
// fraction of buckets in use, [Queue.HeldKeys]/n). One hash rather than a
// counting Bloom filter's several: several lower that rate only while
// K << n, cost a hash and a lock-held update each, and raise it once K
// nears n, which is when it matters. A counter that reaches its maximum
// (2^32-1 messages in one bucket) sticks there until the index is rebuilt
// or cleared, so it cannot wrap to a false negative.
//
// It is safe for concurrent use.
type keyIndex struct {
	seed maphash.Seed
	mu   sync.Mutex
	keyCounts
	gen uint64 // grows with every add, so a reset can tell whether one slipped in
}

// keyCounts is a table of bucket counters and how many are non-zero.
type keyCounts struct {
	counts []uint32
	used   int // non-zero buckets
}

func newKeyIndex(buckets int) *keyIndex {
	return &keyIndex{seed: maphash.MakeSeed(), keyCounts: keyCounts{counts: make([]uint32, buckets)}}
}

// bucket returns key's bucket: a 64-bit hash scaled to the table size
// (multiply-shift, so any size works). It reads only immutable fields
// (seed, and the counts slice header, never replaced).
func (x *keyIndex) bucket(key string) int {
	hi, _ := bits.Mul64(maphash.String(x.seed, key), uint64(len(x.counts)))
	return int(hi)
}

// add counts a message of key.
func (x *keyIndex) add(key string) {
	b := x.bucket(key)
	x.mu.Lock()
	x.inc(b)
	x.gen++
	x.mu.Unlock()
}

// remove uncounts a message of key; a bucket already 0 stays 0.
func (x *keyIndex) remove(key string) {
	b := x.bucket(key)
	x.mu.Lock()
	x.dec(b)
	x.mu.Unlock()
}

// held reports whether key's bucket counts messages.
func (x *keyIndex) held(key string) bool {
	b := x.bucket(key)
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.counts[b] != 0
}

// inUse returns the number of non-zero buckets.
func (x *keyIndex) inUse() int {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.used
}

// generation returns the add generation, for reset.
func (x *keyIndex) generation() uint64 {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.gen
}

// fresh returns an empty table of the index's size, for a rebuild.
func (x *keyIndex) fresh() *keyCounts {
	return &keyCounts{counts: make([]uint32, len(x.counts))}
}

// reset replaces the counts by c's (a table from fresh; cleared, if c is
// nil) if nothing was added since gen, and reports whether it did.
func (x *keyIndex) reset(gen uint64, c *keyCounts) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.gen != gen {
		return false
	}
	if c == nil {
		clear(x.counts)
		x.used = 0
		return true
	}
	// Copied, not swapped: the slice header stays immutable for bucket.
	copy(x.counts, c.counts)
	x.used = c.used
	return true
}

// inc counts one more message in bucket b, sticking at the maximum.
func (c *keyCounts) inc(b int) {
	switch c.counts[b] {
	case math.MaxUint32:
		return
	case 0:
		c.used++
	}
	c.counts[b]++
}

// dec counts one message less in bucket b; 0 and a stuck maximum stay.
func (c *keyCounts) dec(b int) {
	switch c.counts[b] {
	case 0, math.MaxUint32:
		return
	case 1:
		c.used--
	}
	c.counts[b]--
}

// tally counts a message of key in c, a table from fresh.
func (x *keyIndex) tally(c *keyCounts, key string) { c.inc(x.bucket(key)) }
