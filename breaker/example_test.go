package breaker_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/breaker/breakertest"
)

// A caller asks the breaker before each call and reports the outcome with
// the permit. Rejected calls are diverted (here: counted).
func Example() {
	clk := breakertest.NewClock(time.Time{})
	b, err := breaker.New(breaker.Config{
		Name: "partner-as2", Clock: clk, DisableJitter: true,
		WindowSize: 10, MinimumCalls: 5,
	})
	if err != nil {
		panic(err)
	}
	defer b.Stop()
	b.AddListener(func(t breaker.Transition) {
		fmt.Printf("%v -> %v: %s (window %v)\n", t.From, t.To, t.Reason, t.Window)
	})
	send := func(ok bool) {
		p, err := b.Allow()
		if err != nil {
			fmt.Println("diverted:", errors.Is(err, breaker.ErrOpen), err)
			return
		}
		clk.Advance(10 * time.Millisecond) // the call takes 10ms
		if ok {
			p.Done(nil)
		} else {
			p.Done(errors.New("HTTP 503"))
		}
	}
	for range 5 {
		send(false)
	}
	send(true)
	clk.Advance(time.Second)
	for range 5 {
		send(true)
	}
	// Output:
	// closed -> open: failure rate 1.00 >= 0.50 over 5 calls (window 1s)
	// diverted: true breaker: open (breaker "partner-as2")
	// open -> half-open: open window ended (window 0s)
	// half-open -> closed: 5 consecutive good probes (window 0s)
}
