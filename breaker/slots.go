package breaker

import (
	"runtime"
	"sync/atomic"
	"unsafe"
)

// The closed-state fast path: every closed-state permit owns one slot while
// it is in flight. A slot is two words:
//
//   - w = count<<1 | busy, where count is the number of outcomes reported
//     through the slot. Allow claims a free slot (count<<1) by CAS to
//     count<<1|1; reporting releases it by replacing the permit's expected
//     word with word+1, which is count+1, free. The word only grows, so it
//     never repeats (63 bits: 2^62 claims per slot): a second report of the
//     same permit finds another word and is ignored, without ABA, however
//     many permits are in flight.
//   - gen, the full 64-bit generation the holder was admitted in, written by
//     the claimer after the claim and read by the reporter while w still
//     holds its expected word.
//
// The sum of the counts over all slots is the number of closed-state
// outcomes ever reported (modulo 2^64), so successes need no shared counter.
//
// Slots are grouped in stripes of 8 (128 bytes, two cache lines, so the
// adjacent-line prefetcher does not couple neighbours). A goroutine claims in
// a home stripe chosen from the address of its stack, so parallel callers
// touch different cache lines. The table starts empty and grows lazily:
//
//   - under contention (a claim CAS lost to another claimer), the home
//     stripes double, up to 16 per P;
//   - when a goroutine's home stripe is full (more permits in flight than it
//     holds), the claim tries the spill stripes next-fit from a shared
//     cursor, at most spillSearch of them, and otherwise adds as many spill
//     stripes as the table has (doubling it). The search is bounded, so a
//     claim costs O(1) at any number in flight. The table holds the peak in
//     flight and typically about twice that; long-lived permits filling the
//     stripes at the cursor can make it grow further.
//
// Stripes are never freed or moved: a permit keeps a pointer to its slot,
// and the counts live in the slots. Growth publishes a new slotIndex by CAS.
// Memory follows the peak number in flight and the contention seen: one
// stripe (and a small index) for a breaker used by one goroutine at a time.
// The locked paths sum the table when the lock-free path may have released
// slots since the last sum (Breaker.outcomesLocked), one load per slot.

const (
	slotsPerStripe = 8
	spillSearch    = 4 // spill stripes searched before the table grows
)

// slot is a slot's word w (count<<1 | busy); its generation word sits in
// the same stripe, slotsPerStripe words further (slot.gen), so a claim that
// scans a stripe's words reads one cache line.
type slot struct {
	w atomic.Uint64
}

type stripe struct {
	s   [slotsPerStripe]slot
	gen [slotsPerStripe]atomic.Uint64 // generation of the holder; valid while busy
}

// gen returns the generation word of s, which is an element of a stripe's
// s array: the element of its gen array at the same index.
func (s *slot) gen() *atomic.Uint64 {
	return (*atomic.Uint64)(unsafe.Add(unsafe.Pointer(s), unsafe.Offsetof(stripe{}.gen)))
}

// slotIndex is one immutable layout of the table.
type slotIndex struct {
	home  []stripe  // len a power of two; goroutines hash into it
	shift uint      // 64 - log2(len(home))
	spill []*stripe // earlier home stripes and overflow stripes
}

type slotTable struct {
	idx    atomic.Pointer[slotIndex] // nil until the first claim
	cursor atomic.Uint32             // next-fit start in idx.spill
}

// claim returns a busy slot and its expected word, for a permit admitted in
// generation gen. It takes the first free slot of the goroutine's home
// stripe, or goes to claimSlow.
func (t *slotTable) claim(gen uint64) (*slot, uint64) {
	ix := t.idx.Load()
	if ix == nil {
		return t.claimSlow(gen, nil, false)
	}
	st := &ix.home[stackHint()>>ix.shift]
	for i := range st.s {
		s := &st.s[i]
		if v := s.w.Load(); v&1 == 0 {
			if !s.w.CompareAndSwap(v, v|1) {
				return t.claimSlow(gen, ix, true)
			}
			s.setGen(gen)
			return s, v | 1
		}
	}
	// Home stripe full: the spill stripe at the cursor usually has a slot.
	if c := int(t.cursor.Load()); c < len(ix.spill) {
		if s, w := tryStripe(ix.spill[c], gen); s != nil {
			return s, w
		}
	}
	return t.claimSlow(gen, ix, false)
}

