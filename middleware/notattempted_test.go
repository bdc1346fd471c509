package middleware_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/deliver"
	"github.com/floodgate-go/floodgate/internal/natstest"
	"github.com/floodgate-go/floodgate/middleware"
	"github.com/floodgate-go/floodgate/retryqueue"
)

// errBulkhead is a handler's local bulkhead refusing a call before the
// partner is contacted.
var errBulkhead = fmt.Errorf("bulkhead full: %w", middleware.ErrNotAttempted)

// clocked rebuilds e's queue and middleware with the queue on e's fake
// clock (so not_before and MaxAge are deterministic) and mod applied to
// its config; the streams stay.
func (e *env) clocked(mod func(*retryqueue.Config)) *env {
	e.t.Helper()
	e.qcfg.Clock = e.clock
	if mod != nil {
		mod(&e.qcfg)
	}
	var err error
	if e.q, err = retryqueue.New(e.qcfg); err != nil {
		e.t.Fatal(err)
	}
	if e.mw, err = middleware.New(middleware.Config{Breaker: e.b, Queue: e.q, Timeout: 5 * time.Second, OnEvent: e.record}); err != nil {
		e.t.Fatal(err)
	}
	return e
}

func (e *env) record(ev middleware.Event) {
	e.mu.Lock()
	e.events = append(e.events, ev)
	e.mu.Unlock()
}

// latest is the last stored copy of uuid in the retry stream.
func (e *env) latest(uuid string) *message.Message {
	e.t.Helper()
	var got *message.Message
	for _, m := range e.retry() {
		if m.UUID == uuid {
			got = m
		}
	}
	if got == nil {
		e.t.Fatalf("no copy of %s in the retry stream", uuid)
	}
	return got
}

func metaTime(t *testing.T, m *message.Message, k string) time.Time {
	t.Helper()
	v, err := time.Parse(retryqueue.TimeFormat, m.Metadata.Get(k))
	if err != nil {
		t.Fatalf("%s = %q: %v", k, m.Metadata.Get(k), err)
	}
	return v
}

// halfOpen returns an env whose breaker tripped through the middleware and
// is now half-open with its one probe slot free, and the breaker's
// snapshot then.
func halfOpen(t *testing.T) (*env, breaker.Snapshot) {
	t.Helper()
	e := tripped(t, smallBreaker)
	e.clock.Advance(2 * time.Second)
	s := e.b.Snapshot()
	if s.State != breaker.StateHalfOpen || s.ConsecutiveTrips != 1 {
		t.Fatalf("before the probe: %s with %d trips, want half-open with 1", s.State, s.ConsecutiveTrips)
	}
	return e, s
}

// wantStillHalfOpen checks that the breaker is as before (half-open, trip
// count unchanged), its probe slot is free, and the next call is a probe.
func wantStillHalfOpen(t *testing.T, e *env, before breaker.Snapshot) {
	t.Helper()
	s := e.b.Snapshot()
	if s.State != breaker.StateHalfOpen || s.ConsecutiveTrips != before.ConsecutiveTrips || s.Trips != before.Trips {
		t.Errorf("breaker %s, trips %d (total %d); want half-open, %d (total %d): nothing counted",
			s.State, s.ConsecutiveTrips, s.Trips, before.ConsecutiveTrips, before.Trips)
	}
	if s.ProbesInFlight != 0 || s.OpenWindowStep != before.OpenWindowStep {
		t.Errorf("probes in flight %d, open window step %v; want 0 (the slot freed), %v",
			s.ProbesInFlight, s.OpenWindowStep, before.OpenWindowStep)
	}
	probe := false
	if _, err := e.mw(func(m *message.Message) ([]*message.Message, error) {
		probe = middleware.IsProbe(m.Context())
		return nil, nil
	})(newMsg()); err != nil {
		t.Fatal(err)
	}
	if ev := e.lastEvent(); !probe || ev.Action != middleware.Delivered {
		t.Errorf("next call: probe %v, event %+v; want a delivered probe", probe, ev)
	}
}

// Issue 12: a probe the handler refused before contacting the partner (a
// local bulkhead) reopened the breaker with a longer window. Now its permit
// is cancelled: the breaker stays half-open, trip count unchanged, the
// slot free, and the message is diverted as not attempted.
func TestNotAttemptedProbeLeavesBreakerHalfOpen(t *testing.T) {
	e, before := halfOpen(t)
	msg := newMsg()
	var probe bool
	if _, err := e.mw(func(m *message.Message) ([]*message.Message, error) {
		probe = middleware.IsProbe(m.Context())
		return nil, errBulkhead
	})(msg); err != nil {
		t.Fatal(err)
	}
	if !probe {
		t.Fatal("the refused call was not a probe")
	}
	ev := e.lastEvent()
	if ev.Action != middleware.Diverted || ev.Reason != string(retryqueue.ReasonNotAttempted) ||
		!ev.Admitted || !ev.Probe || ev.Outcome != breaker.OutcomeNeutral || !errors.Is(ev.Err, middleware.ErrNotAttempted) {
		t.Errorf("event %+v, want an admitted probe diverted for not-attempted, outcome neutral, with the error", ev)
	}
	c := e.latest(msg.UUID)
	wantMetaValues(t, c, map[string]string{
		retryqueue.MetaReason:       string(retryqueue.ReasonNotAttempted),
		retryqueue.MetaAttempt:      "0",
		retryqueue.MetaNotAttempted: "1",
		retryqueue.MetaLastError:    "",
	})
	wantStillHalfOpen(t, e, before)
}

