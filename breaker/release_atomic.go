//go:build race || !amd64

package breaker

import "sync/atomic"

// storeRelease writes a word of a slot the caller holds (see release_fast.go).
func storeRelease(s *atomic.Uint64, v uint64) { s.Store(v) }