// setGen records the holder's generation; it writes only when it changes.
func (s *slot) setGen(gen uint64) {
	if g := s.gen(); g.Load() != gen {
		storeRelease(g, gen)
	}
}

// tryStripe claims a free slot of st by CAS.
func tryStripe(st *stripe, gen uint64) (*slot, uint64) {
	for i := range st.s {
		s := &st.s[i]
		if v := s.w.Load(); v&1 == 0 && s.w.CompareAndSwap(v, v|1) {
			s.setGen(gen)
			return s, v | 1
		}
	}
	return nil, 0
}

// maxHome is the number of home stripes contention can grow the table to.
func maxHome() int { return 16 * runtime.GOMAXPROCS(0) }

func (t *slotTable) claimSlow(gen uint64, ix *slotIndex, contended bool) (*slot, uint64) {
	for {
		if ix == nil || contended {
			if ix == nil || len(ix.home) < maxHome() {
				ix = t.growHome(ix)
			}
			if s, w := tryStripe(&ix.home[stackHint()>>ix.shift], gen); s != nil {
				return s, w
			}
			contended = false
		}
		if n := len(ix.spill); n > 0 {
			c := int(t.cursor.Load())
			if c >= n {
				c = 0
			}
			for k := range min(n, spillSearch) {
				j := c + k
				if j >= n {
					j -= n
				}
				if s, w := tryStripe(ix.spill[j], gen); s != nil {
					if j != c {
						t.cursor.Store(uint32(j))
					}
					return s, w
				}
			}
		}
		// Double the table with new spill stripes, the first slot claimed
		// before they are published.
		add := make([]stripe, len(ix.home)+len(ix.spill))
		s := &add[0].s[0]
		s.w.Store(1)
		s.gen().Store(gen)
		nx := &slotIndex{home: ix.home, shift: ix.shift, spill: make([]*stripe, len(ix.spill), len(ix.spill)+len(add))}
		copy(nx.spill, ix.spill)
		for i := range add {
			nx.spill = append(nx.spill, &add[i])
		}
		if t.idx.CompareAndSwap(ix, nx) {
			t.cursor.Store(uint32(len(ix.spill)))
			return s, 1
		}
		ix = t.idx.Load() // another claimer grew it: search again
	}
}

// growHome installs the first index, or doubles the home stripes (moving
// the old ones to the spill list, where they keep their counts and
// permits), and returns the current index.
func (t *slotTable) growHome(ix *slotIndex) *slotIndex {
	for {
		var nx *slotIndex
		first := ix == nil
		if first {
			nx = &slotIndex{home: make([]stripe, 1), shift: 64}
		} else {
			nx = &slotIndex{home: make([]stripe, 2*len(ix.home)), shift: ix.shift - 1,
				spill: make([]*stripe, 0, len(ix.spill)+len(ix.home))}
			nx.spill = append(nx.spill, ix.spill...)
			for i := range ix.home {
				nx.spill = append(nx.spill, &ix.home[i])
			}
		}
		if t.idx.CompareAndSwap(ix, nx) {
			return nx
		}
		if ix = t.idx.Load(); first || len(ix.home) >= len(nx.home) {
			return ix // another claimer grew it as far
		}
	}
}

// stackHint picks the calling goroutine's home stripe (its top bits index
// it): a hash of the address of a variable on the caller's stack, which is
// stable for a goroutine (until its stack moves) and differs between
// goroutines. It needs no go:linkname to runtime.procPin: indexed by the P's
// id instead, the parallel closed path measured slower (BENCHMARKS.md).
//
//go:nosplit
func stackHint() uint64 {
	var marker byte
	return uint64(uintptr(unsafe.Pointer(&marker))>>10) * 0x9E3779B97F4A7C15
}

// sum returns the number of outcomes released through the slots, modulo
// 2^64. It is not atomic across slots; callers hold the breaker's lock, and
// only concurrent closed-state successes can be missed or caught.
func (t *slotTable) sum() uint64 {
	ix := t.idx.Load()
	if ix == nil {
		return 0
	}
	n := uint64(0)
	for j := range ix.home {
		n += ix.home[j].sum()
	}
	for _, st := range ix.spill {
		n += st.sum()
	}
	return n
}

func (st *stripe) sum() uint64 {
	n := uint64(0)
	for i := range st.s {
		n += st.s[i].w.Load() >> 1
	}
	return n
}
