package partner_test

import (
	"errors"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/breaker/breakertest"
	"github.com/floodgate-go/floodgate/partner"
)

var errBoom = errors.New("boom")

const idle = time.Minute

// newTest returns a registry on a fake clock with small, exact breakers
// (trip after 4 calls, 1s open window, 1 good probe closes), IdleAfter one
// minute and SweepInterval one second, after applying mod.
func newTest(t testing.TB, mod func(*partner.Config)) (*partner.Registry, *breakertest.Clock) {
	t.Helper()
	clk := breakertest.NewClock(time.Time{})
	cfg := partner.Config{
		Template: partner.PartnerConfig{
			Breaker: breaker.Config{
				Seed: 1, WindowSize: 4, MinimumCalls: 4, DisableJitter: true,
				ProbeConcurrency: 1, SuccessesToClose: 1, BaseOpenWindow: time.Second,
			},
			MaxInFlight: 4,
		},
		IdleAfter:     idle,
		SweepInterval: time.Second,
		Clock:         clk,
	}
	if mod != nil {
		mod(&cfg)
	}
	r, err := partner.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	return r, clk
}

func mustGet(t testing.TB, r *partner.Registry, key string) *partner.Partner {
	t.Helper()
	p, err := r.Get(key)
	if err != nil {
		t.Fatalf("Get(%q): %v", key, err)
	}
	return p
}

// trip opens key's breaker with failed calls.
func trip(t testing.TB, r *partner.Registry, key string) {
	t.Helper()
	for range 4 {
		_, l, err := r.Acquire(key)
		if err != nil {
			t.Fatalf("Acquire(%q): %v", key, err)
		}
		l.Done(errBoom)
	}
	if st := mustGet(t, r, key).Breaker().State(); st != breaker.StateOpen {
		t.Fatalf("%q: state %v after failures", key, st)
	}
}
