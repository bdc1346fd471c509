package lazyctx

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
	"unsafe"
)

// A Ctx behaves as context.WithDeadline's, deferred cancel included. Each test runs in a synctest bubble: time.Now and the
// timers are the bubble's, so the deadline is exact and nothing sleeps.

type valueKey struct{}

func newCtx(parent context.Context, deadline time.Time, mark bool) *Ctx {
	c := new(Ctx)
	c.Init(parent, deadline, mark)
	return c
}

var errCause = errors.New("router closing")

// TestCtxDoneAtDeadline: a handler waiting on Done is woken at the
// deadline, with DeadlineExceeded as error and cause; the deadline is the
// one given, and the parent's values and the mark are visible.
func TestCtxDoneAtDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		parent := context.WithValue(context.Background(), valueKey{}, "v")
		start := time.Now()
		c := newCtx(parent, start.Add(time.Second), true)
		if d, ok := c.Deadline(); !ok || !d.Equal(start.Add(time.Second)) {
			t.Errorf("Deadline = %v, %v; want start+1s", d, ok)
		}
		if c.Value(valueKey{}) != "v" || !c.Marked() || c.Err() != nil {
			t.Errorf("value %v, marked %v, err %v; want the parent's value, marked, nil", c.Value(valueKey{}), c.Marked(), c.Err())
		}
		<-c.Done()
		if got := time.Since(start); got != time.Second {
			t.Errorf("done after %v, want 1s", got)
		}
		if !errors.Is(c.Err(), context.DeadlineExceeded) || !errors.Is(context.Cause(c), context.DeadlineExceeded) {
			t.Errorf("Err %v, Cause %v; want DeadlineExceeded", c.Err(), context.Cause(c))
		}
		c.End(time.Now())
		if !errors.Is(c.Err(), context.DeadlineExceeded) {
			t.Errorf("after end: Err %v, want DeadlineExceeded still", c.Err())
		}
	})
}

// TestCtxErrWithoutDone: Err turns DeadlineExceeded at the deadline
// for a handler that never asks for Done, and stays so after the parent is
// cancelled (first come, first reported); Cause too.
func TestCtxErrWithoutDone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		parent, cancel := context.WithCancelCause(context.Background())
		defer cancel(nil)
		c := newCtx(parent, time.Now().Add(time.Second), false)
		time.Sleep(time.Second - time.Nanosecond)
		if err := c.Err(); err != nil {
			t.Fatalf("before the deadline: Err %v", err)
		}
		time.Sleep(time.Nanosecond)
		if err := c.Err(); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("at the deadline: Err %v, want DeadlineExceeded", err)
		}
		cancel(errCause)
		if !errors.Is(c.Err(), context.DeadlineExceeded) || !errors.Is(context.Cause(c), context.DeadlineExceeded) {
			t.Errorf("parent cancelled after: Err %v, Cause %v; want DeadlineExceeded", c.Err(), context.Cause(c))
		}
		if c.Marked() {
			t.Error("not marked, Marked true")
		}
	})
}

// TestCtxParentCancelled: the parent's cancellation reaches the
// handler, through Done and through a context derived from it, with the
// parent's cause; the parent's earlier deadline is the one reported.
func TestCtxParentCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		parent, cancel := context.WithCancelCause(context.Background())
		early, stop := context.WithTimeout(parent, time.Minute)
		defer stop()
		c := newCtx(early, time.Now().Add(time.Hour), false)
		if d, _ := c.Deadline(); !d.Equal(time.Now().Add(time.Minute)) {
			t.Errorf("Deadline %v, want the parent's, a minute from now", d)
		}
		child, stopChild := context.WithCancel(c)
		defer stopChild()
		fired := make(chan struct{})
		context.AfterFunc(c, func() { close(fired) })
		go cancel(errCause)
		<-c.Done()
		<-child.Done()
		<-fired
		if !errors.Is(c.Err(), context.Canceled) || !errors.Is(context.Cause(c), errCause) || !errors.Is(context.Cause(child), errCause) {
			t.Errorf("Err %v, Cause %v, child's Cause %v; want Canceled, %v", c.Err(), context.Cause(c), context.Cause(child), errCause)
		}
	})
}

