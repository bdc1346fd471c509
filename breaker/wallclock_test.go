package breaker_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/breaker/breakertest"
)

// TestWallClockTimers runs the default wall clock inside a synctest bubble:
// time.AfterFunc timers leave the open state without any call, and a
// health check polled by them ends a long open window early.
func TestWallClockTimers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		checks := 0
		b, err := breaker.New(breaker.Config{
			WindowSize: 2, MinimumCalls: 2, DisableJitter: true, BaseOpenWindow: time.Minute,
			HealthCheckInterval: 5 * time.Second,
			HealthCheck: func(ctx context.Context) error {
				checks++
				if checks < 3 {
					return context.DeadlineExceeded
				}
				return nil
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Stop()
		got := make(chan breaker.Transition, 10)
		b.AddListener(func(tr breaker.Transition) { got <- tr })
		start := time.Now()
		for range 2 {
			p, err := b.Allow()
			if err != nil {
				t.Fatal(err)
			}
			p.Done(context.Canceled)
		}
		if tr := <-got; tr.To != breaker.StateOpen || tr.Window != time.Minute {
			t.Fatalf("%+v", tr)
		}
		time.Sleep(16 * time.Second) // checks at 5s, 10s fail; at 15s passes
		synctest.Wait()
		select {
		case tr := <-got:
			if tr.To != breaker.StateHalfOpen || tr.Reason != "health check passed" || tr.At.Sub(start) != 15*time.Second {
				t.Fatalf("%+v after %v", tr, tr.At.Sub(start))
			}
		default:
			t.Fatalf("still %v after %d checks", b.State(), checks)
		}
		// no call at all for 10 minutes: absence of calls is not evidence,
		// it stays half-open (no timer reopens it)
		time.Sleep(10 * time.Minute)
		synctest.Wait()
		select {
		case tr := <-got:
			t.Fatalf("idle half-open changed state: %+v", tr)
		default:
		}
		if s := b.Snapshot(); s.State != breaker.StateHalfOpen || s.ConsecutiveTrips != 1 {
			t.Fatalf("%+v, want half-open with 1 trip", s)
		}
	})
}

// TestIsWallClock: a breaker made without a Clock reports the wall clock;
// one given a clock reports that clock, which is not the wall clock.
func TestIsWallClock(t *testing.T) {
	b, err := breaker.New(breaker.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Stop()
	if !breaker.IsWallClock(b.Config().Clock) {
		t.Error("default clock: IsWallClock false")
	}
	fake, err := breaker.New(breaker.Config{Clock: breakertest.NewClock(time.Time{})})
	if err != nil {
		t.Fatal(err)
	}
	defer fake.Stop()
	if breaker.IsWallClock(fake.Config().Clock) || breaker.IsWallClock(nil) {
		t.Error("fake or nil clock: IsWallClock true")
	}
}
