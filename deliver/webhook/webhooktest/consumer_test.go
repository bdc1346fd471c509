package webhooktest_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/deliver"
	"github.com/floodgate-go/floodgate/deliver/webhook"
	"github.com/floodgate-go/floodgate/deliver/webhook/webhooktest"
	"github.com/floodgate-go/floodgate/internal/configtest"
)

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

var (
	t0     = time.Date(2025, 3, 14, 9, 30, 0, 0, time.UTC)
	secret = []byte("geofence-webhook-secret-32-bytes")
)

func start(t *testing.T, cfg webhooktest.Config) (*webhooktest.Consumer, *httptest.Server) {
	t.Helper()
	c, err := webhooktest.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)
	return c, srv
}

func sender(t *testing.T, url string, clock *fakeClock, timeout time.Duration) *webhook.Sender {
	t.Helper()
	s, err := webhook.NewSender(webhook.Config{URL: url, Secret: secret, Timeout: timeout, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestDegradedP99 measures the latencies of the degraded phase and of the
// recovered one: the P99 is the spike before recovery; after it no request
// waits the spike.
func TestDegradedP99(t *testing.T) {
	clock := &fakeClock{t: t0}
	const spike = 150 * time.Millisecond
	c, srv := start(t, webhooktest.Config{
		Secret: secret, Clock: clock,
		Script: webhooktest.Degraded(10*time.Second, time.Millisecond, spike, 0.05),
	})
	c.Start()
	s := sender(t, srv.URL, clock, 5*time.Second)
	measure := func(prefix string, n int) []time.Duration {
		var lat []time.Duration
		for i := range n {
			begin := time.Now()
			if err := s.Send(context.Background(), prefix+"-"+string(rune('a'+i%26))+string(rune('a'+i/26)), []byte(`{"event":"enter"}`)); err != nil {
				t.Fatalf("Send: %v", err)
			}
			lat = append(lat, time.Since(begin))
		}
		slices.Sort(lat)
		return lat
	}
	degraded := measure("d", 40) // 2 of 40 slow: the P99 (and P95+) is the spike
	if p99 := degraded[len(degraded)*99/100]; p99 < spike {
		t.Errorf("degraded P99 = %v, want >= %v", p99, spike)
	}
	// The rest were fast: the consumer made only those 2 wait the spike. (A
	// latency measured by the client has no upper bound on a loaded machine,
	// so "fast" is the consumer's count, not a client-side P50.)
	if st := c.Stats(); st.Slow != 2 || st.Processed != 40 {
		t.Errorf("degraded phase: %d of %d requests waited the spike, want 2 of 40", st.Slow, st.Processed)
	}
	if got := c.PhaseAt(clock.Now()).Name; got != "degraded" {
		t.Errorf("phase %q", got)
	}
	clock.Set(t0.Add(10 * time.Second))
	if got := c.PhaseAt(clock.Now()).Name; got != "recovered" {
		t.Errorf("phase after recovery %q", got)
	}
	measure("r", 40)
	// None of the recovered phase's requests waited the spike: Slow stays 2.
	st := c.Stats()
	if st.Slow != 2 || st.Processed != 80 || st.Unique != 80 || st.Duplicates != 0 || st.BadSignatures != 0 {
		t.Errorf("Stats = %+v", st)
	}
}

// TestTimeoutRetryDuplicate: a sender that gives up on a slow request;
// the consumer processes it anyway, the sender retries, and the consumer
// counts the duplicate under the same idempotency key. The sender's
// deadline passes once the consumer has the request (timeoutCtx), not at
// a fixed time: a fixed 50 ms could pass before a loaded machine delivered
// the request, which then was never processed (it failed 1 run in many).
func TestTimeoutRetryDuplicate(t *testing.T) {
	clock := &fakeClock{t: t0}
	c, srv := start(t, webhooktest.Config{
		Secret: secret, Clock: clock,
		Script: webhooktest.Degraded(time.Minute, 0, time.Second, 1),
	})
	s := sender(t, srv.URL, clock, time.Minute) // a hang guard: the deadline is ctx's
	ctx := newTimeoutCtx()
	sent := make(chan struct{})
	go func() {
		for c.Stats().Requests == 0 {
			select {
			case <-sent:
				return
			case <-time.After(time.Millisecond):
			}
		}
		// The consumer is in its 1 s spike; the small body came with the
		// headers, in the server's buffer.
		ctx.expire()
	}()
	err := s.Send(ctx, "trigger-1", []byte(`{"event":"exit"}`))
	close(sent)
	if !deliver.IsRetryable(err) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Send = %v, want retryable timeout", err)
	}
	// The consumer finishes the work although nobody waits.
	deadline := time.Now().Add(30 * time.Second)
	for c.Stats().Processed != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the abandoned request was never processed")
		}
		time.Sleep(5 * time.Millisecond)
	}
	clock.Set(t0.Add(2 * time.Minute)) // recovered
	// The retry gets a hang guard for its timeout: the recovered consumer
	// answers at once, but on a loaded machine not always within 50 ms.
	retry := sender(t, srv.URL, clock, time.Minute)
	if err := retry.Send(context.Background(), "trigger-1", []byte(`{"event":"exit"}`)); err != nil {
		t.Fatalf("retry: %v", err)
	}
	st := c.Stats()
	if st.Processed != 2 || st.Unique != 1 || st.Duplicates != 1 || st.Abandoned != 1 {
		t.Errorf("Stats = %+v", st)
	}
	if d := c.Deliveries(); d["trigger-1"] != 2 || len(d) != 1 {
		t.Errorf("Deliveries = %v", d)
	}
	if b, ok := c.Body("trigger-1"); !ok || string(b) != `{"event":"exit"}` {
		t.Errorf("Body = %q, %v", b, ok)
	}
}

