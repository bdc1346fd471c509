package middleware_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/google/uuid"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/internal/configtest"
	"github.com/floodgate-go/floodgate/internal/natstest"
	"github.com/floodgate-go/floodgate/middleware"
	"github.com/floodgate-go/floodgate/partner"
	"github.com/floodgate-go/floodgate/retryqueue"
)

// metaSecret is the value of every key of the messages below: it must
// never appear in an error or event.
const metaSecret = "s3cr3t-canary"

// withOwnMeta returns a message whose own metadata (keys not starting
// with floodgate_) is exactly size bytes, keys and values counted,
// besides the keys in extra.
func withOwnMeta(t *testing.T, size int, extra map[string]string) *message.Message {
	t.Helper()
	m := message.NewMessage(uuid.NewString(), []byte("ISA*00*...~"))
	for k, v := range extra {
		m.Metadata.Set(k, v)
	}
	n := len("x-a") + len("x-b")
	for k, v := range extra {
		if !strings.HasPrefix(k, "floodgate_") {
			n += len(k) + len(v)
		}
	}
	rest := size - n - len(metaSecret)
	if rest < 0 {
		t.Fatalf("size %d too small", size)
	}
	m.Metadata.Set("x-a", metaSecret)
	m.Metadata.Set("x-b", strings.Repeat("v", rest))
	return m
}

// guarded is a single-partner middleware over e's breaker and queue with
// cfg's MaxMetadataSize; it records events in e and counts the handler's
// calls.
func (e *env) guarded(max int, calls *atomic.Int64) message.HandlerFunc {
	e.t.Helper()
	mw, err := middleware.New(middleware.Config{Breaker: e.b, Queue: e.q, MaxMetadataSize: max,
		OnEvent: func(ev middleware.Event) {
			e.mu.Lock()
			e.events = append(e.events, ev)
			e.mu.Unlock()
		}})
	if err != nil {
		e.t.Fatal(err)
	}
	return mw(func(*message.Message) ([]*message.Message, error) { calls.Add(1); return nil, nil })
}

// TestMetadataTooLargeIsDeadLettered (issue 17): a message whose own
// metadata is one byte over MaxMetadataSize (the default, 32 KiB, and a
// configured 1 KiB) is dead-lettered "metadata-too-large" before
// admission: the handler is not called, nothing is diverted, the breaker
// is not told, and neither the event's error nor the dead letter's
// last_error quotes a metadata value. One at exactly the limit is
// delivered, also with floodgate keys besides (they do not count).
func TestMetadataTooLargeIsDeadLettered(t *testing.T) {
	for _, tc := range []struct {
		name  string
		max   int // Config.MaxMetadataSize
		limit int // in effect
	}{
		{"default", 0, middleware.DefaultMaxMetadataSize},
		{"1 KiB", 1 << 10, 1 << 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, smallBreaker)
			var calls atomic.Int64
			h := e.guarded(tc.max, &calls)

			over := withOwnMeta(t, tc.limit+1, nil)
			if _, err := h(over); err != nil {
				t.Fatal(err)
			}
			ev := e.lastEvent()
			if ev.Action != middleware.DeadLettered || ev.Reason != middleware.DeadReasonMetadataTooLarge || ev.Admitted {
				t.Errorf("over the limit: event %v %q admitted %v, want dead-lettered %q, not admitted", ev.Action, ev.Reason, ev.Admitted, middleware.DeadReasonMetadataTooLarge)
			}
			if !errors.Is(ev.Err, middleware.ErrMetadataTooLarge) {
				t.Errorf("event error %v, want ErrMetadataTooLarge", ev.Err)
			}
			want := fmt.Sprintf("%d bytes in 2 keys, limit %d", tc.limit+1, tc.limit)
			if ev.Err == nil || !strings.Contains(ev.Err.Error(), want) || strings.Contains(ev.Err.Error(), metaSecret) {
				t.Errorf("event error %v, want the size and limit (%q) and no value", ev.Err, want)
			}
			if n := calls.Load(); n != 0 {
				t.Errorf("handler called %d times, want 0", n)
			}
			if s := e.b.Snapshot(); s.Calls != 0 {
				t.Errorf("breaker counted %d calls, want 0", s.Calls)
			}
			if n := len(e.retry()); n != 0 {
				t.Errorf("%d messages diverted, want 0", n)
			}
			dead := e.dead()
			if len(dead) != 1 {
				t.Fatalf("%d dead letters, want 1", len(dead))
			}
			if r := dead[0].Metadata.Get(retryqueue.MetaDeadReason); r != middleware.DeadReasonMetadataTooLarge {
				t.Errorf("dead reason %q, want %q", r, middleware.DeadReasonMetadataTooLarge)
			}
			if le := dead[0].Metadata.Get(retryqueue.MetaLastError); !strings.Contains(le, want) || strings.Contains(le, metaSecret) {
				t.Errorf("dead letter's last_error %q, want the size and limit and no value", le)
			}

			for _, m := range []*message.Message{
				withOwnMeta(t, tc.limit, nil),
				withOwnMeta(t, tc.limit, map[string]string{retryqueue.MetaOriginalTopic: "edi_orders", "to": "ACME"}),
			} {
				if _, err := h(m); err != nil {
					t.Fatal(err)
				}
				if ev := e.lastEvent(); ev.UUID != m.UUID || ev.Action != middleware.Delivered {
					t.Errorf("at the limit (%d keys): event %v %q, want delivered", len(m.Metadata), ev.Action, ev.Reason)
				}
			}
			if n := calls.Load(); n != 2 {
				t.Errorf("handler called %d times, want 2", n)
			}
			if n := len(e.dead()); n != 1 {
				t.Errorf("%d dead letters, want 1", n)
			}
		})
	}
}

