package retryqueue_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/floodgate-go/floodgate/deliver/webhook"
	"github.com/floodgate-go/floodgate/internal/natstest"
	"github.com/floodgate-go/floodgate/jsq"
	"github.com/floodgate-go/floodgate/retryqueue"
)

var errOpen = errors.New("breaker: open")

func ts(t time.Time) string { return t.UTC().Format(retryqueue.TimeFormat) }

func TestDivertKeepsMessageAndAddsMetadata(t *testing.T) {
	clock := newFakeClock()
	e := newEnv(t, natstest.URL(t), func(c *retryqueue.Config) { c.Clock = clock })
	msg := message.NewMessage("uuid-1", []byte("ISA*00*...~"))
	msg.Metadata.Set("partner", "acme")
	msg.Metadata.Set("Nats-Rollup", "sub") // reserved: must not reach the retry stream

	// A cancelled handler context must not stop the diversion.
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	if err := e.q.Divert(cancelled, msg, retryqueue.ReasonOpen, errOpen); err != nil {
		t.Fatal(err)
	}
	got := streamMsgs(t, e.js, e.q.RetryTopic())
	if len(got) != 1 {
		t.Fatalf("retry stream has %d messages, want 1", len(got))
	}
	m := got[0]
	if m.UUID != "uuid-1" || string(m.Payload) != "ISA*00*...~" {
		t.Fatalf("diverted %q %q, want uuid-1 and the payload", m.UUID, m.Payload)
	}
	now := ts(clock.Now())
	wantMeta(t, m, map[string]string{
		"partner":                      "acme",
		"Nats-Rollup":                  "<absent>",
		retryqueue.MetaAttempt:         "0",
		retryqueue.MetaReason:          "open",
		retryqueue.MetaFirstDivertedAt: now,
		retryqueue.MetaDivertedAt:      now,
		retryqueue.MetaDiversions:      "1",
		retryqueue.MetaLastError:       "<absent>",
		retryqueue.MetaNotBefore:       "<absent>",
		retryqueue.MetaDeadReason:      "<absent>",
		retryqueue.MetaOriginalTopic:   "<absent>", // not consumed through a router here
	})
	if s := e.q.Stats(); s.Diverted != 1 || s.DeadLettered != 0 || s.PublishErrors != 0 {
		t.Fatalf("stats = %+v", s)
	}
}

// The attempt counts failed deliveries only: a rejection by the breaker was
// not an attempt. Each step reads the message back from the stream, as the
// drainer would.
func TestAttemptIncrementsOnlyOnFailure(t *testing.T) {
	clock := newFakeClock()
	e := newEnv(t, natstest.URL(t), func(c *retryqueue.Config) { c.Clock = clock })
	first := clock.Now()
	steps := []struct {
		reason    retryqueue.Reason
		cause     error
		attempt   string
		lastErr   string
		notBefore string
	}{
		{retryqueue.ReasonOpen, errOpen, "0", "<absent>", "<absent>"},
		{retryqueue.ReasonFailure, errors.New("HTTP 503"), "1", "HTTP 503", ts(first.Add(10*time.Second + time.Second))},
		{retryqueue.ReasonProbeLimit, errors.New("breaker: probe limit"), "1", "HTTP 503", ts(first.Add(10*time.Second + time.Second))},
		{retryqueue.ReasonFailure, errors.New("timeout"), "2", "timeout", ts(first.Add(30*time.Second + 2*time.Second))},
		{retryqueue.ReasonRamp, nil, "2", "timeout", ts(first.Add(30*time.Second + 2*time.Second))},
	}
	msg := message.NewMessage("uuid-2", []byte("p"))
	msg.Metadata.Set(retryqueue.MetaOriginalTopic, "orders")
	for i, s := range steps {
		if err := e.q.Divert(context.Background(), msg, s.reason, s.cause); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		msg = last(t, e.js, e.q.RetryTopic())
		wantMeta(t, msg, map[string]string{
			retryqueue.MetaAttempt:         s.attempt,
			retryqueue.MetaReason:          string(s.reason),
			retryqueue.MetaLastError:       s.lastErr,
			retryqueue.MetaNotBefore:       s.notBefore,
			retryqueue.MetaFirstDivertedAt: ts(first),
			retryqueue.MetaDivertedAt:      ts(clock.Now()),
			retryqueue.MetaOriginalTopic:   "orders",
		})
		if got := msg.Metadata.Get(retryqueue.MetaDiversions); got != string(rune('1'+i)) {
			t.Errorf("step %d: diversions = %q, want %d", i, got, i+1)
		}
		if t.Failed() {
			t.Fatalf("step %d (%s) failed", i, s.reason)
		}
		clock.Advance(10 * time.Second)
	}
}

