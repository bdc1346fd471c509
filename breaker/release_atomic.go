//go:build race || !amd64

package breaker

import "sync/atomic"

// storeRelease frees a slot on the closed fast path (see release_fast.go).
func storeRelease(s *atomic.Uint64, v uint64) { s.Store(v) }
