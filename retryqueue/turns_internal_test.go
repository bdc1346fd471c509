package retryqueue

import (
	"context"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/internal/natstest"
)

// acquireAsync queues for a lane of l and returns a channel that receives
// acquire's result once it returns; it waits until the call is queued
// (waiting reports it) or has returned.
func acquireAsync(t *testing.T, ctx context.Context, l *lanes, queuedBefore int32) <-chan error {
	t.Helper()
	got := make(chan error, 1)
	go func() { got <- l.acquire(ctx) }()
	natstest.Eventually(t, 10*time.Second, func() bool { return l.waits.Load() > queuedBefore || len(got) > 0 }, "acquire queued or returned")
	return got
}

func granted(ch <-chan error) bool {
	select {
	case err := <-ch:
		return err == nil
	default:
		return false
	}
}

// The lanes never hand out more than their number, and hand a freed lane
// to the partner that has waited longest: a partner that gives its lane
// up while others wait queues behind them (round-robin turns).
func TestLanesBoundAndTurnOrder(t *testing.T) {
	ctx := context.Background()
	l := newLanes(2)
	if err := l.acquire(ctx); err != nil {
		t.Fatal(err)
	}
	if err := l.acquire(ctx); err != nil {
		t.Fatal(err)
	}
	a := acquireAsync(t, ctx, l, 0)
	b := acquireAsync(t, ctx, l, 1)
	if granted(a) || granted(b) {
		t.Fatal("a third lane was handed out while two are held")
	}
	if !l.waiting() {
		t.Fatal("waiting() = false with two queued")
	}

	l.release() // to a, the longest waiter
	natstest.Finishes(t, 10*time.Second, func() { <-a }, "a granted the freed lane")
	if granted(b) {
		t.Fatal("b was granted a lane before a, which queued first")
	}
	// a's turn ends while b waits: a goes behind b.
	l.release()
	a = acquireAsync(t, ctx, l, 0)
	natstest.Finishes(t, 10*time.Second, func() { <-b }, "b granted before a's second turn")
	if granted(a) {
		t.Fatal("a got a second turn while b, queued before it, waited")
	}
	l.release()
	natstest.Finishes(t, 10*time.Second, func() { <-a }, "a granted again")
	if l.waiting() {
		t.Fatal("waiting() = true with nobody queued")
	}
	// All held lanes given back: both free again, no more.
	l.release()
	l.release()
	if l.free != 2 {
		t.Fatalf("free lanes = %d after all were given back, want 2", l.free)
	}
}

// A waiter whose context ends leaves the queue and takes no lane; a lane
// granted to it as its context ended goes on to the next waiter.
func TestLanesCanceledWaiter(t *testing.T) {
	l := newLanes(1)
	if err := l.acquire(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	gone := acquireAsync(t, ctx, l, 0)
	next := acquireAsync(t, context.Background(), l, 1)
	cancel()
	natstest.Finishes(t, 10*time.Second, func() {
		if err := <-gone; err == nil {
			t.Error("a canceled waiter was granted a lane")
		}
	}, "canceled waiter returns")
	if granted(next) {
		t.Fatal("next granted while the lane is still held")
	}
	l.release()
	natstest.Finishes(t, 10*time.Second, func() { <-next }, "the lane goes to the remaining waiter")
	l.release()
	if l.free != 1 || l.waiting() {
		t.Fatalf("free = %d, waiting = %v after all given back; want 1, false", l.free, l.waiting())
	}
}
