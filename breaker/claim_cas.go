//go:build race || !amd64 || floodgate_nolinkname

package breaker

import "sync/atomic"

// claim returns a busy slot and its expected word, or nil when every slot is
// in use and the table cannot grow. It claims by CAS in a stripe chosen from
// the goroutine's stack address.
func (t *slotTable) claim(gen uint64) (*atomic.Uint64, uint64) {
	st := &t.local[t.stripeIndex()]
	for i := range st.w {
		s := &st.w[i]
		if v := s.Load(); v&1 == 0 && s.CompareAndSwap(v, slotWord(v, gen)) {
			return s, slotWord(v, gen)
		}
	}
	return t.claimSlow(gen)
}

const pinnedStripes = false