func TestRejectsAndStatusPhase(t *testing.T) {
	clock := &fakeClock{t: t0}
	c, srv := start(t, webhooktest.Config{
		Secret: secret, Clock: clock,
		Script: []webhooktest.Phase{
			{Name: "down", Duration: time.Second, Status: http.StatusServiceUnavailable, RetryAfter: 3 * time.Second},
			{Name: "up"},
		},
	})
	c.Start()
	s := sender(t, srv.URL, clock, 5*time.Second)
	err := s.Send(context.Background(), "k1", []byte(`{}`))
	var de *deliver.Error
	if !errors.As(err, &de) || de.Kind != deliver.ErrRetryable || de.StatusCode != 503 || de.RetryAfter != 3*time.Second {
		t.Fatalf("Send while down = %#v", err)
	}
	clock.Set(t0.Add(2 * time.Second))

	// A wrong secret: 401, permanent, not processed.
	bad, _ := webhook.NewSender(webhook.Config{URL: srv.URL, Secret: []byte("wrong-webhook-secret-of-32-bytes"), Now: clock.Now})
	if err := bad.Send(context.Background(), "k2", []byte(`{}`)); !deliver.IsPermanent(err) || !strings.Contains(err.Error(), "401") {
		t.Errorf("wrong secret: %v", err)
	}
	// A stale timestamp: 401.
	stale, _ := webhook.NewSender(webhook.Config{URL: srv.URL, Secret: secret, Now: func() time.Time { return t0.Add(-time.Hour) }})
	if err := stale.Send(context.Background(), "k3", []byte(`{}`)); !deliver.IsPermanent(err) {
		t.Errorf("stale: %v", err)
	}
	// No idempotency key, and invalid JSON: 400.
	for _, req := range []*http.Request{
		mustRequest(t, srv.URL, "", `{}`),
		mustRequest(t, srv.URL, "k4", `{"open":`),
	} {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("HTTP %d, want 400", resp.StatusCode)
		}
	}
	if err := s.Send(context.Background(), "k1", []byte(`{}`)); err != nil {
		t.Errorf("Send when up: %v", err)
	}
	st := c.Stats()
	if st.Requests != 6 || st.Rejected != 1 || st.BadSignatures != 2 || st.BadRequests != 2 || st.Processed != 1 {
		t.Errorf("Stats = %+v", st)
	}
}

