//go:build !race && amd64

package breaker

import (
	"sync/atomic"
	"unsafe"
)

// storeRelease writes a word of a slot the caller holds (slots.go) with a
// plain store: releasing a slot on the closed fast path, or recording the
// holder's generation after a claim. Only the permit's holder writes a busy
// slot, claimers CAS only free slots, and aligned 64-bit stores are
// single-copy atomic and, under x86-64's total store order, never reordered
// with earlier stores, so a concurrent reader sees the old or the new word.
// An atomic store would be an XCHG here, as costly as a CAS. (Under the race
// detector, and on other platforms, it is an atomic store.)
func storeRelease(s *atomic.Uint64, v uint64) { *(*uint64)(unsafe.Pointer(s)) = v }
