package partner_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/breaker/breakertest"
	"github.com/floodgate-go/floodgate/partner"
)

// A handler sends each message to the partner its key names. Calls go
// through the registry; what it turns away was not attempted and is
// diverted (here: printed), and the other partners keep flowing.
func Example() {
	clk := breakertest.NewClock(time.Time{})
	reg, err := partner.New(partner.Config{
		Template: partner.PartnerConfig{
			Breaker:     breaker.Config{WindowSize: 4, MinimumCalls: 4, DisableJitter: true},
			MaxInFlight: 8,
		},
		OnTransition: func(p *partner.Partner, t breaker.Transition) {
			fmt.Printf("partner %s: %v -> %v\n", p.Token(), t.From, t.To)
		},
		Clock: clk,
	})
	if err != nil {
		panic(err)
	}
	defer reg.Close()

	send := func(key string, fail bool) {
		p, lease, err := reg.Acquire(key)
		switch {
		case errors.Is(err, partner.ErrNoKey):
			fmt.Println("dead letter: no-partner")
			return
		case err != nil: // ErrPartnerLimit, ErrBulkheadFull, breaker.ErrOpen, …
			fmt.Printf("divert to retry.%s: %v\n", partner.Token(key), err)
			return
		}
		if fail {
			lease.Done(errors.New("HTTP 503"))
		} else {
			lease.Done(nil)
			fmt.Printf("delivered to %s\n", p.Token())
		}
	}
	for range 4 {
		send("GLOBEX.EU", true)
	}
	send("GLOBEX.EU", false)
	send("ACME-RETAIL", false)
	send("", false)
	// Output:
	// partner GLOBEX=2EEU: closed -> open
	// divert to retry.GLOBEX=2EEU: breaker: open (breaker "GLOBEX=2EEU")
	// delivered to ACME-RETAIL
	// dead letter: no-partner
}
