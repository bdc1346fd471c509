package middleware_test

import (
	"fmt"
	"testing"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/deliver"
	"github.com/floodgate-go/floodgate/middleware"
	"github.com/floodgate-go/floodgate/retryqueue"
)

// A retryable failure on our side after the partner answered well
// (deliver.ErrLocal, e.g. an AS2 receipt record not stored) is neutral for
// the breaker, never a trip, and the message is still diverted for
// failure, its attempt counted, so it is neither lost nor acked.
func TestLocalFailureIsNeutralAndDiverted(t *testing.T) {
	e := newEnv(t, smallBreaker)
	local := &deliver.Error{Kind: deliver.ErrRetryable, Op: "as2 send", StatusCode: 200,
		Cause: fmt.Errorf("pending receipt not stored (%w): nats: connection closed", deliver.ErrLocal)}
	for i := 0; i < 2*smallBreaker.MinimumCalls; i++ {
		msg := newMsg()
		if _, err := e.mw(failWith(local))(msg); err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if ev := e.lastEvent(); ev.Action != middleware.Diverted || ev.Outcome != breaker.OutcomeNeutral || ev.Reason != string(retryqueue.ReasonFailure) {
			t.Fatalf("event %+v; want diverted for failure, outcome neutral", ev)
		}
		if got := e.latest(msg.UUID).Metadata.Get(retryqueue.MetaAttempt); got != "1" {
			t.Fatalf("attempt %q, want 1: the partner was contacted", got)
		}
	}
	if s := e.b.Snapshot(); s.State != breaker.StateClosed || s.Failures != 0 {
		t.Fatalf("breaker %s with %d failures; want closed, none", s.State, s.Failures)
	}
}