// Issue 12: a probe cut short by shutdown (the message's own context
// cancelled during the call) counted as a failure, so every rolling restart
// added a backoff step. Now it is neutral: the slot is freed and nothing
// counted. The message is still diverted, so it is not lost.
func TestShutdownMidProbeIsNeutral(t *testing.T) {
	e, before := halfOpen(t)
	cancelDuringCall(t, e, nil)
	if ev := e.lastEvent(); ev.Action != middleware.Diverted || !ev.Probe || ev.Outcome != breaker.OutcomeNeutral {
		t.Errorf("event %+v, want a probe diverted with outcome neutral", ev)
	}
	wantStillHalfOpen(t, e, before)
}

// Issue 12: a message refused N times by the handler is never
// dead-lettered for attempts (MaxAttempts 1 here: one failure would), its
// attempts stay 0, the breaker counts nothing, and its next eligibility
// grows with its own counter: not_before is Backoff(n) after the n-th
// refusal (1s, 2s, 4s, ...), so a bulkhead that always refuses cannot make
// it loop.
func TestNotAttemptedBacksOffOnItsOwnCounter(t *testing.T) {
	e := newEnv(t, smallBreaker).clocked(func(c *retryqueue.Config) { c.MaxAttempts = 1 })
	msg := newMsg()
	const n = 6
	for i := 1; i <= n; i++ {
		if _, err := e.mw(failWith(errBulkhead))(msg); err != nil {
			t.Fatal(err)
		}
		c := e.latest(msg.UUID)
		wantMetaValues(t, c, map[string]string{
			retryqueue.MetaAttempt:      "0",
			retryqueue.MetaNotAttempted: fmt.Sprint(i),
			retryqueue.MetaReason:       string(retryqueue.ReasonNotAttempted),
		})
		at, nb := metaTime(t, c, retryqueue.MetaDivertedAt), metaTime(t, c, retryqueue.MetaNotBefore)
		if want := retryqueue.DefaultBackoff(i); nb.Sub(at) != want {
			t.Errorf("refusal %d: not_before %v after the diversion, want %v", i, nb.Sub(at), want)
		}
		// The drain hands the copy over again once it is eligible.
		e.clock.Set(nb)
		msg = c
	}
	if d := e.dead(); len(d) != 0 {
		t.Fatalf("%d dead letters, want 0: a refusal is no attempt", len(d))
	}
	h, err := retryqueue.History(msg)
	if err != nil || len(h) == 0 {
		t.Fatalf("history %v, %v", h, err)
	}
	if last := h[len(h)-1]; last.Reason != string(retryqueue.ReasonNotAttempted) || last.Attempt != 0 || last.Error != errBulkhead.Error() {
		t.Errorf("last history entry %+v, want not-attempted at attempt 0 with the refusal", last)
	}
	if s := e.b.Snapshot(); s.State != breaker.StateClosed || s.Calls != 0 || s.Failures != 0 {
		t.Errorf("breaker %s with %d calls, %d failures; want closed, 0, 0: refusals count nothing", s.State, s.Calls, s.Failures)
	}

	// A real failure still counts: with MaxAttempts 1 it is dead-lettered.
	if _, err := e.mw(failWith(errPartner503))(msg); err != nil {
		t.Fatal(err)
	}
	if ev := e.lastEvent(); ev.Action != middleware.DeadLettered || ev.Reason != retryqueue.DeadReasonMaxAttempts {
		t.Errorf("after a failure: %+v, want dead-lettered for max-attempts", ev)
	}
}

