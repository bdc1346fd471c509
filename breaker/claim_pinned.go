//go:build !race && amd64 && !floodgate_nolinkname

package breaker

import (
	"sync/atomic"
	_ "unsafe" // for go:linkname
)

// runtime.procPin and runtime.procUnpin pin the goroutine to its P and
// return the P's id, as sync.Pool does. The runtime keeps them linkable
// (go.dev/issue/67401). Build with -tags floodgate_nolinkname to use the
// portable CAS claim instead.
//
//go:linkname runtime_procPin runtime.procPin
func runtime_procPin() int

//go:linkname runtime_procUnpin runtime.procUnpin
func runtime_procUnpin()

// claim returns a busy slot and its expected word, or nil when every slot is
// in use and the table cannot grow. Each P claims only from its own stripe,
// while pinned, so no other claimer can race it: it claims a free slot with
// a plain store, without a read-modify-write. Reporters only ever write busy
// slots.
func (t *slotTable) claim(gen uint64) (*atomic.Uint64, uint64) {
	pid := runtime_procPin()
	if pid < len(t.local) {
		st := &t.local[pid]
		for i := range st.w {
			s := &st.w[i]
			if v := s.Load(); v&1 == 0 {
				w := slotWord(v, gen)
				storeRelease(s, w)
				runtime_procUnpin()
				return s, w
			}
		}
	}
	runtime_procUnpin()
	return t.claimSlow(gen)
}

// pinnedStripes reports whether the first chunk's stripes are owned by Ps
// (and so must never be claimed by CAS).
const pinnedStripes = true
