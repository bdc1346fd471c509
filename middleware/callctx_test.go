package middleware

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
	"unsafe"
)

type callValueKey struct{}

// TestCallCtxProbeAndPacked: the handler's context, the one allocation of
// a delivered message at the default Timeout, stays in the 32-byte size
// class; it carries the probe mark (IsProbe) and the message context's
// values, and ending the call in time cancels it. The context's own
// behaviour is lazyctx's (tested there).
func TestCallCtxProbeAndPacked(t *testing.T) {
	if n := unsafe.Sizeof(callCtx{}); n > 32 {
		t.Fatalf("callCtx is %d bytes, want <= 32", n)
	}
	if d := time.Since(wallNow()); d < -time.Minute || d > time.Minute {
		t.Fatalf("wallNow is %v from time.Now", d)
	}
	parent := context.WithValue(context.Background(), callValueKey{}, "v")
	for _, probe := range []bool{false, true} {
		c := newCallCtx(parent, wallNow().Add(time.Hour), probe)
		if IsProbe(c) != probe || c.Value(callValueKey{}) != "v" || c.Err() != nil {
			t.Fatalf("probe %v: IsProbe %v, value %v, Err %v", probe, IsProbe(c), c.Value(callValueKey{}), c.Err())
		}
		c.end(wallNow())
		if !errors.Is(c.Err(), context.Canceled) {
			t.Fatalf("ended in time: Err %v, want Canceled", c.Err())
		}
	}
}

// TestCallCtxCause: through the embedding, a handler's context and one
// derived from it are done at the deadline, exactly (a synctest bubble),
// with DeadlineExceeded as their cause, the parent still running.
func TestCallCtxCause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		parent, cancel := context.WithCancelCause(context.Background())
		defer cancel(nil)
		start := time.Now()
		c := newCallCtx(parent, start.Add(time.Second), true)
		child, stop := context.WithCancel(c)
		defer stop()
		<-child.Done()
		if got := time.Since(start); got != time.Second {
			t.Fatalf("derived context done after %v, want the deadline, 1s", got)
		}
		if !errors.Is(context.Cause(c), context.DeadlineExceeded) || !errors.Is(context.Cause(child), context.DeadlineExceeded) {
			t.Fatalf("Cause %v, child's %v; want DeadlineExceeded", context.Cause(c), context.Cause(child))
		}
	})
}