func TestDeadLetterAfterMaxAttempts(t *testing.T) {
	e := newEnv(t, natstest.URL(t), func(c *retryqueue.Config) { c.MaxAttempts = 3 })
	msg := message.NewMessage("uuid-3", []byte("p"))
	for i := 1; i <= 3; i++ {
		if err := e.q.Divert(context.Background(), msg, retryqueue.ReasonFailure, errors.New("HTTP 500")); err != nil {
			t.Fatal(err)
		}
		if i < 3 {
			msg = last(t, e.js, e.q.RetryTopic())
		}
	}
	if n := streamCount(t, e.js, e.q.RetryTopic()); n != 2 {
		t.Fatalf("retry stream has %d messages, want 2 (third failure dead-lettered)", n)
	}
	dead := streamMsgs(t, e.js, e.q.DeadLetterTopic())
	if len(dead) != 1 {
		t.Fatalf("dead-letter stream has %d messages, want 1", len(dead))
	}
	wantMeta(t, dead[0], map[string]string{
		retryqueue.MetaDeadReason: retryqueue.DeadReasonMaxAttempts,
		retryqueue.MetaAttempt:    "3",
		retryqueue.MetaLastError:  "HTTP 500",
		retryqueue.MetaReason:     "failure",
	})
	if dead[0].UUID != "uuid-3" {
		t.Fatalf("dead letter UUID %q", dead[0].UUID)
	}
	if s := e.q.Stats(); s.Diverted != 2 || s.DeadLettered != 1 {
		t.Fatalf("stats = %+v, want 2 diverted, 1 dead-lettered", s)
	}
}

func TestDeadLetterAfterMaxAge(t *testing.T) {
	clock := newFakeClock()
	e := newEnv(t, natstest.URL(t), func(c *retryqueue.Config) { c.Clock = clock; c.MaxAge = time.Hour })
	msg := message.NewMessage("uuid-4", []byte("p"))
	if err := e.q.Divert(context.Background(), msg, retryqueue.ReasonOpen, errOpen); err != nil {
		t.Fatal(err)
	}
	msg = last(t, e.js, e.q.RetryTopic())
	clock.Advance(time.Hour)
	if err := e.q.Divert(context.Background(), msg, retryqueue.ReasonOpen, errOpen); err != nil {
		t.Fatal(err)
	}
	dead := streamMsgs(t, e.js, e.q.DeadLetterTopic())
	if len(dead) != 1 || dead[0].Metadata.Get(retryqueue.MetaDeadReason) != retryqueue.DeadReasonMaxAge {
		t.Fatalf("dead letters = %v, want one with reason max-age", dead)
	}
	if dead[0].Metadata.Get(retryqueue.MetaLastError) != "" {
		t.Fatalf("last_error %q: a breaker rejection is not a delivery error", dead[0].Metadata.Get(retryqueue.MetaLastError))
	}
}

func TestDeadLetterPermanentDropsUnsendableKeys(t *testing.T) {
	clock := newFakeClock()
	e := newEnv(t, natstest.URL(t), func(c *retryqueue.Config) { c.Clock = clock })
	msg := message.NewMessage("uuid-5", []byte("p"))
	msg.Metadata.Set("ok", "1")
	msg.Metadata.Set("bad key", "x")
	if err := e.q.DeadLetter(context.Background(), msg, retryqueue.DeadReasonPermanent, errors.New("HTTP 400: unknown partner")); err != nil {
		t.Fatal(err)
	}
	d := last(t, e.js, e.q.DeadLetterTopic())
	wantMeta(t, d, map[string]string{
		"ok":                       "1",
		retryqueue.MetaDeadReason:  "permanent",
		retryqueue.MetaDeadAt:      ts(clock.Now()),
		retryqueue.MetaLastError:   "HTTP 400: unknown partner",
		retryqueue.MetaDroppedKeys: `"bad key"`,
	})
}