// TestHugeMetadataIsKeptAside: a message with 128 KiB of metadata (from a
// transport other than JetStream, which stores at most 64 KiB of headers)
// is dead-lettered too, its metadata kept in the payload bucket with its
// payload, instead of nacked for ever: the queue took JetStream's header
// refusal for an error to retry (a regression of the queue's).
func TestHugeMetadataIsKeptAside(t *testing.T) {
	e := newEnv(t, smallBreaker)
	var calls atomic.Int64
	h := e.guarded(0, &calls)
	m := withOwnMeta(t, 128<<10, nil)
	if _, err := h(m); err != nil {
		t.Fatalf("not dead-lettered: %v", err)
	}
	if ev := e.lastEvent(); ev.Action != middleware.DeadLettered || ev.Reason != middleware.DeadReasonMetadataTooLarge || calls.Load() != 0 {
		t.Errorf("event %v %q, %d calls; want dead-lettered %q, no call", ev.Action, ev.Reason, calls.Load(), middleware.DeadReasonMetadataTooLarge)
	}
	dead := e.dead()
	if len(dead) != 1 {
		t.Fatalf("%d dead letters, want 1", len(dead))
	}
	if r, want := dead[0].Metadata.Get(retryqueue.MetaDeadReason), retryqueue.DeadReasonTooLarge+": "+middleware.DeadReasonMetadataTooLarge; r != want {
		t.Errorf("dead reason %q, want %q", r, want)
	}
	got, err := e.q.Restore(context.Background(), dead[0])
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range m.Metadata {
		if got.Metadata.Get(k) != v {
			t.Errorf("restored metadata %s differs", k)
		}
	}
}

// TestMetadataLimitOff: with MaxMetadataSize -1 a message with metadata
// far over the default limit is delivered.
func TestMetadataLimitOff(t *testing.T) {
	e := newEnv(t, smallBreaker)
	var calls atomic.Int64
	h := e.guarded(middleware.NoMaxMetadataSize, &calls)
	m := withOwnMeta(t, 4*middleware.DefaultMaxMetadataSize, nil)
	if _, err := h(m); err != nil {
		t.Fatal(err)
	}
	if ev := e.lastEvent(); ev.Action != middleware.Delivered || calls.Load() != 1 {
		t.Errorf("event %v %q, %d calls; want delivered once", ev.Action, ev.Reason, calls.Load())
	}
}