// TestCtxEnd: ending the call cancels the context, as a deferred
// cancel would: Canceled when it ended in time, DeadlineExceeded when it
// ended late, whether or not anything asked for Done before; a context
// derived during the call is cancelled with it; no timer outlives it.
func TestCtxEnd(t *testing.T) {
	for _, tc := range []struct {
		name      string
		run       time.Duration // how long the call runs
		doneEarly bool          // Done asked during the call
		want      error
	}{
		{"in time", time.Millisecond, false, context.Canceled},
		{"in time, Done asked", time.Millisecond, true, context.Canceled},
		{"late", 2 * time.Second, false, context.DeadlineExceeded},
		{"late, Done asked", 2 * time.Second, true, context.DeadlineExceeded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := newCtx(context.Background(), time.Now().Add(time.Second), false)
				var child context.Context = c
				if tc.doneEarly {
					var stop context.CancelFunc
					child, stop = context.WithCancel(c)
					defer stop()
				}
				time.Sleep(tc.run)
				c.End(time.Now())
				<-c.Done()
				<-child.Done()
				if !errors.Is(c.Err(), tc.want) || !errors.Is(child.Err(), tc.want) {
					t.Errorf("after end: Err %v, child's %v; want %v", c.Err(), child.Err(), tc.want)
				}
				synctest.Wait() // every goroutine of the bubble is idle: no timer left running
			})
		})
	}
}

// TestCtxConcurrentDoneAndEnd: Done, Err and Value asked from other
// goroutines while the call ends (run with -race): every waiter is woken,
// and all see the same error.
func TestCtxConcurrentDoneAndEnd(t *testing.T) {
	for range 100 {
		c := newCtx(context.Background(), time.Now().Add(time.Hour), false)
		var wg sync.WaitGroup
		errs := make(chan error, 4)
		for range 4 {
			wg.Go(func() {
				_ = c.Err()
				_ = context.Cause(c)
				<-c.Done()
				errs <- c.Err()
			})
		}
		c.End(time.Now())
		wg.Wait()
		close(errs)
		for err := range errs {
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("waiter saw %v, want Canceled", err)
			}
		}
	}
}

// TestCancelCtxKeyLearned: the key package context looks its cancellation
// state up under was learned, so context.Cause and derived contexts follow
// the real context without a goroutine.
func TestCancelCtxKeyLearned(t *testing.T) {
	if cancelCtxKey == nil {
		t.Fatal("cancelCtxKey not learned: context.Cause no longer asks Value")
	}
}

// TestCtxPacked: a Ctx, the one allocation of a handler's context, stays
// in the 32-byte size class (the collector's work per message grows with
// the bytes allocated), and its deadline and the time it is measured
// against come from the monotonic clock: wallNow agrees with time.Now and
// a deadline keeps its monotonic reading.
func TestCtxPacked(t *testing.T) {
	if n := unsafe.Sizeof(Ctx{}); n > 32 {
		t.Fatalf("Ctx is %d bytes, want <= 32", n)
	}
	if d := time.Since(wallNow()); d < -time.Minute || d > time.Minute {
		t.Fatalf("wallNow is %v from time.Now", d)
	}
	want := wallNow().Add(time.Hour)
	c := newCtx(context.Background(), want, true)
	d, _ := c.Deadline()
	if diff := d.Sub(want); diff < 0 || diff >= 8 {
		t.Fatalf("deadline %v from the one asked, want within [0, 8ns)", diff)
	}
	if !strings.Contains(d.String(), " m=") { // time.Time's String shows its monotonic reading
		t.Fatal("deadline has no monotonic clock reading")
	}
	if !c.Marked() || c.Err() != nil {
		t.Fatalf("marked %v, Err %v", c.Marked(), c.Err())
	}
	c.End(wallNow())
	if !errors.Is(c.Err(), context.Canceled) {
		t.Fatalf("ended in time: Err %v, want Canceled", c.Err())
	}
}