func TestLastErrorIsBounded(t *testing.T) {
	e := newEnv(t, natstest.URL(t), func(c *retryqueue.Config) { c.MaxErrorLen = 16 })
	msg := message.NewMessage("uuid-6", nil)
	if err := e.q.Divert(context.Background(), msg, retryqueue.ReasonFailure, errors.New(strings.Repeat("é", 40))); err != nil {
		t.Fatal(err)
	}
	got := last(t, e.js, e.q.RetryTopic()).Metadata.Get(retryqueue.MetaLastError)
	if len(got) > 16 || !strings.HasSuffix(got, "...") || !strings.HasPrefix(got, "ééé") {
		t.Fatalf("last_error %q (%d bytes), want <= 16 bytes ending in ...", got, len(got))
	}
}

func TestMalformed(t *testing.T) {
	q, err := retryqueue.New(retryqueue.Config{Publisher: nopPublisher{}, JetStream: nopJetStream{}, Service: "svc"})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		key, value string
		bad        bool
	}{
		{retryqueue.MetaAttempt, "3", false},
		{retryqueue.MetaAttempt, "abc", true},
		{retryqueue.MetaAttempt, "-1", true},
		{retryqueue.MetaDiversions, "x", true},
		{retryqueue.MetaReason, "open", false},
		{retryqueue.MetaReason, "because", true},
		{retryqueue.MetaNotBefore, "2025-03-01T12:00:00Z", false},
		{retryqueue.MetaNotBefore, "tomorrow", true},
		{retryqueue.MetaFirstDivertedAt, "1700000000", true},
		{retryqueue.MetaMalformed, "multiple values in NATS header", true},
		{"a/b", "v", true},
		{"plain", "v", false},
	}
	for _, c := range cases {
		m := message.NewMessage("u", nil)
		m.Metadata.Set(c.key, c.value)
		why, bad := q.Malformed(m)
		if bad != c.bad || (bad && !strings.Contains(why, c.key)) {
			t.Errorf("Malformed(%s=%q) = %q, %v; want bad=%v naming the key", c.key, c.value, why, bad, c.bad)
		}
	}
}

// A message with malformed floodgate metadata is dead-lettered by Divert,
// never diverted again, so it cannot loop.
func TestDivertDeadLettersMalformed(t *testing.T) {
	e := newEnv(t, natstest.URL(t), nil)
	msg := message.NewMessage("uuid-7", []byte("p"))
	msg.Metadata.Set(retryqueue.MetaAttempt, "abc")
	if err := e.q.Divert(context.Background(), msg, retryqueue.ReasonFailure, errors.New("HTTP 503")); err != nil {
		t.Fatal(err)
	}
	if n := streamCount(t, e.js, e.q.RetryTopic()); n != 0 {
		t.Fatalf("retry stream has %d messages, want 0", n)
	}
	d := last(t, e.js, e.q.DeadLetterTopic())
	if d.Metadata.Get(retryqueue.MetaDeadReason) != retryqueue.DeadReasonMalformed ||
		!strings.Contains(d.Metadata.Get(retryqueue.MetaLastError), `"abc"`) ||
		d.Metadata.Get(retryqueue.MetaAttempt) != "abc" {
		t.Fatalf("dead letter metadata %v", d.Metadata)
	}
}

// hourPublisher is a publisher whose own timeout is an hour: a queue that
// did not bound a publish by its PublishTimeout would hang on it, which
// natstest.Finishes catches.
func hourPublisher(t *testing.T, url string) *jsq.Publisher {
	t.Helper()
	pub, err := jsq.NewPublisher(jsq.PublisherConfig{URL: url, PublishTimeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pub.Close() })
	return pub
}

