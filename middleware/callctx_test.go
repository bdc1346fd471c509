package middleware

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

// The handler's context behaves as context.WithDeadline's, deferred
// cancel included. Each test runs in a synctest bubble: time.Now and the
// timers are the bubble's, so the deadline is exact and nothing sleeps.

type valueKey struct{}

var errCause = errors.New("router closing")

// TestCallCtxDoneAtDeadline: a handler waiting on Done is woken at the
// deadline, with DeadlineExceeded as error and cause; the deadline is the
// one given, and the parent's values and the probe mark are visible.
func TestCallCtxDoneAtDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		parent := context.WithValue(context.Background(), valueKey{}, "v")
		start := time.Now()
		c := newCallCtx(parent, start.Add(time.Second), true)
		if d, ok := c.Deadline(); !ok || !d.Equal(start.Add(time.Second)) {
			t.Errorf("Deadline = %v, %v; want start+1s", d, ok)
		}
		if c.Value(valueKey{}) != "v" || !IsProbe(c) || c.Err() != nil {
			t.Errorf("value %v, probe %v, err %v; want the parent's value, a probe, nil", c.Value(valueKey{}), IsProbe(c), c.Err())
		}
		<-c.Done()
		if got := time.Since(start); got != time.Second {
			t.Errorf("done after %v, want 1s", got)
		}
		if !errors.Is(c.Err(), context.DeadlineExceeded) || !errors.Is(context.Cause(c), context.DeadlineExceeded) {
			t.Errorf("Err %v, Cause %v; want DeadlineExceeded", c.Err(), context.Cause(c))
		}
		c.end(time.Now())
		if !errors.Is(c.Err(), context.DeadlineExceeded) {
			t.Errorf("after end: Err %v, want DeadlineExceeded still", c.Err())
		}
	})
}

// TestCallCtxErrWithoutDone: Err turns DeadlineExceeded at the deadline
// for a handler that never asks for Done, and stays so after the parent is
// cancelled (first come, first reported); Cause too.
func TestCallCtxErrWithoutDone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		parent, cancel := context.WithCancelCause(context.Background())
		defer cancel(nil)
		c := newCallCtx(parent, time.Now().Add(time.Second), false)
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
		if IsProbe(c) {
			t.Error("not a probe, IsProbe true")
		}
	})
}

// TestCallCtxParentCancelled: the parent's cancellation reaches the
// handler, through Done and through a context derived from it, with the
// parent's cause; the parent's earlier deadline is the one reported.
func TestCallCtxParentCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		parent, cancel := context.WithCancelCause(context.Background())
		early, stop := context.WithTimeout(parent, time.Minute)
		defer stop()
		c := newCallCtx(early, time.Now().Add(time.Hour), false)
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

// TestCallCtxEnd: ending the call cancels the context, as a deferred
// cancel would: Canceled when it ended in time, DeadlineExceeded when it
// ended late, whether or not anything asked for Done before; a context
// derived during the call is cancelled with it; no timer outlives it.
func TestCallCtxEnd(t *testing.T) {
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
				c := newCallCtx(context.Background(), time.Now().Add(time.Second), false)
				var child context.Context = c
				if tc.doneEarly {
					var stop context.CancelFunc
					child, stop = context.WithCancel(c)
					defer stop()
				}
				time.Sleep(tc.run)
				c.end(time.Now())
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

// TestCallCtxConcurrentDoneAndEnd: Done, Err and Value asked from other
// goroutines while the call ends (run with -race): every waiter is woken,
// and all see the same error.
func TestCallCtxConcurrentDoneAndEnd(t *testing.T) {
	for range 100 {
		c := newCallCtx(context.Background(), time.Now().Add(time.Hour), false)
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
		c.end(time.Now())
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

// TestCallCtxPacked: the handler's context, the one allocation of a
// delivered message at the default Timeout, stays in the 32-byte size
// class (the collector's work per message grows with the bytes
// allocated), and its deadline and the time it is measured against come
// from the monotonic clock: wallNow agrees with time.Now and a deadline
// keeps its monotonic reading.
func TestCallCtxPacked(t *testing.T) {
	if n := unsafe.Sizeof(callCtx{}); n > 32 {
		t.Fatalf("callCtx is %d bytes, want <= 32", n)
	}
	if d := time.Since(wallNow()); d < -time.Minute || d > time.Minute {
		t.Fatalf("wallNow is %v from time.Now", d)
	}
	want := wallNow().Add(time.Hour)
	c := newCallCtx(context.Background(), want, true)
	d, _ := c.Deadline()
	if diff := d.Sub(want); diff < 0 || diff >= 8 {
		t.Fatalf("deadline %v from the one asked, want within [0, 8ns)", diff)
	}
	if !strings.Contains(d.String(), " m=") { // time.Time's String shows its monotonic reading
		t.Fatal("deadline has no monotonic clock reading")
	}
	if !IsProbe(c) || c.Err() != nil {
		t.Fatalf("probe %v, Err %v", IsProbe(c), c.Err())
	}
	c.end(wallNow())
	if !errors.Is(c.Err(), context.Canceled) {
		t.Fatalf("ended in time: Err %v, want Canceled", c.Err())
	}
}