// TestPartnerMetadataTooLarge: in per-partner mode a message over the
// limit is dead-lettered on its partner's route, its partner's breaker
// not asked, and the partner's next message at the limit delivered.
func TestPartnerMetadataTooLarge(t *testing.T) {
	const limit = 2 << 10
	e := newPartnerEnv(t, partner.Config{}, func(c *middleware.Config) { c.MaxMetadataSize = limit })
	var calls atomic.Int64
	h := e.mw(func(*message.Message) ([]*message.Message, error) { calls.Add(1); return nil, nil })

	over := withOwnMeta(t, limit+1, map[string]string{toKey: "ACME"})
	if _, err := h(over); err != nil {
		t.Fatal(err)
	}
	if ev := e.last(over.UUID); ev.Action != middleware.DeadLettered || ev.Reason != middleware.DeadReasonMetadataTooLarge || ev.Partner != partner.Token("ACME") {
		t.Errorf("over the limit: event %v %q partner %q, want dead-lettered %q for ACME", ev.Action, ev.Reason, ev.Partner, middleware.DeadReasonMetadataTooLarge)
	}
	if n := calls.Load(); n != 0 {
		t.Errorf("handler called %d times, want 0", n)
	}
	if p, ok := e.reg.Lookup("ACME"); ok && p.Breaker().Snapshot().Calls != 0 {
		t.Errorf("ACME's breaker counted %d calls, want 0", p.Breaker().Snapshot().Calls)
	}
	dead := e.subjects(e.qcfg.DeadLetterTopic)
	if want := e.qcfg.DeadLetterTopic + ".svc." + partner.Token("ACME"); len(dead) != 1 || dead[want] != 1 {
		t.Errorf("dead letters by subject %v, want one on %s", dead, want)
	}
	if n := len(e.subjects(e.qcfg.RetryTopic)); n != 0 {
		t.Errorf("%d retry subjects, want 0", n)
	}

	at := withOwnMeta(t, limit, map[string]string{toKey: "ACME"})
	if _, err := h(at); err != nil {
		t.Fatal(err)
	}
	if ev := e.last(at.UUID); ev.Action != middleware.Delivered || calls.Load() != 1 {
		t.Errorf("at the limit: event %v %q, %d calls; want delivered once", ev.Action, ev.Reason, calls.Load())
	}
	if s := e.breakerOf("ACME").Snapshot(); s.Calls != 1 || s.State != breaker.StateClosed {
		t.Errorf("ACME's breaker %v with %d calls, want closed with 1", s.State, s.Calls)
	}
}

// TestMaxMetadataSizeValidate: MaxMetadataSize is -1, 0 (the default) or
// 1 KiB..16 MiB; any other value is refused by Validate and New, naming
// the field and the range.
func TestMaxMetadataSizeValidate(t *testing.T) {
	b, q := &breaker.Breaker{}, &retryqueue.Queue{}
	cfg := func(n int) middleware.Config { return middleware.Config{Breaker: b, Queue: q, MaxMetadataSize: n} }
	const want = "MaxMetadataSize is %d, want -1 (no limit) or 1024..16777216 bytes (1 KiB..16 MiB)"
	cases := []configtest.Case[middleware.Config]{
		{Name: "default", Cfg: cfg(0)},
		{Name: "off", Cfg: cfg(-1)},
		{Name: "min", Cfg: cfg(1 << 10)},
		{Name: "max", Cfg: cfg(16 << 20)},
	}
	for _, n := range []int{-2, 1, 1023, 16<<20 + 1} {
		cases = append(cases, configtest.Case[middleware.Config]{Name: fmt.Sprint(n), Cfg: cfg(n), Want: fmt.Sprintf(want, n)})
	}
	configtest.Run(t, middleware.ErrInvalidConfig, cases, &configtest.Options[middleware.Config]{
		Snapshot: func(c middleware.Config) any {
			c.PartnerKey, c.IsPermanent, c.OnEvent = nil, nil, nil
			return c
		},
		New: func(c middleware.Config) error { _, err := middleware.New(c); return err },
	})
}

// TestDrainedMetadataTooLarge: a drained message over the limit (lowered
// since its diversion) is dead-lettered too, its handler not called.
func TestDrainedMetadataTooLarge(t *testing.T) {
	e := newEnv(t, smallBreaker)
	m := withOwnMeta(t, 2<<10, nil)
	if err := e.q.Divert(context.Background(), m, retryqueue.ReasonOpen, breaker.ErrOpen); err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int64
	d, err := retryqueue.NewDrainer(retryqueue.DrainerConfig{
		JetStream: e.js, Queue: e.q, PollInterval: 50 * time.Millisecond, Rate: 200,
		Gate:    retryqueue.GateFunc(func() int { return 1 }),
		Handler: e.guarded(1<<10, &calls),
	})
	if err != nil {
		t.Fatal(err)
	}
	natstest.Run(t, d.Run)
	natstest.Eventually(t, 30*time.Second, func() bool { return len(e.dead()) > 0 }, "the drained message was not dead-lettered")
	dead := e.dead()
	if r := dead[0].Metadata.Get(retryqueue.MetaDeadReason); len(dead) != 1 || r != middleware.DeadReasonMetadataTooLarge {
		t.Errorf("%d dead letters, reason %q; want 1, %q", len(dead), r, middleware.DeadReasonMetadataTooLarge)
	}
	if n := calls.Load(); n != 0 {
		t.Errorf("handler called %d times, want 0", n)
	}
}