func TestDivertWithoutRetryStreamFails(t *testing.T) {
	e := newEnv(t, natstest.URL(t), nil)
	q, err := retryqueue.New(retryqueue.Config{Publisher: hourPublisher(t, e.url), Service: "svc", RetryTopic: natstest.Name(t, "unprovisioned"), PublishTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	natstest.Finishes(t, time.Minute, func() {
		err = q.Divert(context.Background(), message.NewMessage("u", nil), retryqueue.ReasonOpen, errOpen)
	}, "Divert to a missing stream: PublishTimeout (1s) not applied")
	if !errors.Is(err, retryqueue.ErrPublish) {
		t.Fatalf("err = %v, want ErrPublish", err)
	}
	if s := q.Stats(); s.PublishErrors != 1 || s.Diverted != 0 {
		t.Fatalf("stats = %+v", s)
	}
}

func TestDivertWithServerDownFails(t *testing.T) {
	srv := natstest.Server(t)
	e := newEnv(t, srv.ClientURL(), func(c *retryqueue.Config) { c.PublishTimeout = 300 * time.Millisecond })
	q, err := retryqueue.New(retryqueue.Config{Publisher: hourPublisher(t, srv.ClientURL()), Service: "svc", RetryTopic: e.cfg.RetryTopic,
		DeadLetterTopic: e.cfg.DeadLetterTopic, PublishTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	e.q = q
	srv.Stop()
	natstest.Finishes(t, time.Minute, func() {
		err = e.q.Divert(context.Background(), message.NewMessage("u", nil), retryqueue.ReasonOpen, errOpen)
	}, "Divert with the server down: PublishTimeout (300ms) not applied")
	if !errors.Is(err, retryqueue.ErrPublish) {
		t.Fatalf("err = %v, want ErrPublish", err)
	}
	err = e.q.DeadLetter(context.Background(), message.NewMessage("u", nil), "permanent", nil)
	if !errors.Is(err, retryqueue.ErrPublish) {
		t.Fatalf("DeadLetter err = %v, want ErrPublish", err)
	}
}

// plainPublisher hides PublishContext, so the queue uses Publish bounded by
// its own timeout.
type plainPublisher struct{ message.Publisher }

type nopPublisher struct{}

func (nopPublisher) Publish(string, ...*message.Message) error { return nil }
func (nopPublisher) Close() error                              { return nil }

func TestInvalidReason(t *testing.T) {
	q, _ := retryqueue.New(retryqueue.Config{Publisher: nopPublisher{}, JetStream: nopJetStream{}, Service: "svc"})
	if err := q.Divert(context.Background(), message.NewMessage("u", nil), "later", nil); !errors.Is(err, retryqueue.ErrInvalidReason) {
		t.Fatalf("err = %v, want ErrInvalidReason", err)
	}
}

func TestConfigValidation(t *testing.T) {
	cases := []struct {
		name  string
		cfg   retryqueue.Config
		field string
	}{
		{"no publisher", retryqueue.Config{}, "Publisher"},
		{"negative timeout", retryqueue.Config{Publisher: nopPublisher{}, JetStream: nopJetStream{}, Service: "svc", PublishTimeout: -1}, "PublishTimeout"},
		{"attempts", retryqueue.Config{Publisher: nopPublisher{}, JetStream: nopJetStream{}, Service: "svc", MaxAttempts: -2}, "MaxAttempts"},
		{"age", retryqueue.Config{Publisher: nopPublisher{}, JetStream: nopJetStream{}, Service: "svc", MaxAge: -time.Hour}, "MaxAge"},
		{"error len", retryqueue.Config{Publisher: nopPublisher{}, JetStream: nopJetStream{}, Service: "svc", MaxErrorLen: 8}, "MaxErrorLen"},
		{"history", retryqueue.Config{Publisher: nopPublisher{}, JetStream: nopJetStream{}, Service: "svc", MaxHistory: 101}, "MaxHistory"},
		{"retry after", retryqueue.Config{Publisher: nopPublisher{}, JetStream: nopJetStream{}, Service: "svc", MaxRetryAfter: -time.Second}, "MaxRetryAfter"},
		{"same topics", retryqueue.Config{Publisher: nopPublisher{}, JetStream: nopJetStream{}, Service: "svc", RetryTopic: "x", DeadLetterTopic: "x"}, "DeadLetterTopic"},
		{"dotted topic", retryqueue.Config{Publisher: nopPublisher{}, JetStream: nopJetStream{}, Service: "svc", RetryTopic: "retry.queue"}, "RetryTopic"},
		{"bucket", retryqueue.Config{Publisher: nopPublisher{}, JetStream: nopJetStream{}, Service: "svc", PayloadBucket: "dead@payloads"}, "PayloadBucket"},
	}
	for _, c := range cases {
		_, err := retryqueue.New(c.cfg)
		if !errors.Is(err, retryqueue.ErrInvalidConfig) || !strings.Contains(err.Error(), c.field) || !strings.HasPrefix(err.Error(), "invalid config: ") {
			t.Errorf("%s: err = %v, want invalid config naming %s", c.name, err, c.field)
		}
	}
}

func TestDefaultBackoff(t *testing.T) {
	want := map[int]time.Duration{
		-1: 0, 0: 0, 1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second,
		9: 256 * time.Second, 10: 5 * time.Minute, 100: 5 * time.Minute, 1 << 30: 5 * time.Minute,
	}
	for attempt, d := range want {
		if got := retryqueue.DefaultBackoff(attempt); got != d {
			t.Errorf("DefaultBackoff(%d) = %s, want %s", attempt, got, d)
		}
	}
}

// Regression (review): a copy that grew past the server's max_payload (a
// near-limit payload plus floodgate's history and error texts) failed to
// publish forever, so the source was nacked in a loop. The queue now drops
// the history and cuts the texts, and the copy fits.
func TestDivertCompactsCopyPastMaxPayload(t *testing.T) {
	e := newEnv(t, natstest.URL(t), func(c *retryqueue.Config) { c.MaxErrorLen = 4000; c.PublishTimeout = 30 * time.Second }) // ~1 MB publishes on a loaded machine
	max := int(e.nc.MaxPayload())
	msg := message.NewMessage("uuid-big", make([]byte, max-6000))
	msg.Metadata.Set(retryqueue.MetaOriginalTopic, "orders")
	long := errors.New(strings.Repeat("partner said no. ", 230)) // ~3.9 KB, kept in last_error and history
	for i := 0; i < 3; i++ {
		if err := e.q.Divert(context.Background(), msg, retryqueue.ReasonFailure, long); err != nil {
			t.Fatalf("divert %d: %v", i, err)
		}
		msg = last(t, e.js, e.q.RetryTopic())
	}
	if got := msg.Metadata.Get(retryqueue.MetaAttempt); got != "3" {
		t.Errorf("attempt = %q, want 3", got)
	}
	if msg.Metadata.Get(retryqueue.MetaHistoryDropped) == "" || len(msg.Metadata.Get(retryqueue.MetaLastError)) > 64 {
		t.Errorf("history_dropped %q, last_error %d bytes: want the copy compacted",
			msg.Metadata.Get(retryqueue.MetaHistoryDropped), len(msg.Metadata.Get(retryqueue.MetaLastError)))
	}
}

// Regression (review): a far-future not_before parked a message forever, a
// future first_diverted_at kept MaxAge from applying, and attempt =
// MaxInt64 wrapped around on increment. All are malformed now.
func TestMalformedBoundsTimesAndCounts(t *testing.T) {
	clock := newFakeClock()
	e := newEnv(t, natstest.URL(t), func(c *retryqueue.Config) { c.Clock = clock })
	now := clock.Now()
	for _, tc := range []struct {
		key, value string
		bad        bool
	}{
		{retryqueue.MetaNotBefore, ts(now.Add(time.Minute)), false},
		{retryqueue.MetaNotBefore, ts(now.Add(24 * 365 * time.Hour)), true},
		{retryqueue.MetaFirstDivertedAt, ts(now.Add(-time.Hour)), false},
		{retryqueue.MetaFirstDivertedAt, ts(now.Add(48 * time.Hour)), true},
		{retryqueue.MetaAttempt, "9223372036854775807", true},
		{retryqueue.MetaDiversions, "12", false},
	} {
		m := message.NewMessage("u", []byte("p"))
		m.Metadata.Set(tc.key, tc.value)
		why, bad := e.q.Malformed(m)
		if bad != tc.bad {
			t.Errorf("%s=%s: malformed %v (%q), want %v", tc.key, tc.value, bad, why, tc.bad)
		}
		if bad && !strings.Contains(why, tc.key) {
			t.Errorf("%s=%s: reason %q does not name the key", tc.key, tc.value, why)
		}
	}
}

// Regression (review): Provision accepted an existing retry stream with
// limits retention, which kept acked messages, or a MaxAge that silently
// dropped the backlog.
func TestProvisionRefusesLossyStreams(t *testing.T) {
	url := natstest.URL(t)
	js := natstest.JetStream(t, natstest.Conn(t, url))
	for _, mod := range []func(*jetstream.StreamConfig){
		func(c *jetstream.StreamConfig) { c.Retention = jetstream.LimitsPolicy },
		func(c *jetstream.StreamConfig) { c.MaxAge = time.Second },
	} {
		cfg := retryqueue.Config{RetryTopic: natstest.Name(t, "retry"), DeadLetterTopic: natstest.Name(t, "dead")}
		natstest.DeleteStreams(t, js, cfg.RetryTopic, cfg.DeadLetterTopic)
		sc := retryqueue.RetryStreamConfig(cfg.RetryTopic)
		mod(&sc)
		if _, err := js.CreateStream(context.Background(), sc); err != nil {
			t.Fatal(err)
		}
		err := retryqueue.Provision(context.Background(), js, cfg)
		if !errors.Is(err, retryqueue.ErrStreamConfig) || !strings.Contains(err.Error(), cfg.RetryTopic) {
			t.Errorf("Provision over %+v: %v, want ErrStreamConfig naming the stream", sc, err)
		}
	}
}

// Regression (review): ExponentialBackoff(1s, MaxInt64)(40) overflowed to a
// negative delay.
func TestExponentialBackoffNeverOverflows(t *testing.T) {
	b := retryqueue.ExponentialBackoff(time.Second, time.Duration(math.MaxInt64))
	prev := time.Duration(0)
	for a := 1; a <= 80; a++ {
		d := b(a)
		if d < prev {
			t.Fatalf("attempt %d: %v < attempt %d's %v", a, d, a-1, prev)
		}
		prev = d
	}
}

// retryAfterErr is a delivery error carrying a partner's Retry-After hint.
type retryAfterErr time.Duration

func (e retryAfterErr) Error() string {
	return fmt.Sprintf("HTTP 429 (retry after %s)", time.Duration(e))
}
func (e retryAfterErr) RetryAfterDelay() time.Duration { return time.Duration(e) }

// Regression (fresh-user trial): the partner's Retry-After was parsed but
// never used, so a 429 "Retry-After: 60" gave not_before = +1s. A failure
// whose cause carries a hint now waits max(backoff, hint), the hint capped
// at MaxRetryAfter and at the MaxAge deadline; the history records the hint
// as given.
func TestDivertHonoursRetryAfter(t *testing.T) {
	clock := newFakeClock()
	e := newEnv(t, natstest.URL(t), func(c *retryqueue.Config) {
		c.Clock = clock
		c.Backoff = func(int) time.Duration { return 30 * time.Second }
		c.MaxRetryAfter = 10 * time.Minute
		c.MaxAge = time.Hour
	})
	for i, tc := range []struct {
		name   string
		reason retryqueue.Reason
		cause  error
		age    time.Duration // since the first diversion
		want   time.Duration // not_before - now; < 0: absent
		hint   time.Duration // in the history entry
	}{
		{"no hint", retryqueue.ReasonFailure, errors.New("HTTP 503"), 0, 30 * time.Second, 0},
		{"nil cause", retryqueue.ReasonFailure, nil, 0, 30 * time.Second, 0},
		{"hint shorter than the backoff", retryqueue.ReasonFailure, retryAfterErr(10 * time.Second), 0, 30 * time.Second, 10 * time.Second},
		{"hint longer than the backoff", retryqueue.ReasonFailure, retryAfterErr(90 * time.Second), 0, 90 * time.Second, 90 * time.Second},
		{"hint in a wrapped cause", retryqueue.ReasonFailure, fmt.Errorf("handler: %w", retryAfterErr(2*time.Minute)), 0, 2 * time.Minute, 2 * time.Minute},
		{"hint capped at MaxRetryAfter", retryqueue.ReasonFailure, retryAfterErr(3 * time.Hour), 0, 10 * time.Minute, 3 * time.Hour},
		{"hint capped at the MaxAge deadline", retryqueue.ReasonFailure, retryAfterErr(8 * time.Minute), 55 * time.Minute, 5 * time.Minute, 8 * time.Minute},
		{"MaxAge deadline never cuts the backoff", retryqueue.ReasonFailure, retryAfterErr(8 * time.Minute), 59*time.Minute + 50*time.Second, 30 * time.Second, 8 * time.Minute},
		{"negative hint", retryqueue.ReasonFailure, retryAfterErr(-5 * time.Second), 0, 30 * time.Second, 0},
		{"not a failure", retryqueue.ReasonOpen, retryAfterErr(time.Minute), 0, -1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := clock.Now()
			msg := message.NewMessage(fmt.Sprintf("uuid-ra-%d", i), []byte("p"))
			if tc.age > 0 {
				msg.Metadata.Set(retryqueue.MetaFirstDivertedAt, ts(now.Add(-tc.age)))
			}
			if dead, err := e.q.Route(context.Background(), msg, tc.reason, tc.cause); err != nil || dead != "" {
				t.Fatalf("Route = %q, %v; want diverted", dead, err)
			}
			m := last(t, e.js, e.q.RetryTopic())
			if m.UUID != msg.UUID {
				t.Fatalf("last diverted %s, want %s", m.UUID, msg.UUID)
			}
			wantNB := "<absent>"
			if tc.want >= 0 {
				wantNB = ts(now.Add(tc.want))
			}
			wantMeta(t, m, map[string]string{retryqueue.MetaNotBefore: wantNB})
			h, err := retryqueue.History(m)
			if err != nil || len(h) != 1 {
				t.Fatalf("history %v, %v; want one entry", h, err)
			}
			if h[0].RetryAfter != tc.hint {
				t.Errorf("history retry_after = %v, want %v", h[0].RetryAfter, tc.hint)
			}
			// The hand-written history entry is what encoding/json writes.
			if want, _ := json.Marshal(h); m.Metadata.Get(retryqueue.MetaHistory) != string(want) {
				t.Errorf("history\n got %s\nwant %s", m.Metadata.Get(retryqueue.MetaHistory), want)
			}
			// The far not_before a capped hint gives is not malformed: the
			// message can be drained and diverted again.
			if why, bad := e.q.Malformed(m); bad {
				t.Errorf("diverted message is malformed: %s", why)
			}
		})
	}
}

// MaxRetryAfter defaults to 1h, or MaxAge when that is shorter.
func TestMaxRetryAfterDefault(t *testing.T) {
	if err := (retryqueue.Config{Publisher: nopPublisher{}, JetStream: nopJetStream{}, Service: "svc", MaxAge: 30 * time.Minute}).Validate(); err != nil {
		t.Errorf("MaxAge 30m, MaxRetryAfter unset: %v", err)
	}
	clock := newFakeClock()
	e := newEnv(t, natstest.URL(t), func(c *retryqueue.Config) { c.Clock = clock })
	msg := message.NewMessage("uuid-ra-default", []byte("p"))
	if err := e.q.Divert(context.Background(), msg, retryqueue.ReasonFailure, retryAfterErr(3*time.Hour)); err != nil {
		t.Fatal(err)
	}
	wantMeta(t, last(t, e.js, e.q.RetryTopic()), map[string]string{
		retryqueue.MetaNotBefore: ts(clock.Now().Add(time.Hour)),
	})
}

// Regression (fresh-user trial), end to end through a real webhook
// endpoint: a partner answering 429 with "Retry-After: 60" gets its minute
// on every attempt, not DefaultBackoff's 1s, 2s.
func TestDivertHonoursWebhookRetryAfter(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set("Retry-After", "60")
		http.Error(w, "slow down", http.StatusTooManyRequests)
	}))
	defer srv.Close()
	sender, err := webhook.NewSender(webhook.Config{URL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	clock := newFakeClock()
	e := newEnv(t, natstest.URL(t), func(c *retryqueue.Config) { c.Clock = clock })
	msg := message.NewMessage("uuid-webhook-429", []byte(`{"order":42}`))
	for attempt := 1; attempt <= 2; attempt++ {
		serr := sender.Send(context.Background(), msg.UUID, msg.Payload)
		if serr == nil {
			t.Fatal("Send = nil, want the 429")
		}
		if err := e.q.Divert(context.Background(), msg, retryqueue.ReasonFailure, serr); err != nil {
			t.Fatal(err)
		}
		msg = last(t, e.js, e.q.RetryTopic())
		wantMeta(t, msg, map[string]string{
			retryqueue.MetaAttempt:   strconv.Itoa(attempt),
			retryqueue.MetaNotBefore: ts(clock.Now().Add(time.Minute)),
		})
		if t.Failed() {
			t.Fatalf("attempt %d: %v", attempt, serr)
		}
		clock.Advance(time.Minute)
	}
	if n := calls.Load(); n != 2 {
		t.Errorf("endpoint called %d times, want 2", n)
	}
}

// The largest MaxAge and MaxRetryAfter Validate accepts do not overflow
// the not_before check and make every diverted message malformed.
func TestHugeMaxAgeNotMalformed(t *testing.T) {
	e := newEnv(t, natstest.URL(t), func(c *retryqueue.Config) {
		c.MaxAge = time.Duration(math.MaxInt64) // "no cap"
		c.MaxRetryAfter = time.Duration(math.MaxInt64)
	})
	if err := e.cfg.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	if err := e.q.Divert(testCtx(t), message.NewMessage("m1", nil), retryqueue.ReasonFailure, errors.New("HTTP 503")); err != nil {
		t.Fatal(err)
	}
	c := last(t, e.js, e.q.RetryTopic())
	if why, bad := e.q.Malformed(c); bad {
		t.Errorf("a fresh diversion is malformed: %s", why)
	}
}

// Lowering MaxRetryAfter in a redeploy must not turn the backlog diverted
// under the old value into malformed messages (dead-lettered by the drain).
func TestLoweredMaxRetryAfterKeepsBacklog(t *testing.T) {
	e := newEnv(t, natstest.URL(t), nil) // MaxRetryAfter 1h
	if err := e.q.Divert(testCtx(t), message.NewMessage("m1", nil), retryqueue.ReasonFailure, retryAfterErr(50*time.Minute)); err != nil {
		t.Fatal(err)
	}
	cfg := e.cfg
	cfg.MaxRetryAfter = 10 * time.Minute
	q2, err := retryqueue.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if why, bad := q2.Malformed(last(t, e.js, e.q.RetryTopic())); bad {
		t.Errorf("after lowering MaxRetryAfter to 10m, a message diverted with a 50m hint is malformed: %s", why)
	}
}

// A drain handler that diverts another message under the drained
// message's context: the other message is published (Divert's nil means a
// durable copy), and the drained message, whose handler returned nil, is
// acked, not turned away.
func TestDivertOtherMessageUnderDrainContext(t *testing.T) {
	e := newEnv(t, natstest.URL(t), nil)
	seed(t, e, 1)
	var mu sync.Mutex
	seen := map[string]int{}
	var divErr error
	handler := func(m *message.Message) ([]*message.Message, error) {
		mu.Lock()
		defer mu.Unlock()
		seen[m.UUID]++
		if len(seen) == 1 {
			divErr = e.q.Divert(m.Context(), message.NewMessage("other", []byte("x")), retryqueue.ReasonOpen, errOpen)
		}
		return nil, nil
	}
	g := &gate{}
	g.budget.Store(1 << 30)
	d := startDrainer(t, e, retryqueue.DrainerConfig{Handler: handler, Gate: g, PollInterval: 20 * time.Millisecond})
	natstest.Eventually(t, 30*time.Second, func() bool { return d.Stats().Drained == 2 }, "both drained")
	mu.Lock()
	defer mu.Unlock()
	if divErr != nil {
		t.Fatal(divErr)
	}
	if seen["m000"] != 1 || seen["other"] != 1 {
		t.Errorf("handled %v, want m000 and other once each", seen)
	}
	if s := d.Stats(); s.Deferred != 0 {
		t.Errorf("stats %+v: the drained message was turned away", s)
	}
}
