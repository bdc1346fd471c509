package breaker

import (
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"
)

// The closed-state fast path: every closed-state permit owns one slot word
// while it is in flight. A slot word is gen<<48 | count<<1 | busy: count (47
// bits) is the number of outcomes reported through the slot, gen the low 16
// bits of the generation the holder was admitted in. Allow claims a free
// slot (count<<1) by writing it busy with the current generation; reporting
// releases it by replacing the expected word w with w+1, which is the count
// plus one, free. A count that overflows its 47 bits spills into the
// generation bits until the next claim rewrites them; the breaker sums the
// counts modulo 2^47 and accumulates the differences. The count never repeats, so a second report of the same
// permit finds another word and is ignored (no ABA), and the sum of the
// counts over all slots is the number of closed-state outcomes ever
// reported.
//
// Slots are grouped in stripes of 16 words (128 bytes, two cache lines, so
// the adjacent-line prefetcher does not couple neighbours). Each P claims in
// its own stripe (claim_pinned.go), or, in portable builds, a goroutine picks
// its stripe from the address of its stack and claims by CAS
// (claim_cas.go), so parallel callers touch different cache lines and
// nothing serialises them. The table grows by chunks (claimed by CAS) when
// more permits are in flight than a stripe has slots, up to maxSlotChunks;
// beyond that a permit gets no slot and is counted in extra (and loses
// duplicate detection).

const (
	slotGenShift  = 48
	slotGenMask   = 1<<16 - 1
	slotCountBits = (1<<slotGenShift - 1) &^ 1
	slotCountMod  = 1<<47 - 1
)

// slotWord returns the busy word claiming free word v for generation gen.
func slotWord(v, gen uint64) uint64 {
	return v&slotCountBits | (gen&slotGenMask)<<slotGenShift | 1
}

const (
	slotsPerStripe = 16
	maxSlotChunks  = 64
)

type stripe struct {
	w [slotsPerStripe]atomic.Uint64
}

type slotChunk struct {
	stripes []stripe
	next    atomic.Pointer[slotChunk]
}

type slotTable struct {
	local  []stripe // == first.stripes, one load closer
	first  *slotChunk
	shift  uint // 64 - log2(len(stripes))
	extra  atomic.Uint64
	growMu sync.Mutex
	chunks int
}

func newSlotTable() *slotTable {
	// Pinned: one stripe per P. Hashed: enough stripes that goroutines
	// rarely share one.
	want := runtime.GOMAXPROCS(0)
	if !pinnedStripes && !raceEnabled {
		want = min(256, max(16, 16*want))
	}
	n := 4
	for n < want {
		n *= 2
	}
	bits := uint(0)
	for 1<<bits < n {
		bits++
	}
	first := &slotChunk{stripes: make([]stripe, n)}
	return &slotTable{local: first.stripes, first: first, shift: 64 - bits, chunks: 1}
}

// stripeIndex hashes the address of a variable on the caller's stack, which
// is stable for a goroutine (until its stack moves) and differs between
// goroutines.
//
//go:nosplit
func (t *slotTable) stripeIndex() int {
	var marker byte
	h := uint64(uintptr(unsafe.Pointer(&marker))>>10) * 0x9E3779B97F4A7C15
	return int(h >> t.shift)
}

func (t *slotTable) claimSlow(gen uint64) (*atomic.Uint64, uint64) {
	c := t.first
	if pinnedStripes {
		c = c.next.Load()
	}
	for ; c != nil; c = c.next.Load() {
		for j := range c.stripes {
			for i := range c.stripes[j].w {
				s := &c.stripes[j].w[i]
				if v := s.Load(); v&1 == 0 && s.CompareAndSwap(v, slotWord(v, gen)) {
					return s, slotWord(v, gen)
				}
			}
		}
	}
	t.growMu.Lock()
	defer t.growMu.Unlock()
	if t.chunks >= maxSlotChunks {
		return nil, 0
	}
	last := t.first
	for n := last.next.Load(); n != nil; n = last.next.Load() {
		last = n
	}
	nc := &slotChunk{stripes: make([]stripe, len(t.first.stripes))}
	s := &nc.stripes[0].w[0]
	s.Store(slotWord(0, gen))
	last.next.Store(nc)
	t.chunks++
	return s, slotWord(0, gen)
}

// sum returns the number of outcomes released through the slots, modulo
// 2^47. It is not atomic across slots; callers hold the breaker's lock, and
// only concurrent closed-state successes can be missed or caught.
func (t *slotTable) sum() uint64 {
	n := uint64(0)
	for c := t.first; c != nil; c = c.next.Load() {
		for j := range c.stripes {
			for i := range c.stripes[j].w {
				n += (c.stripes[j].w[i].Load() & slotCountBits) >> 1
			}
		}
	}
	return n & slotCountMod
}
