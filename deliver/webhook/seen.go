package webhook

import (
	"container/heap"
	"crypto/sha256"
	"sync"
)

// seenSet is the replay protection of a [Verifier]: the keys of the
// requests accepted, each until its expiry, at most max of them. A key is
// the SHA-256 of what identifies a request (scheme, id, timestamp), so an
// entry has a fixed size whatever the id's length. Safe for concurrent use.
type seenSet struct {
	mu      sync.Mutex
	max     int
	entries map[[sha256.Size]byte]int64 // key -> expiry, Unix ns
	byExp   expiryHeap                  // the same keys, soonest expiry first
}

func newSeenSet(max int) *seenSet {
	return &seenSet{max: max, entries: map[[sha256.Size]byte]int64{}}
}

// add records key and also until exp (Unix ns) and returns nil; or
// [ErrReplay] if key is recorded and not expired at now, or [ErrSeenFull]
// if recording them would exceed max unexpired keys. The keys are one
// request's: it records all of them or none. The keys in also are recorded
// without being checked (their expiry moved to exp if later): another
// form of the same request that a replay may take, which another request
// may share (the floodgate signature of a SchemeBoth request, which does
// not sign the webhook-id). An entry is expired when now > its expiry.
func (s *seenSet) add(exp, now int64, key [sha256.Size]byte, also ...[sha256.Size]byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.byExp) > 0 && s.byExp[0].exp < now {
		e := heap.Pop(&s.byExp).(expiring)
		if x, ok := s.entries[e.key]; ok && x <= e.exp {
			delete(s.entries, e.key)
		}
	}
	if _, ok := s.entries[key]; ok {
		return ErrReplay
	}
	n := 1
	for _, k := range also {
		if _, ok := s.entries[k]; !ok {
			n++
		}
	}
	if len(s.entries)+n > s.max {
		return ErrSeenFull
	}
	for _, k := range append([][sha256.Size]byte{key}, also...) {
		if x, ok := s.entries[k]; ok && x >= exp {
			continue
		}
		s.entries[k] = exp
		heap.Push(&s.byExp, expiring{key: k, exp: exp})
	}
	return nil
}

// len returns the number of entries, expired ones not yet purged included.
func (s *seenSet) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.entries)
}

type expiring struct {
	key [sha256.Size]byte
	exp int64
}

// expiryHeap is a container/heap of entries, soonest expiry first.
type expiryHeap []expiring

func (h expiryHeap) Len() int           { return len(h) }
func (h expiryHeap) Less(i, j int) bool { return h[i].exp < h[j].exp }
func (h expiryHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *expiryHeap) Push(x any)        { *h = append(*h, x.(expiring)) }
func (h *expiryHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}