// MaxAge still applies to a message its handler always refuses: the
// backoff is cut at the MaxAge deadline, and the refusal at the deadline
// dead-letters it for max-age, with no attempt counted.
func TestNotAttemptedMaxAge(t *testing.T) {
	e := newEnv(t, smallBreaker).clocked(func(c *retryqueue.Config) { c.MaxAge = 10 * time.Second })
	msg := newMsg()
	first := e.clock.Now()
	// Refusals at 0s, 1s, 3s, 7s: eligible again at 1s, 3s, 7s, then
	// 7s+8s cut to the deadline, 10s.
	for i, want := range []time.Duration{time.Second, 3 * time.Second, 7 * time.Second, 10 * time.Second} {
		if _, err := e.mw(failWith(errBulkhead))(msg); err != nil {
			t.Fatal(err)
		}
		if ev := e.lastEvent(); ev.Action != middleware.Diverted {
			t.Fatalf("refusal %d: %+v, want diverted", i+1, ev)
		}
		msg = e.latest(msg.UUID)
		if nb := metaTime(t, msg, retryqueue.MetaNotBefore); nb.Sub(first) != want {
			t.Errorf("refusal %d: eligible %v after the first diversion, want %v", i+1, nb.Sub(first), want)
		}
		e.clock.Set(first.Add(want))
	}
	if _, err := e.mw(failWith(errBulkhead))(msg); err != nil {
		t.Fatal(err)
	}
	if ev := e.lastEvent(); ev.Action != middleware.DeadLettered || ev.Reason != retryqueue.DeadReasonMaxAge {
		t.Fatalf("refusal at the MaxAge deadline: %+v, want dead-lettered for max-age", ev)
	}
	d := e.dead()
	if len(d) != 1 || d[0].UUID != msg.UUID {
		t.Fatalf("%d dead letters, want the refused message", len(d))
	}
	wantMetaValues(t, d[0], map[string]string{
		retryqueue.MetaDeadReason: retryqueue.DeadReasonMaxAge,
		retryqueue.MetaAttempt:    "0",
	})
}

// The refusal's Retry-After ([middleware.NotAttempted]) sets the next
// eligibility when it is longer than the backoff, capped at MaxRetryAfter;
// a shorter one leaves the backoff.
func TestNotAttemptedRetryAfter(t *testing.T) {
	e := newEnv(t, smallBreaker).clocked(func(c *retryqueue.Config) { c.MaxRetryAfter = 10 * time.Minute })
	for _, tc := range []struct {
		hint, want time.Duration
	}{
		{90 * time.Second, 90 * time.Second},
		{100 * time.Millisecond, time.Second}, // Backoff(1)
		{time.Hour, 10 * time.Minute},         // MaxRetryAfter
	} {
		msg := newMsg()
		err := middleware.NotAttempted(errors.New("rate limited"), tc.hint)
		if !errors.Is(err, middleware.ErrNotAttempted) {
			t.Fatalf("%v does not match ErrNotAttempted", err)
		}
		if _, err := e.mw(failWith(err))(msg); err != nil {
			t.Fatal(err)
		}
		c := e.latest(msg.UUID)
		wantMetaValues(t, c, map[string]string{
			retryqueue.MetaReason:       string(retryqueue.ReasonNotAttempted),
			retryqueue.MetaAttempt:      "0",
			retryqueue.MetaNotAttempted: "1",
		})
		if got := metaTime(t, c, retryqueue.MetaNotBefore).Sub(metaTime(t, c, retryqueue.MetaDivertedAt)); got != tc.want {
			t.Errorf("hint %v: eligible after %v, want %v", tc.hint, got, tc.want)
		}
		h, _ := retryqueue.History(c)
		if len(h) != 1 || h[0].RetryAfter != tc.hint {
			t.Errorf("hint %v: history %+v, want one entry with the hint", tc.hint, h)
		}
	}
}

