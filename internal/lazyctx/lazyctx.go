// Package lazyctx holds Ctx, a context with a deadline whose cancellation
// machinery is made only when something needs it: the context a handler
// runs under, in the middleware (its delivery Timeout) and in the drainer
// (its HandlerTimeout), costs one allocation of its own rather than the
// four of a [context.WithTimeout].
package lazyctx

import (
	"context"
	"sync/atomic"
	"time"
)

// Ctx is a parent context with a deadline, marked or not (the middleware
// marks a probe's). It is meant to be embedded, as a value, in the
// context a caller allocates, which then costs that one allocation: the
// allocation is a large share of a handler call's cost (the garbage
// collector's work grows with the bytes allocated), so it is packed into 32
// bytes. The machinery that cancels it on time (a [context.WithDeadline]
// of parent, with its timer) is made only when something needs it: Done,
// Err once the context may be done, or context.Cause; a handler that never
// looks at its context (most in-memory ones) costs no timer. Its methods
// behave as that WithDeadline's would, cancelled when the call ends
// ([Ctx.End]). Set it up with [Ctx.Init] before sharing it; then it is
// safe for concurrent use.
type Ctx struct {
	// word is the deadline in Unix nanoseconds on monoBase's time line
	// (see unixNs), rounded up to a multiple of 8 (never earlier than
	// asked), in its high bits, and the flags ctxMark (set by Init),
	// ctxEnded and ctxLate (set together by End) in its 3 low bits. A
	// plain int64, first (so 64-bit aligned everywhere), written plainly
	// by Init, before the context is shared (an atomic store there would
	// be a locked instruction on amd64), and atomically after that (load
	// and or).
	word   int64
	parent context.Context
	inner  atomic.Pointer[realCtx] // nil until made; never changes after
}

// load returns c.word.
func (c *Ctx) load() int64 { return atomic.LoadInt64(&c.word) }

// realCtx is the WithDeadline (or, made after an end in time, WithCancel)
// a Ctx stands for, and its cancel.
type realCtx struct {
	ctx  context.Context
	stop context.CancelFunc
}

const (
	ctxMark  = 1 << iota // the caller's mark (Init)
	ctxEnded             // End was called
	ctxLate              // the call ended at or after the deadline
	ctxFlags = ctxMark | ctxEnded | ctxLate
)

// Init sets c up as parent with deadline, marked if mark. Call it once,
// before c is shared: it is not safe for concurrent use.
func (c *Ctx) Init(parent context.Context, deadline time.Time, mark bool) {
	w := (unixNs(deadline) + ctxFlags) &^ ctxFlags
	if mark {
		w |= ctxMark
	}
	c.word, c.parent = w, parent
}

// Marked reports whether Init marked c.
func (c *Ctx) Marked() bool { return c.load()&ctxMark != 0 }

// deadline returns the context's own deadline, with a monotonic reading,
// so timers and comparisons follow the monotonic clock.
func (c *Ctx) deadline() time.Time {
	return monoBase.Add(time.Duration(c.load()&^ctxFlags - monoBaseNs))
}

// End cancels the context, as the deferred cancel of a WithDeadline would:
// now is the time the call ended. Call it once.
func (c *Ctx) End(now time.Time) {
	f := int64(ctxEnded)
	if unixNs(now) >= c.load()&^ctxFlags {
		f |= ctxLate
	}
	atomic.OrInt64(&c.word, f)
	if r := c.inner.Load(); r != nil {
		r.stop()
	}
}

// real returns the WithDeadline c stands for, making it on first use. Made
// after End, it is done already: with DeadlineExceeded if the call ended
// late, else Canceled (the parent's error if the parent is done by then).
// Either End sees inner or real sees the end (both sequentially consistent
// atomics), so it is always cancelled. Two first uses racing make one each;
// the loser's is cancelled at once.
func (c *Ctx) real() context.Context {
	if r := c.inner.Load(); r != nil {
		return r.ctx
	}
	r := new(realCtx)
	if c.load()&(ctxEnded|ctxLate) == ctxEnded { // ended in time
		r.ctx, r.stop = context.WithCancel(c.parent)
	} else {
		r.ctx, r.stop = context.WithDeadline(c.parent, c.deadline())
	}
	if !c.inner.CompareAndSwap(nil, r) {
		r.stop()
		return c.inner.Load().ctx
	}
	if c.load()&ctxEnded != 0 {
		r.stop()
	}
	return r.ctx
}

// Deadline is the earlier of the parent's deadline and c's own.
func (c *Ctx) Deadline() (time.Time, bool) {
	own := c.deadline()
	if d, ok := c.parent.Deadline(); ok && d.Before(own) {
		return d, true
	}
	return own, true
}

// Done is the real context's Done channel (made on first use).
func (c *Ctx) Done() <-chan struct{} { return c.real().Done() }

// Err is nil, without making the real context, while the call runs, the
// parent is not done and the deadline has not passed.
func (c *Ctx) Err() error {
	if w := c.load(); c.inner.Load() == nil && w&ctxEnded == 0 && c.parent.Err() == nil && unixNs(wallNow()) < w&^ctxFlags {
		return nil
	}
	return c.real().Err()
}

// Value is the parent's value for key. An embedding context answers its
// own keys and asks this Value for the others.
func (c *Ctx) Value(key any) any {
	if key == cancelCtxKey {
		// context.Cause, and a context derived from this one, find the
		// cancellation they follow under this key: the real context's.
		return c.real().Value(key)
	}
	return c.parent.Value(key)
}

func (c *Ctx) String() string { return "lazyctx.Ctx" }

// monoBase is the origin of wallNow and of deadlines; monoBaseNs its Unix
// time in ns.
var (
	monoBase   = time.Now()
	monoBaseNs = monoBase.UnixNano()
)

// unixNs returns t in Unix nanoseconds on monoBase's time line: monoBase
// plus t.Sub(monoBase), which follows the monotonic clock when t has a
// reading of it (wallNow and time.Now times do), so it agrees with wallNow
// and a deadline keeps its distance from now whatever the system clock
// does; for a t without one it is t.UnixNano().
func unixNs(t time.Time) int64 { return monoBaseNs + int64(t.Sub(monoBase)) }

// wallNow is the wall clock's time read from the monotonic clock alone
// (time.Since, one clock read where time.Now takes two): monoBase plus the
// monotonic time elapsed since.
func wallNow() time.Time { return monoBase.Add(time.Since(monoBase)) }

// cancelCtxKey is the key under which package context looks up the
// cancellation state of a context ([context.Cause] asks for it). It is
// learned once, from a spy context; nil if Cause ever stops asking, and
// then only a context derived from a Ctx falls back to a goroutine to
// follow it.
var cancelCtxKey = func() any {
	s := &keySpy{}
	_ = context.Cause(s)
	return s.key
}()

type keySpy struct {
	context.Context
	key any
}

func (*keySpy) Err() error            { return context.Canceled }
func (s *keySpy) Value(k any) any     { s.key = k; return nil }
func (*keySpy) Done() <-chan struct{} { return nil }
