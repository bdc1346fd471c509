package retryqueue

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
)

type parentKey struct{}

// A drained message's context carries the drain's marks (FromDrain, its
// slot for DrainedPartner) and the parent's values, and behaves as the
// context.WithTimeout it replaces: done at HandlerTimeout with
// DeadlineExceeded as its cause and its child's, or cancelled when the
// call ends in time. In a synctest bubble, so nothing sleeps.
func TestDrainCtxDeadlineAndMarks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		parent, cancel := context.WithCancelCause(context.WithValue(context.Background(), parentKey{}, "v"))
		defer cancel(nil)
		m := message.NewMessage("u1", nil)
		start := time.Now()
		c := &drainCtx{s: slot{uuid: "u1", route: route{service: "svc", partnerToken: "p", partnerKey: "p", known: true}}}
		c.Init(parent, start.Add(time.Second), false)
		if k, ok := DrainedPartner(c, m); !ok || k != "p" || !FromDrain(c) || c.Value(parentKey{}) != "v" {
			t.Fatalf("DrainedPartner %q %v, FromDrain %v, parent value %v", k, ok, FromDrain(c), c.Value(parentKey{}))
		}
		if d, ok := c.Deadline(); !ok || !d.Equal(start.Add(time.Second)) {
			t.Fatalf("Deadline %v %v, want start+1s", d, ok)
		}
		child, stop := context.WithCancel(c)
		defer stop()
		<-c.Done()
		<-child.Done()
		if time.Since(start) != time.Second {
			t.Fatalf("done after %v, want 1s", time.Since(start))
		}
		// The cause is the handler's deadline, the parent still running.
		if !errors.Is(context.Cause(c), context.DeadlineExceeded) || !errors.Is(context.Cause(child), context.DeadlineExceeded) {
			t.Fatalf("Cause %v, child's %v; want DeadlineExceeded", context.Cause(c), context.Cause(child))
		}

		in := &drainCtx{s: slot{uuid: "u2"}}
		in.Init(parent, time.Now().Add(time.Second), false)
		in.End(time.Now())
		if !errors.Is(in.Err(), context.Canceled) {
			t.Fatalf("ended in time: Err %v, want Canceled", in.Err())
		}
		synctest.Wait() // no timer left running
	})
}
