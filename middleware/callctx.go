package middleware

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// callCtx is the context a handler runs under when [Config.Timeout] is
// set: the message's context (parent) with a deadline, marked as a probe's
// when it is one. It costs one allocation, itself. The machinery that
// cancels it on time (a [context.WithDeadline] of parent, with its timer)
// is made only when something needs it: Done, Err once the context may be
// done, or context.Cause; a handler that never looks at its context (most
// in-memory ones) costs no timer. Its methods behave as that
// WithDeadline's would, cancelled when the call ends (end). Safe for
// concurrent use.
type callCtx struct {
	parent   context.Context
	deadline time.Time
	probe    bool

	made  atomic.Bool // inner and stop are set; they never change after
	ended atomic.Bool // end was called
	late  bool        // the call ended at or after the deadline; set before ended
	mu    sync.Mutex  // serializes making inner
	inner context.Context
	stop  context.CancelFunc
}

func newCallCtx(parent context.Context, deadline time.Time, probe bool) *callCtx {
	return &callCtx{parent: parent, deadline: deadline, probe: probe}
}

// end cancels the context, as the deferred cancel of a WithDeadline would:
// now is the wall time the call ended. Called once.
func (c *callCtx) end(now time.Time) {
	c.late = !now.Before(c.deadline) // read by real only once ended is seen
	c.ended.Store(true)
	if c.made.Load() {
		c.stop()
	}
}

// real returns the WithDeadline c stands for, making it on first use. Made
// after end, it is done already: with DeadlineExceeded if the call ended
// late, else Canceled (the parent's error if the parent is done by then).
// Either end sees made or real sees ended, so it is always cancelled.
func (c *callCtx) real() context.Context {
	if c.made.Load() {
		return c.inner
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.made.Load() {
		if c.ended.Load() && !c.late {
			c.inner, c.stop = context.WithCancel(c.parent)
		} else {
			c.inner, c.stop = context.WithDeadline(c.parent, c.deadline)
		}
		c.made.Store(true)
		if c.ended.Load() {
			c.stop()
		}
	}
	return c.inner
}

// Deadline is the earlier of the parent's deadline and the middleware's.
func (c *callCtx) Deadline() (time.Time, bool) {
	if d, ok := c.parent.Deadline(); ok && d.Before(c.deadline) {
		return d, true
	}
	return c.deadline, true
}

func (c *callCtx) Done() <-chan struct{} { return c.real().Done() }

// Err is nil, without making the real context, while the call runs, the
// parent is not done and the deadline has not passed.
func (c *callCtx) Err() error {
	if !c.made.Load() && !c.ended.Load() && c.parent.Err() == nil && time.Now().Before(c.deadline) {
		return nil
	}
	return c.real().Err()
}

func (c *callCtx) Value(key any) any {
	switch key {
	case probeKey{}:
		if c.probe {
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