// The middleware honours the breaker's Classifier for what the breaker
// counts, after ErrNotAttempted and IsPermanent: an error the Classifier
// calls neutral is counted by nothing (six of them do not trip the
// breaker) while its message is diverted with its attempt counted; a
// permanent error is dead-lettered and neutral whatever the Classifier
// says; and a not-attempted error is diverted as such even when
// IsPermanent would claim it.
func TestClassifierAfterNotAttemptedAndPermanent(t *testing.T) {
	errLocal := errors.New("request rejected by our own validation proxy")
	cfg := smallBreaker
	cfg.Classifier = func(err error) breaker.Outcome {
		switch {
		case err == nil:
			return breaker.OutcomeSuccess
		case errors.Is(err, errLocal):
			return breaker.OutcomeNeutral
		}
		return breaker.OutcomeFailure // permanent errors too: IsPermanent must win
	}
	e := newEnv(t, cfg)
	for range 6 {
		msg := newMsg()
		if _, err := e.mw(failWith(errLocal))(msg); err != nil {
			t.Fatal(err)
		}
		if ev := e.lastEvent(); ev.Action != middleware.Diverted || ev.Reason != "failure" || ev.Outcome != breaker.OutcomeNeutral {
			t.Fatalf("event %+v, want diverted for failure, outcome neutral", ev)
		}
		if a := e.latest(msg.UUID).Metadata.Get(retryqueue.MetaAttempt); a != "1" {
			t.Errorf("attempt %q, want 1: the partner was contacted", a)
		}
	}
	if s := e.b.Snapshot(); s.State != breaker.StateClosed || s.Calls != 0 || s.Failures != 0 {
		t.Fatalf("breaker %s with %d calls, %d failures; want closed, 0, 0 (the Classifier said neutral)", s.State, s.Calls, s.Failures)
	}

	perm := &deliver.Error{Kind: deliver.ErrPermanent, Op: "as2 mdn", Disposition: "processed/error: unexpected-processing-error"}
	for range 6 {
		if _, err := e.mw(failWith(perm))(newMsg()); err != nil {
			t.Fatal(err)
		}
	}
	if s := e.b.Snapshot(); s.State != breaker.StateClosed || s.Failures != 0 || len(e.dead()) != 6 {
		t.Fatalf("breaker %s with %d failures, %d dead letters; want closed, 0, 6: IsPermanent wins over the Classifier",
			s.State, s.Failures, len(e.dead()))
	}

	both := fmt.Errorf("%w (%w)", middleware.ErrNotAttempted, perm) // IsPermanent would say yes
	msg := newMsg()
	if _, err := e.mw(failWith(both))(msg); err != nil {
		t.Fatal(err)
	}
	if ev := e.lastEvent(); ev.Action != middleware.Diverted || ev.Reason != string(retryqueue.ReasonNotAttempted) {
		t.Errorf("event %+v, want diverted for not-attempted: it wins over IsPermanent", ev)
	}

	// The breaker's default (no Classifier) still counts a retryable error.
	e2 := newEnv(t, smallBreaker)
	if _, err := e2.mw(failWith(errLocal))(newMsg()); err != nil {
		t.Fatal(err)
	}
	if s := e2.b.Snapshot(); s.Failures != 1 {
		t.Errorf("no Classifier: %d failures, want 1", s.Failures)
	}
}

// A drained message the handler refuses is published again at the back
// of the backlog with its counter and not_before (not left in place, which
// would lose both), acked, and not handed over before not_before: with the
// queue's clock standing still, the handler runs once however often the
// drainer fetches it.
func TestDrainedNotAttemptedWaitsItsBackoff(t *testing.T) {
	e := newEnv(t, smallBreaker).clocked(nil)
	msg := newMsg()
	if err := e.q.Divert(context.Background(), msg, retryqueue.ReasonOpen, breaker.ErrOpen); err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int32
	d, err := retryqueue.NewDrainer(retryqueue.DrainerConfig{
		JetStream: e.js, Queue: e.q, PollInterval: 10 * time.Millisecond,
		Gate: middleware.DrainGate(e.b),
		Handler: e.mw(func(*message.Message) ([]*message.Message, error) {
			calls.Add(1)
			return nil, errBulkhead
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	natstest.Run(t, d.Run)

	for i := 1; i <= 2; i++ {
		natstest.Eventually(t, 10*time.Second, func() bool {
			return calls.Load() == int32(i) && d.Stats().Drained == uint64(i)
		}, "refusal %d: handled and acked (calls %v, stats %v)", i, natstest.Now(func() any { return calls.Load() }), natstest.Now(func() any { return d.Stats() }))
		// The copy comes back (a nak delay of not_before minus the queue's
		// now, in real time) and is deferred: the queue's clock has not
		// reached its not_before.
		deferred := d.Stats().Deferred
		natstest.Eventually(t, 15*time.Second, func() bool { return d.Stats().Deferred > deferred }, "refusal %d: copy deferred", i)
		if got := calls.Load(); got != int32(i) {
			t.Fatalf("handler ran %d times before not_before, want %d", got, i)
		}
		msgs := e.retry()
		if len(msgs) != 1 {
			t.Fatalf("retry stream holds %d messages, want the one copy", len(msgs))
		}
		c := msgs[0]
		wantMetaValues(t, c, map[string]string{retryqueue.MetaAttempt: "0", retryqueue.MetaNotAttempted: fmt.Sprint(i)})
		nb := metaTime(t, c, retryqueue.MetaNotBefore)
		if want := e.clock.Now().Add(retryqueue.DefaultBackoff(i)); !nb.Equal(want) {
			t.Errorf("refusal %d: not_before %v, want %v", i, nb, want)
		}
		e.clock.Set(nb) // eligible: the next fetch hands it over
	}
	if s := e.b.Snapshot(); s.Calls != 0 || s.Failures != 0 {
		t.Errorf("breaker counted %d calls, %d failures; want 0, 0", s.Calls, s.Failures)
	}
}

func wantMetaValues(t *testing.T, m *message.Message, want map[string]string) {
	t.Helper()
	for k, v := range want {
		if got := m.Metadata.Get(k); got != v {
			t.Errorf("%s: %s = %q, want %q", m.UUID, k, got, v)
		}
	}
}
