package middleware_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/deliver"
	"github.com/floodgate-go/floodgate/middleware"
)

// TestWarningIsDelivered: a handler error holding a deliver.Warning (here
// wrapped) is a success: the message is acked (the handler returns nil),
// nothing goes to the retry or dead-letter stream, the breaker counts
// successes (more warnings than MinimumCalls do not trip it), and the
// event is Delivered with the warning.
func TestWarningIsDelivered(t *testing.T) {
	e := newEnv(t, smallBreaker)
	cause := errors.New("HTTP 200 without an MDN")
	warn := fmt.Errorf("send order: %w", deliver.Warn("unconfirmed", cause))
	n := smallBreaker.MinimumCalls + 2
	for i := 0; i < n; i++ {
		if _, err := e.mw(failWith(warn))(newMsg()); err != nil {
			t.Fatalf("call %d: handler error %v, want nil: a warning is acked", i, err)
		}
	}
	if r, d := len(e.retry()), len(e.dead()); r+d != 0 {
		t.Errorf("retry/dead = %d/%d, want 0/0: a warning is never resent", r, d)
	}
	s := e.b.Snapshot()
	if s.State != breaker.StateClosed || s.Failures != 0 || s.Calls != smallBreaker.WindowSize {
		t.Errorf("breaker %s, window calls/failures %d/%d; want closed, %d/0", s.State, s.Calls, s.Failures, smallBreaker.WindowSize)
	}
	ev := e.lastEvent()
	if ev.Action != middleware.Delivered || !ev.Admitted || ev.Outcome != breaker.OutcomeSuccess || ev.Err != nil {
		t.Errorf("event %+v, want delivered, admitted, success, no Err", ev)
	}
	if ev.Warning == nil || ev.Warning.Reason != "unconfirmed" || !errors.Is(ev.Warning, cause) {
		t.Errorf("event warning = %v, want the handler's (reason unconfirmed)", ev.Warning)
	}
}
