package middleware_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/breaker/breakertest"
	"github.com/floodgate-go/floodgate/deliver"
	"github.com/floodgate-go/floodgate/internal/configtest"
	"github.com/floodgate-go/floodgate/internal/natstest"
	"github.com/floodgate-go/floodgate/jsq"
	"github.com/floodgate-go/floodgate/middleware"
	"github.com/floodgate-go/floodgate/retryqueue"
)

// env is one breaker, one queue on real JetStream streams, and the
// middleware over them. Events are recorded.
type env struct {
	t     *testing.T
	url   string
	js    jetstream.JetStream
	clock *breakertest.Clock
	b     *breaker.Breaker
	qcfg  retryqueue.Config
	q     *retryqueue.Queue
	mw    message.HandlerMiddleware

	mu     sync.Mutex
	events []middleware.Event
}

func newEnv(t *testing.T, bcfg breaker.Config) *env {
	t.Helper()
	e := &env{t: t, url: natstest.URL(t), clock: breakertest.NewClock(time.Time{})}
	nc := natstest.Conn(t, e.url)
	e.js = natstest.JetStream(t, nc)
	bcfg.Clock = e.clock
	b, err := breaker.New(bcfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Stop)
	e.b = b
	pub, err := jsq.NewPublisher(jsq.PublisherConfig{Conn: nc, PublishTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	e.qcfg = retryqueue.Config{
		Publisher:       pub,
		Service:         "svc",
		RetryTopic:      natstest.Name(t, "retry"),
		DeadLetterTopic: natstest.Name(t, "dead"),
		PublishTimeout:  2 * time.Second,
	}
	natstest.DeleteStreams(t, e.js, e.qcfg.RetryTopic, e.qcfg.DeadLetterTopic, "OBJ_"+e.qcfg.DeadLetterTopic+"_payloads")
	if err := retryqueue.Provision(context.Background(), e.js, e.qcfg); err != nil {
		t.Fatal(err)
	}
	if e.q, err = retryqueue.New(e.qcfg); err != nil {
		t.Fatal(err)
	}
	e.mw, err = middleware.New(middleware.Config{
		Breaker: b,
		Queue:   e.q,
		Timeout: 5 * time.Second,
		OnEvent: func(ev middleware.Event) {
			e.mu.Lock()
			e.events = append(e.events, ev)
			e.mu.Unlock()
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *env) lastEvent() middleware.Event {
	e.t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.events) == 0 {
		e.t.Fatal("no event")
	}
	return e.events[len(e.events)-1]
}

func (e *env) retry() []*message.Message { return natstest.StreamMsgs(e.t, e.js, e.qcfg.RetryTopic) }
func (e *env) dead() []*message.Message {
	return natstest.StreamMsgs(e.t, e.js, e.qcfg.DeadLetterTopic)
}

func newMsg() *message.Message {
	m := message.NewMessage(uuid.NewString(), []byte("ISA*00*...~"))
	m.Metadata.Set("x12_control_number", "000000042")
	m.Metadata.Set(retryqueue.MetaOriginalTopic, "edi_orders")
	return m
}

func ok(*message.Message) ([]*message.Message, error) { return nil, nil }

func failWith(err error) message.HandlerFunc {
	return func(*message.Message) ([]*message.Message, error) { return nil, err }
}

var errPartner503 = &deliver.Error{Kind: deliver.ErrRetryable, Op: "as2 send", StatusCode: 503}

// tripped returns an env whose breaker has tripped on retryable failures
// through the middleware itself.
func tripped(t *testing.T, cfg breaker.Config) *env {
	e := newEnv(t, cfg)
	for i := 0; i < cfg.MinimumCalls; i++ {
		if _, err := e.mw(failWith(errPartner503))(newMsg()); err != nil {
			t.Fatalf("failure %d: %v", i, err)
		}
	}
	if s := e.b.State(); s != breaker.StateOpen {
		t.Fatalf("state after %d failures = %s, want open", cfg.MinimumCalls, s)
	}
	return e
}

var smallBreaker = breaker.Config{
	WindowSize: 4, MinimumCalls: 4, FailureRateThreshold: 0.5,
	SlowCallDuration: 100 * time.Millisecond,
	BaseOpenWindow:   time.Second, MaxOpenWindow: 8 * time.Second, Jitter: 0.0001,
	ProbeConcurrency: 1, SuccessesToClose: 2,
}

func TestDeliveredIsReportedAndNothingQueued(t *testing.T) {
	e := newEnv(t, smallBreaker)
	msg := newMsg()
	if _, err := e.mw(ok)(msg); err != nil {
		t.Fatal(err)
	}
	ev := e.lastEvent()
	if ev.Action != middleware.Delivered || !ev.Admitted || ev.UUID != msg.UUID {
		t.Errorf("event = %+v, want delivered and admitted for %s", ev, msg.UUID)
	}
	if s := e.b.Snapshot(); s.Calls != 1 || s.Failures != 0 {
		t.Errorf("breaker calls/failures = %d/%d, want 1/0", s.Calls, s.Failures)
	}
	if n := len(e.retry()) + len(e.dead()); n != 0 {
		t.Errorf("%d messages queued, want 0", n)
	}
}

func TestOpenDivertsWithoutCallingHandler(t *testing.T) {
	e := newEnv(t, smallBreaker)
	e.b.ForceOpen()
	called := false
	msg := newMsg()
	_, err := e.mw(func(*message.Message) ([]*message.Message, error) { called = true; return nil, nil })(msg)
	if err != nil {
		t.Fatalf("handler error %v, want nil: the diversion is durable, so the source is acked", err)
	}
	if called {
		t.Error("handler ran while the breaker was open")
	}
	got := e.retry()
	if len(got) != 1 {
		t.Fatalf("retry stream has %d messages, want 1", len(got))
	}
	r := got[0]
	if r.UUID != msg.UUID || string(r.Payload) != string(msg.Payload) {
		t.Errorf("diverted copy %s %q, want %s %q", r.UUID, r.Payload, msg.UUID, msg.Payload)
	}
	for k, want := range map[string]string{
		retryqueue.MetaReason:        "open",
		retryqueue.MetaAttempt:       "0",
		retryqueue.MetaOriginalTopic: "edi_orders",
		"x12_control_number":         "000000042",
	} {
		if v := r.Metadata.Get(k); v != want {
			t.Errorf("metadata %s = %q, want %q", k, v, want)
		}
	}
	if ev := e.lastEvent(); ev.Action != middleware.Diverted || ev.Reason != "open" || ev.Admitted {
		t.Errorf("event = %+v, want diverted for open, not admitted", ev)
	}
}

func TestRetryableFailureIsDivertedAndCounted(t *testing.T) {
	e := newEnv(t, smallBreaker)
	msg := newMsg()
	if _, err := e.mw(failWith(errPartner503))(msg); err != nil {
		t.Fatal(err)
	}
	got := e.retry()
	if len(got) != 1 {
		t.Fatalf("retry stream has %d messages, want 1", len(got))
	}
	md := got[0].Metadata
	if md.Get(retryqueue.MetaReason) != "failure" || md.Get(retryqueue.MetaAttempt) != "1" {
		t.Errorf("reason/attempt = %q/%q, want failure/1", md.Get(retryqueue.MetaReason), md.Get(retryqueue.MetaAttempt))
	}
	if !strings.Contains(md.Get(retryqueue.MetaLastError), "503") {
		t.Errorf("last_error = %q, want the partner's 503", md.Get(retryqueue.MetaLastError))
	}
	if s := e.b.Snapshot(); s.Failures != 1 {
		t.Errorf("breaker failures = %d, want 1", s.Failures)
	}
}

func TestPermanentFailureIsDeadLetteredAndNeutral(t *testing.T) {
	e := newEnv(t, smallBreaker)
	perm := &deliver.Error{Kind: deliver.ErrPermanent, Op: "as2 mdn", Disposition: "processed/error: authentication-failed"}
	for i := 0; i < 6; i++ { // more than MinimumCalls: neutral outcomes must not trip
		if _, err := e.mw(failWith(perm))(newMsg()); err != nil {
			t.Fatal(err)
		}
	}
	dead := e.dead()
	if len(dead) != 6 || len(e.retry()) != 0 {
		t.Fatalf("dead/retry = %d/%d, want 6/0", len(dead), len(e.retry()))
	}
	if r := dead[0].Metadata.Get(retryqueue.MetaDeadReason); r != retryqueue.DeadReasonPermanent {
		t.Errorf("dead reason = %q, want %q", r, retryqueue.DeadReasonPermanent)
	}
	if le := dead[0].Metadata.Get(retryqueue.MetaLastError); !strings.Contains(le, "authentication-failed") {
		t.Errorf("last error = %q, want the MDN disposition", le)
	}
	if ev := e.lastEvent(); ev.Action != middleware.DeadLettered || ev.Reason != retryqueue.DeadReasonPermanent {
		t.Errorf("event %+v, want dead-lettered, reason %q", ev, retryqueue.DeadReasonPermanent)
	}
	s := e.b.Snapshot()
	if s.State != breaker.StateClosed || s.Failures != 0 {
		t.Errorf("breaker %s with %d failures, want closed with 0: a permanent error is neutral", s.State, s.Failures)
	}
}

func TestMalformedMetadataIsDeadLettered(t *testing.T) {
	e := newEnv(t, smallBreaker)
	msg := newMsg()
	msg.Metadata.Set(retryqueue.MetaAttempt, "abc")
	called := false
	_, err := e.mw(func(*message.Message) ([]*message.Message, error) { called = true; return nil, nil })(msg)
	if err != nil {
		t.Fatal(err)
	}
	if called {
		t.Error("handler ran on a malformed message")
	}
	dead := e.dead()
	if len(dead) != 1 || dead[0].UUID != msg.UUID {
		t.Fatalf("dead letters = %d, want the one malformed message", len(dead))
	}
	// The same reason and cause as the drainer records for a malformed
	// backlog message.
	if r := dead[0].Metadata.Get(retryqueue.MetaDeadReason); r != retryqueue.DeadReasonMalformed {
		t.Errorf("dead reason = %q, want %q", r, retryqueue.DeadReasonMalformed)
	}
	if le := dead[0].Metadata.Get(retryqueue.MetaLastError); !strings.Contains(le, retryqueue.ErrMalformed.Error()) || !strings.Contains(le, retryqueue.MetaAttempt) {
		t.Errorf("last error = %q, want it to say malformed metadata and name %s", le, retryqueue.MetaAttempt)
	}
}

func TestProbeLimitDiverts(t *testing.T) {
	e := tripped(t, smallBreaker)
	e.clock.Advance(2 * time.Second) // past the open window: half-open, 1 probe
	release := make(chan struct{})
	probing := make(chan struct{})
	done := make(chan error)
	go func() {
		_, err := e.mw(func(*message.Message) ([]*message.Message, error) {
			close(probing)
			<-release
			return nil, nil
		})(newMsg())
		done <- err
	}()
	<-probing
	if _, err := e.mw(ok)(newMsg()); err != nil {
		t.Fatal(err)
	}
	ev := e.lastEvent()
	if ev.Action != middleware.Diverted || ev.Reason != "probe-limit" {
		t.Errorf("second call while the probe is in flight: %+v, want diverted for probe-limit", ev)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if s := e.b.Snapshot(); s.ConsecutiveSuccesses != 1 || s.State != breaker.StateHalfOpen {
		t.Errorf("after one good probe: %s with %d successes, want half-open with 1", s.State, s.ConsecutiveSuccesses)
	}
}

// A probe that succeeds slowly is a failure: the breaker reopens with a
// longer window, yet the message itself was delivered.
func TestSlowProbeReopens(t *testing.T) {
	e := tripped(t, smallBreaker)
	first := e.b.Snapshot().OpenWindowStep
	e.clock.Advance(2 * time.Second)
	slow := func(*message.Message) ([]*message.Message, error) {
		e.clock.Advance(150 * time.Millisecond) // SlowCallDuration is 100ms
		return nil, nil
	}
	if _, err := e.mw(slow)(newMsg()); err != nil {
		t.Fatal(err)
	}
	if ev := e.lastEvent(); ev.Action != middleware.Delivered || !ev.Probe || ev.Latency != 150*time.Millisecond {
		t.Errorf("event = %+v, want a delivered probe of 150ms", ev)
	}
	s := e.b.Snapshot()
	if s.State != breaker.StateOpen || s.ConsecutiveTrips != 2 || s.OpenWindowStep <= first {
		t.Errorf("after a slow probe: %s, trips %d, window step %v (first %v); want open, 2 trips, a longer window",
			s.State, s.ConsecutiveTrips, s.OpenWindowStep, first)
	}
}

func TestGoodProbesClose(t *testing.T) {
	e := tripped(t, smallBreaker)
	e.clock.Advance(2 * time.Second)
	var probes int
	seen := func(m *message.Message) ([]*message.Message, error) {
		if middleware.IsProbe(m.Context()) {
			probes++
		}
		return nil, nil
	}
	for i := 0; i < smallBreaker.SuccessesToClose; i++ {
		if _, err := e.mw(seen)(newMsg()); err != nil {
			t.Fatal(err)
		}
	}
	if probes != smallBreaker.SuccessesToClose {
		t.Errorf("IsProbe true on %d of %d probes", probes, smallBreaker.SuccessesToClose)
	}
	if _, err := e.mw(seen)(newMsg()); err != nil || probes != smallBreaker.SuccessesToClose {
		t.Errorf("a call after the close: IsProbe true (%d probes), err %v", probes, err)
	}
	if middleware.IsProbe(context.Background()) || middleware.IsProbe(nil) {
		t.Error("IsProbe outside the middleware")
	}
	if s := e.b.State(); s != breaker.StateClosed {
		t.Errorf("after %d good probes: %s, want closed", smallBreaker.SuccessesToClose, s)
	}
}

// The delivery deadline cancels the handler's context; the message gets its
// own context back, so the diversion and later publishes do not run on a
// dead one.
func TestTimeoutRestoresMessageContext(t *testing.T) {
	e := newEnv(t, smallBreaker)
	mw, err := middleware.New(middleware.Config{Breaker: e.b, Queue: e.q, Timeout: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	msg := newMsg()
	_, err = mw(func(m *message.Message) ([]*message.Message, error) {
		<-m.Context().Done()
		return nil, m.Context().Err()
	})(msg)
	if err != nil {
		t.Fatal(err)
	}
	if msg.Context().Err() != nil {
		t.Errorf("message context after the middleware: %v, want the original, live one", msg.Context().Err())
	}
	got := e.retry()
	if len(got) != 1 || !strings.Contains(got[0].Metadata.Get(retryqueue.MetaLastError), "deadline") {
		t.Fatalf("want one diverted message whose last error is the deadline, got %d", len(got))
	}
}

// Regression (review): a panic was re-raised, so the router nacked and the
// message came back forever, never counted against MaxAttempts. Now it is a
// failure, diverted with its attempt counted.
func TestPanicIsDivertedAsFailure(t *testing.T) {
	e := newEnv(t, smallBreaker)
	msg := newMsg()
	if _, err := e.mw(func(*message.Message) ([]*message.Message, error) { panic("boom") })(msg); err != nil {
		t.Fatalf("handler error %v, want nil: the diversion is durable", err)
	}
	if s := e.b.Snapshot(); s.Failures != 1 {
		t.Errorf("breaker failures = %d, want 1", s.Failures)
	}
	var pe *middleware.PanicError
	if ev := e.lastEvent(); ev.Action != middleware.Diverted || !errors.As(ev.Err, &pe) || pe.Value != "boom" {
		t.Errorf("event = %+v, want diverted with the PanicError", ev)
	}
	got := e.retry()
	if len(got) != 1 || got[0].Metadata.Get(retryqueue.MetaAttempt) != "1" ||
		!strings.Contains(got[0].Metadata.Get(retryqueue.MetaLastError), "boom") {
		t.Fatalf("want one retry copy at attempt 1 whose last error names the panic, got %d", len(got))
	}
}

// Regression (review): when the failure used up the attempts, the queue
// dead-lettered the message but the middleware reported a diversion, so the
// examples counted it as lost.
func TestLastAttemptIsReportedAsDeadLetter(t *testing.T) {
	e := newEnv(t, smallBreaker)
	msg := newMsg()
	msg.Metadata.Set(retryqueue.MetaAttempt, "9") // MaxAttempts defaults to 10
	if _, err := e.mw(failWith(errPartner503))(msg); err != nil {
		t.Fatal(err)
	}
	if ev := e.lastEvent(); ev.Action != middleware.DeadLettered || ev.Reason != retryqueue.DeadReasonMaxAttempts {
		t.Errorf("event = %+v, want dead-lettered for %s", ev, retryqueue.DeadReasonMaxAttempts)
	}
	if n, m := len(e.dead()), len(e.retry()); n != 1 || m != 0 {
		t.Errorf("dead/retry = %d/%d, want 1/0", n, m)
	}
}

// When the diversion cannot be confirmed the handler returns an error, the
// router nacks and JetStream redelivers: the message is never acked without
// a durable copy. Once the retry stream exists the redelivery lands there.
func TestUnconfirmedDiversionIsRedelivered(t *testing.T) {
	e := newEnv(t, smallBreaker)
	e.b.ForceOpen()
	// Remove the retry stream so diversions fail.
	source := e.sourceWithoutRetryStream()
	sub, err := jsq.NewSubscriber(jsq.SubscriberConfig{
		URL: e.url, AckWait: 5 * time.Second,
		NakDelay: func(uint64) time.Duration { return 50 * time.Millisecond },
	})
	if err != nil {
		t.Fatal(err)
	}
	router, err := message.NewRouter(message.RouterConfig{CloseTimeout: 5 * time.Second}, watermill.NopLogger{})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	attempts := 0
	router.AddConsumerHandler("deliver", source, sub, func(msg *message.Message) error {
		mu.Lock()
		attempts++
		mu.Unlock()
		_, err := e.mw(ok)(msg)
		return err
	})
	ctx, cancel := context.WithCancel(context.Background())
	routerDone := make(chan struct{})
	go func() { _ = router.Run(ctx); close(routerDone) }()
	t.Cleanup(func() { cancel(); <-routerDone })
	<-router.Running()

	pub, err := jsq.NewPublisher(jsq.PublisherConfig{URL: e.url})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	msg := newMsg()
	delete(msg.Metadata, retryqueue.MetaOriginalTopic)
	if err := pub.Publish(source, msg); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 15*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return attempts >= 3
	}, "the nacked message is redelivered")
	if ev := e.lastEvent(); ev.Action != middleware.Nacked {
		t.Errorf("event = %+v, want nacked", ev)
	}

	// Bring the retry stream back: the next redelivery is diverted and acked.
	if err := retryqueue.Provision(context.Background(), e.js, e.qcfg); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 15*time.Second, func() bool {
		return len(natstest.StreamMsgs(t, e.js, e.qcfg.RetryTopic)) == 1
	}, "the redelivered message is diverted once the retry stream exists")
	r := e.retry()[0]
	if r.UUID != msg.UUID || r.Metadata.Get(retryqueue.MetaOriginalTopic) != source {
		t.Errorf("diverted %s from %q, want %s from %q", r.UUID, r.Metadata.Get(retryqueue.MetaOriginalTopic), msg.UUID, source)
	}
	natstest.Eventually(t, 10*time.Second, func() bool {
		c, err := e.js.Consumer(context.Background(), source, jsq.DefaultConsumerName(source))
		if err != nil {
			return false
		}
		info, err := c.Info(context.Background())
		return err == nil && info.NumPending == 0 && info.NumAckPending == 0
	}, "the source message is acked once its diversion is confirmed")
}

func TestConfigErrorsNameTheField(t *testing.T) {
	b, err := breaker.New(breaker.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Stop()
	for _, tc := range []struct {
		cfg  middleware.Config
		want string
	}{
		{middleware.Config{}, "Breaker"},
		{middleware.Config{Breaker: b}, "Queue"},
	} {
		_, err := middleware.New(tc.cfg)
		if !errors.Is(err, middleware.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%+v) = %v, want ErrInvalidConfig naming %s", tc.cfg, err, tc.want)
		}
	}
}

func TestDrainGateFollowsTheBreaker(t *testing.T) {
	cfg := smallBreaker
	cfg.ProbeConcurrency = 2
	e := tripped(t, cfg)
	gate := middleware.DrainGate(e.b)
	closed := gate.(retryqueue.ClosedGate).Closed
	if n := gate.Budget(); n != 0 || closed() {
		t.Errorf("open: budget %d, closed %v; want 0, false", n, closed())
	}
	e.clock.Advance(2 * time.Second)
	if n := gate.Budget(); n != 2 || closed() {
		t.Errorf("half-open, no probe in flight: budget %d, closed %v; want 2, false", n, closed())
	}
	p, err := e.b.Allow()
	if err != nil {
		t.Fatal(err)
	}
	if n := gate.Budget(); n != 1 {
		t.Errorf("half-open, one probe in flight: budget %d, want 1", n)
	}
	p.Done(nil)
	e.b.ForceClose()
	if n := gate.Budget(); n < 1000 || !closed() {
		t.Errorf("closed: budget %d, closed %v; want unbounded (the drainer's rate limits it), true", n, closed())
	}
}

func TestDrainGateNilBreakerPanics(t *testing.T) {
	defer func() {
		if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "nil breaker") {
			t.Errorf("recovered %v, want a panic naming the nil breaker", r)
		}
	}()
	middleware.DrainGate(nil)
}

// Regression: with a breaker on its default (wall) clock the middleware
// dereferenced a nil clock; Watermill's router recovered the panic and nacked
// every message, so nothing was ever delivered.
func TestDefaultClockBreaker(t *testing.T) {
	e := newEnv(t, smallBreaker)
	b, err := breaker.New(breaker.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Stop()
	mw, err := middleware.New(middleware.Config{Breaker: b, Queue: e.q})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mw(ok)(newMsg()); err != nil {
		t.Fatal(err)
	}
	if s := b.Snapshot(); s.Calls != 1 {
		t.Errorf("breaker saw %d calls, want 1", s.Calls)
	}
}

// Regression: a Watermill Timeout middleware outside floodgate expires the
// message's own context during the call. That is a slow partner, not a
// shutdown: it must count as a failure so a hanging partner trips the
// breaker.
func TestOuterDeadlineCountsAsFailure(t *testing.T) {
	e := newEnv(t, smallBreaker)
	msg := newMsg()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	msg.SetContext(ctx)
	if _, err := e.mw(func(m *message.Message) ([]*message.Message, error) {
		<-m.Context().Done() // a partner slower than the outer deadline
		return nil, m.Context().Err()
	})(msg); err != nil {
		t.Fatal(err)
	}
	if s := e.b.Snapshot(); s.Failures != 1 {
		t.Errorf("breaker failures = %d, want 1", s.Failures)
	}
}

// cancelDuringCall runs msg through the middleware with a handler during
// which the message's own context is cancelled with cause (nil: a plain
// cancel), as a subscriber or router does.
func cancelDuringCall(t *testing.T, e *env, cause error) {
	t.Helper()
	msg := newMsg()
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	msg.SetContext(ctx)
	if _, err := e.mw(func(m *message.Message) ([]*message.Message, error) {
		cancel(cause)
		return nil, m.Context().Err()
	})(msg); err != nil {
		t.Fatal(err)
	}
}

// A subscriber that gives up at its ack deadline during the call cancels
// the message's context with a cause saying so (jsq.ErrAckWait): a partner
// slower than AckWait, so a failure, not a shutdown.
func TestAckWaitGiveUpCountsAsFailure(t *testing.T) {
	e := newEnv(t, smallBreaker)
	cancelDuringCall(t, e, jsq.ErrAckWait)
	if s := e.b.Snapshot(); s.Failures != 1 {
		t.Errorf("breaker failures = %d, want 1", s.Failures)
	}
	if got := e.retry(); len(got) != 1 || got[0].Metadata.Get(retryqueue.MetaReason) != "failure" {
		t.Errorf("retry stream %d messages, want the one diverted for failure", len(got))
	}
}

// A call cut short by shutdown (the message's context cancelled during the
// call) is neutral in the closed state: closing the router must not trip
// the breaker. The message is still diverted, so it is not lost.
func TestShutdownCancellationIsNeutral(t *testing.T) {
	e := newEnv(t, smallBreaker)
	cancelDuringCall(t, e, nil)
	if s := e.b.Snapshot(); s.Failures != 0 || s.Calls != 0 {
		t.Errorf("breaker calls/failures = %d/%d, want 0/0", s.Calls, s.Failures)
	}
	if got := e.retry(); len(got) != 1 {
		t.Errorf("retry stream has %d messages, want the cancelled one", len(got))
	}
}

// A message whose context is already done when it reaches floodgate (the
// subscriber gave up while it waited in an outer middleware, or the router
// is closing) is nacked: no partner call, nothing counted by the breaker
// (four of them would have tripped it), nothing published that an ignored
// ack would duplicate.
func TestContextDoneBeforeAdmissionIsNacked(t *testing.T) {
	e := newEnv(t, smallBreaker)
	calls := 0
	h := e.mw(func(*message.Message) ([]*message.Message, error) { calls++; return nil, nil })
	for _, cause := range []error{jsq.ErrAckWait, jsq.ErrAckWait, nil, jsq.ErrAckWait, nil} {
		msg := newMsg()
		ctx, cancel := context.WithCancelCause(context.Background())
		cancel(cause)
		msg.SetContext(ctx)
		if _, err := h(msg); err == nil {
			t.Fatal("nil error: the router would ack a message nobody handled")
		}
		if ev := e.lastEvent(); ev.Action != middleware.Nacked || ev.Admitted || ev.Err == nil {
			t.Errorf("event %+v, want nacked, not admitted, with the cause", ev)
		}
	}
	if s := e.b.Snapshot(); calls != 0 || s.Calls != 0 || s.State != breaker.StateClosed {
		t.Errorf("partner calls %d, breaker %s with %d calls; want 0, closed, 0", calls, s.State, s.Calls)
	}
	if n := len(e.retry()) + len(e.dead()); n != 0 {
		t.Errorf("%d messages published, want 0", n)
	}
}

// Regression (fresh-user trial): Validate had a pointer receiver, unlike
// the other configs'. It takes a value (configtest.Run takes no other),
// checks the config as [middleware.New] uses it, defaults applied to its
// zero fields, and leaves it as it is.
func TestConfigValidate(t *testing.T) {
	// Validate only requires them set.
	b, q := &breaker.Breaker{}, &retryqueue.Queue{}
	configtest.Run(t, middleware.ErrInvalidConfig, []configtest.Case[middleware.Config]{
		{Name: "minimal", Cfg: middleware.Config{Breaker: b, Queue: q}},
		{Name: "Queue", Cfg: middleware.Config{Breaker: b}, Want: "Queue is required"},
		{Name: "NoTimeout", Cfg: middleware.Config{Breaker: b, Queue: q, Timeout: middleware.NoTimeout}},
		{Name: "negative Timeout", Cfg: middleware.Config{Breaker: b, Queue: q, Timeout: -time.Second}},
	}, nil)
}

// sourceWithoutRetryStream deletes the retry stream, so every diversion
// fails, and returns the name of a new source stream for a subscriber.
func (e *env) sourceWithoutRetryStream() string {
	e.t.Helper()
	if err := e.js.DeleteStream(context.Background(), e.qcfg.RetryTopic); err != nil {
		e.t.Fatal(err)
	}
	source := natstest.Name(e.t, "orders")
	natstest.DeleteStreams(e.t, e.js, source)
	if _, err := jsq.EnsureStream(context.Background(), e.js, source); err != nil {
		e.t.Fatal(err)
	}
	return source
}
