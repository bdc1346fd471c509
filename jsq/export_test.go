package jsq

import (
	"sync"
	"testing"
)

// WatchWaiting makes the next subscriptions report, through the function
// it returns, how many delivered messages wait in the subscriber (not yet
// handed to a handler). Not for parallel tests.
func WatchWaiting(t *testing.T) func() int {
	var mu sync.Mutex
	var flows []*flow
	hook := func(f *flow) {
		mu.Lock()
		defer mu.Unlock()
		flows = append(flows, f)
	}
	onNewFlow.Store(&hook)
	t.Cleanup(func() { onNewFlow.Store(nil) })
	return func() int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, f := range flows {
			f.mu.Lock()
			n += len(f.waiting)
			f.mu.Unlock()
		}
		return n
	}
}
