package middleware

import (
	"context"
	"sync/atomic"
	"time"
)

// callCtx is the context a handler runs under when [Config.Timeout] is
// set: the message's context (parent) with a deadline, marked as a probe's
// when it is one. It costs one allocation of 32 bytes, itself: the
// allocation is a large share of the middleware's cost (the garbage
// collector's work grows with the bytes allocated), so it is packed. The
// machinery that cancels it on time (a [context.WithDeadline] of parent,
// with its timer) is made only when something needs it: Done, Err once the
// context may be done, or context.Cause; a handler that never looks at its
// context (most in-memory ones) costs no timer. Its methods behave as that
// WithDeadline's would, cancelled when the call ends (end). Safe for
// concurrent use.
type callCtx struct {
	// word is the deadline in Unix nanoseconds on monoBase's time line
	// (see unixNs), rounded up to a multiple of 8 (never earlier than
	// asked), in its high bits, and the flags ctxProbe (set when made),
	// ctxEnded and ctxLate (set together by end) in its 3 low bits. A
	// plain int64, first (so 64-bit aligned everywhere), written in the
	// composite literal that makes the context (an atomic store there
	// would be a locked instruction on amd64) and atomically after that
	// (load and or).
	word   int64
	parent context.Context
	inner  atomic.Pointer[realCtx] // nil until made; never changes after
}

// load returns c.word.
func (c *callCtx) load() int64 { return atomic.LoadInt64(&c.word) }

// realCtx is the WithDeadline (or, made after an end in time, WithCancel)
// a callCtx stands for, and its cancel.
type realCtx struct {
	ctx  context.Context
	stop context.CancelFunc
}

const (
	ctxProbe = 1 << iota // the call is a probe
	ctxEnded             // end was called
	ctxLate              // the call ended at or after the deadline
	ctxFlags = ctxProbe | ctxEnded | ctxLate
)

func newCallCtx(parent context.Context, deadline time.Time, probe bool) *callCtx {
	w := (unixNs(deadline) + ctxFlags) &^ ctxFlags
	if probe {
		w |= ctxProbe
	}
	return &callCtx{word: w, parent: parent}
}

// deadline returns the context's own deadline (the middleware's), with a
// monotonic reading, so timers and comparisons follow the monotonic clock.
func (c *callCtx) deadline() time.Time {
	return monoBase.Add(time.Duration(c.load()&^ctxFlags - monoBaseNs))
}

// end cancels the context, as the deferred cancel of a WithDeadline would:
// now is the wall time the call ended. Called once.
func (c *callCtx) end(now time.Time) {
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
// after end, it is done already: with DeadlineExceeded if the call ended
// late, else Canceled (the parent's error if the parent is done by then).
// Either end sees inner or real sees the end (both sequentially consistent
// atomics), so it is always cancelled. Two first uses racing make one each;
// the loser's is cancelled at once.
func (c *callCtx) real() context.Context {
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

// Deadline is the earlier of the parent's deadline and the middleware's.
func (c *callCtx) Deadline() (time.Time, bool) {
	own := c.deadline()
	if d, ok := c.parent.Deadline(); ok && d.Before(own) {
		return d, true
	}
	return own, true
}

func (c *callCtx) Done() <-chan struct{} { return c.real().Done() }

// Err is nil, without making the real context, while the call runs, the
// parent is not done and the deadline has not passed.
func (c *callCtx) Err() error {
	if w := c.load(); c.inner.Load() == nil && w&ctxEnded == 0 && c.parent.Err() == nil && unixNs(wallNow()) < w&^ctxFlags {
		return nil
	}
	return c.real().Err()
}

func (c *callCtx) Value(key any) any {
	switch key {
	case probeKey{}:
		if c.load()&ctxProbe != 0 {
			return true
		}
	case cancelCtxKey:
		// context.Cause, and a context derived from this one, find the
		// cancellation they follow under this key: the real context's.
		return c.real().Value(key)
	}
	return c.parent.Value(key)
}

func (c *callCtx) String() string { return "middleware.callCtx" }

// monoBase is the origin of wallNow and of callCtx deadlines; monoBaseNs
// its Unix time in ns.
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
// monotonic time elapsed since. What the middleware does with it, latency
// and deadlines, follows the monotonic clock anyway; its wall reading
// differs from time.Now by any step of the system clock since start-up.
func wallNow() time.Time { return monoBase.Add(time.Since(monoBase)) }

// cancelCtxKey is the key under which package context looks up the
// cancellation state of a context ([context.Cause] asks for it). It is
// learned once, from a spy context; nil if Cause ever stops asking, and
// then only a context derived from a callCtx falls back to a goroutine to
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