// TestReplayRefused: a captured request sent again within the tolerance is
// refused (429, counted as a replay, not processed); the sender's own retry
// of the message, with a new timestamp, is processed and counted as a
// duplicate. The old X-Floodgate headers are refused by a default consumer
// and accepted by one with SchemeBoth.
func TestReplayRefused(t *testing.T) {
	clock := &fakeClock{t: t0}
	c, srv := start(t, webhooktest.Config{Secret: secret, Clock: clock})
	replay := func(key string) int {
		t.Helper()
		resp, err := http.DefaultClient.Do(mustRequest(t, srv.URL, key, `{"event":"enter"}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	clock.Set(t0.Add(3 * time.Second))
	if code := replay("k1"); code != http.StatusNoContent {
		t.Fatalf("first: HTTP %d", code)
	}
	clock.Set(t0.Add(time.Minute))
	if code := replay("k1"); code != http.StatusTooManyRequests {
		t.Fatalf("replay: HTTP %d, want 429", code)
	}
	if err := sender(t, srv.URL, clock, 5*time.Second).Send(context.Background(), "k1", []byte(`{"event":"enter"}`)); err != nil {
		t.Fatalf("retry: %v", err)
	}
	if st := c.Stats(); st.Requests != 3 || st.Processed != 2 || st.Duplicates != 1 || st.Replays != 1 || st.BadSignatures != 0 {
		t.Errorf("Stats = %+v", st)
	}

	old, err := webhook.NewSender(webhook.Config{URL: srv.URL, Secret: secret, Scheme: webhook.SchemeFloodgate, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	if err := old.Send(context.Background(), "k2", []byte(`{}`)); !deliver.IsPermanent(err) || !strings.Contains(err.Error(), "401") {
		t.Errorf("old headers to a default consumer: %v", err)
	}
	_, both := start(t, webhooktest.Config{Secret: secret, Clock: clock, Scheme: webhook.SchemeBoth})
	old, _ = webhook.NewSender(webhook.Config{URL: both.URL, Secret: secret, Scheme: webhook.SchemeFloodgate, Now: clock.Now})
	if err := old.Send(context.Background(), "k2", []byte(`{}`)); err != nil {
		t.Errorf("old headers to a SchemeBoth consumer: %v", err)
	}
}

func mustRequest(t *testing.T, url, key, body string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set(webhook.HeaderIdempotencyKey, key)
	}
	// Unsigned requests need a consumer without a secret to reach the key
	// and JSON checks; sign with the right secret instead.
	ts := t0.Add(2 * time.Second).Unix()
	req.Header.Set(webhook.HeaderWebhookID, key)
	req.Header.Set(webhook.HeaderWebhookTimestamp, strconv.FormatInt(ts, 10))
	req.Header.Set(webhook.HeaderWebhookSignature, webhook.Sign(secret, key, ts, []byte(body)))
	return req
}

func TestSlowSelectionIsEven(t *testing.T) {
	// 1000 requests at 1%: exactly 10 slow, never two in a row.
	clock := &fakeClock{t: t0}
	c, srv := start(t, webhooktest.Config{Clock: clock, Script: []webhooktest.Phase{{SlowFraction: 0.01}}})
	_ = srv
	for i := range 1000 {
		req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(`{}`))
		req.Header.Set(webhook.HeaderIdempotencyKey, strconv.Itoa(i+1))
		c.ServeHTTP(httptest.NewRecorder(), req)
	}
	if st := c.Stats(); st.Slow != 10 || st.Processed != 1000 {
		t.Errorf("Stats = %+v", st)
	}
}

func TestConfigValidate(t *testing.T) {
	for _, tt := range []struct {
		name  string
		cfg   webhooktest.Config
		want  error
		field string
	}{
		{"forever not last", webhooktest.Config{Script: []webhooktest.Phase{{}, {}}}, webhooktest.ErrPhaseDuration, "Config.Script[0].Duration"},
		{"negative latency", webhooktest.Config{Script: []webhooktest.Phase{{Latency: -1}}}, webhooktest.ErrLatency, "Config.Script[0]"},
		{"fraction above 1", webhooktest.Config{Script: []webhooktest.Phase{{SlowFraction: 1.5}}}, webhooktest.ErrSlowFraction, "Config.Script[0].SlowFraction"},
		{"bad status", webhooktest.Config{Script: []webhooktest.Phase{{Status: 42}}}, webhooktest.ErrStatus, "Config.Script[0].Status"},
		{"negative tolerance", webhooktest.Config{Secret: secret, Tolerance: -time.Second}, webhook.ErrTolerance, "Config (verification): VerifierConfig.Tolerance -1s"},
		{"negative tolerance without a secret", webhooktest.Config{Tolerance: -time.Second}, webhook.ErrTolerance, "Config (verification): VerifierConfig.Tolerance -1s"},
		{"unknown scheme", webhooktest.Config{Secret: secret, Scheme: 7}, webhook.ErrScheme, "Config (verification): VerifierConfig.Scheme"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := webhooktest.New(tt.cfg)
			if !errors.Is(err, tt.want) || !strings.HasPrefix(err.Error(), "invalid config: "+tt.field) {
				t.Errorf("New = %v, want %v naming %s", err, tt.want, tt.field)
			}
		})
	}
	if s := webhooktest.Degraded(5*time.Second, time.Millisecond, 900*time.Millisecond, 0.02); len(s) != 2 || s[0].SlowLatency != 900*time.Millisecond || s[1].SlowFraction != 0 {
		t.Errorf("Degraded = %+v", s)
	}
}

// Config.Validate checks the config as [webhooktest.New] uses it, defaults
// applied to its zero fields (phase names among them), and leaves it and
// its Script as they are.
func TestValidateAppliesDefaults(t *testing.T) {
	configtest.Run(t, webhooktest.ErrLatency, []configtest.Case[webhooktest.Config]{
		{Name: "minimal", Cfg: webhooktest.Config{}},
		{Name: "unnamed phases", Cfg: webhooktest.Config{Script: []webhooktest.Phase{{Duration: time.Second}, {Status: 503}}}},
		{Name: "negative MaxBodySize", Cfg: webhooktest.Config{MaxBodySize: -1}, Want: "Config.MaxBodySize"},
		{Name: "negative slow latency", Cfg: webhooktest.Config{Script: []webhooktest.Phase{{SlowLatency: -time.Second}}}, Want: "Config.Script[0]"},
	}, &configtest.Options[webhooktest.Config]{
		Match: configtest.HasPrefix,
		Snapshot: func(c webhooktest.Config) any {
			c.Script, c.Secret = slices.Clone(c.Script), slices.Clone(c.Secret)
			return c
		},
	})
}

// timeoutCtx is a context whose deadline passes when the test says so
// (expire): Done closes and Err is context.DeadlineExceeded, as for a
// sender's timeout.
type timeoutCtx struct {
	context.Context
	done chan struct{}
	once sync.Once
}

func newTimeoutCtx() *timeoutCtx {
	return &timeoutCtx{Context: context.Background(), done: make(chan struct{})}
}

func (c *timeoutCtx) expire()               { c.once.Do(func() { close(c.done) }) }
func (c *timeoutCtx) Done() <-chan struct{} { return c.done }

func (c *timeoutCtx) Err() error {
	select {
	case <-c.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}
