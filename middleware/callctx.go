package middleware

import (
	"context"
	"time"

	"github.com/floodgate-go/floodgate/internal/lazyctx"
)

// callCtx is the context a handler runs under when [Config.Timeout] is
// set: the message's context (parent) with a deadline, marked as a probe's
// when it is one. It is a [lazyctx.Ctx]: one allocation of 32 bytes,
// itself, and no timer unless something asks for Done (or for Err once
// the context may be done). Safe for concurrent use.
type callCtx struct{ lazyctx.Ctx }

func newCallCtx(parent context.Context, deadline time.Time, probe bool) *callCtx {
	c := new(callCtx)
	c.Init(parent, deadline, probe)
	return c
}

// end cancels the context, as the deferred cancel of a WithDeadline would:
// now is the wall time the call ended. Called once.
func (c *callCtx) end(now time.Time) { c.End(now) }

func (c *callCtx) Value(key any) any {
	if _, ok := key.(probeKey); ok && c.Marked() {
		return true
	}
	return c.Ctx.Value(key)
}

func (c *callCtx) String() string { return "middleware.callCtx" }

// monoBase is the origin of wallNow.
var monoBase = time.Now()

// wallNow is the wall clock's time read from the monotonic clock alone
// (time.Since, one clock read where time.Now takes two): monoBase plus the
// monotonic time elapsed since. What the middleware does with it, latency
// and deadlines, follows the monotonic clock anyway; its wall reading
// differs from time.Now by any step of the system clock since start-up.
func wallNow() time.Time { return monoBase.Add(time.Since(monoBase)) }
