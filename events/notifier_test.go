package events_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/breaker/breakertest"
	"github.com/floodgate-go/floodgate/events"
	"github.com/floodgate-go/floodgate/internal/configtest"
	"github.com/floodgate-go/floodgate/internal/natstest"
	"github.com/floodgate-go/floodgate/jsq"
)

var errDown = errors.New("partner down")

// TestTransitionsPublishedAndLogged trips and recovers a real breaker on a
// fake clock and reads the transition messages back from a real embedded
// JetStream stream.
func TestTransitionsPublishedAndLogged(t *testing.T) {
	ctx := context.Background()
	url := natstest.URL(t)
	nc := natstest.Conn(t, url)
	js := natstest.JetStream(t, nc)
	topic := natstest.Name(t, "transitions")
	natstest.DeleteStreams(t, js, topic)
	if _, err := jsq.EnsureStream(ctx, js, topic); err != nil {
		t.Fatal(err)
	}
	pub, err := jsq.NewPublisher(jsq.PublisherConfig{Conn: nc, PublishTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	logs := watermill.NewCaptureLogger()
	n, err := events.New(events.Config{Publisher: pub, Topic: topic, Logger: logs})
	if err != nil {
		t.Fatal(err)
	}

	clock := breakertest.NewClock(time.Time{})
	b, err := breaker.New(breaker.Config{
		Name: "northwind", Clock: clock, WindowSize: 2, MinimumCalls: 2,
		BaseOpenWindow: 2 * time.Second, DisableJitter: true,
		ProbeConcurrency: 1, SuccessesToClose: 1,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Stop()
	remove := n.Watch(b)
	defer remove()

	call := func(err error) {
		t.Helper()
		p, aerr := b.Allow()
		if aerr != nil {
			t.Fatalf("allow: %v", aerr)
		}
		p.Done(err)
	}
	call(errDown)
	call(errDown)                  // trip: closed -> open, window 2s
	clock.Advance(2 * time.Second) // open -> half-open on the timer
	call(errDown)                  // failed probe: half-open -> open, window 4s
	clock.Advance(4 * time.Second)
	call(nil) // good probe: half-open -> closed

	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := n.Close(cctx); err != nil {
		t.Fatal(err)
	}
	if st := n.Stats(); st != (events.Stats{Published: 5}) {
		t.Errorf("stats %+v, want 5 published", st)
	}

	start := breakertest.NewClock(time.Time{}).Now()
	want := []struct {
		from, to string
		window   float64
		at       time.Duration
	}{
		{"closed", "open", 2, 0},
		{"open", "half-open", 0, 2 * time.Second},
		{"half-open", "open", 4, 2 * time.Second},
		{"open", "half-open", 0, 6 * time.Second},
		{"half-open", "closed", 0, 6 * time.Second},
	}
	msgs := natstest.StreamMsgs(t, js, topic)
	if len(msgs) != len(want) {
		t.Fatalf("%d messages on %s, want %d", len(msgs), topic, len(want))
	}
	var gen uint64
	for i, m := range msgs {
		tr, err := events.Decode(m)
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		w := want[i]
		if tr.Breaker != "northwind" || tr.From != w.from || tr.To != w.to || tr.WindowS != w.window ||
			!tr.At.Equal(start.Add(w.at)) || tr.Reason == "" {
			t.Errorf("message %d = %+v, want %s -> %s window %v at +%v", i, tr, w.from, w.to, w.window, w.at)
		}
		if i > 0 && tr.Generation != gen+1 {
			t.Errorf("message %d generation %d after %d", i, tr.Generation, gen)
		}
		gen = tr.Generation
		if m.Metadata.Get(events.MetaTo) != w.to || m.Metadata.Get(events.MetaBreaker) != "northwind" {
			t.Errorf("message %d metadata %v", i, m.Metadata)
		}
	}

	infos := logs.Captured()[watermill.InfoLogLevel]
	if len(infos) != len(want) {
		t.Fatalf("%d info lines, want one per transition (%d)", len(infos), len(want))
	}
	f := infos[2].Fields
	if f["breaker"] != "northwind" || f["from"] != "half-open" || f["to"] != "open" ||
		f["window"] != 4*time.Second || f["reason"] == "" {
		t.Errorf("log fields %v", f)
	}
	if errs := logs.Captured()[watermill.ErrorLogLevel]; len(errs) != 0 {
		t.Errorf("error lines: %v", errs)
	}
}

// TestFullBufferDrops: with the broker gone, publishing blocks until its
// timeout; the listener never blocks, and transitions beyond the buffer
// are dropped, counted and logged.
func TestFullBufferDrops(t *testing.T) {
	srv := natstest.Server(t)
	nc := natstest.Conn(t, srv.ClientURL())
	pub, err := jsq.NewPublisher(jsq.PublisherConfig{Conn: nc, PublishTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	logs := watermill.NewCaptureLogger()
	n, err := events.New(events.Config{Publisher: pub, Topic: "t", Logger: logs, Buffer: 1, PublishTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	b, err := breaker.New(breaker.Config{Name: "geofence", Clock: breakertest.NewClock(time.Time{})})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Stop()
	n.Watch(b)
	begin := time.Now()
	for range 3 {
		b.ForceOpen()
		b.Reset()
	}
	// A hang guard, not a speed bound: a listener that waited for its
	// publish would hold the transitions for 4 publish timeouts (8s).
	if d := time.Since(begin); d > 6*time.Second {
		t.Errorf("6 transitions took %v: the listener blocked", d)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := n.Close(ctx); err != nil {
		t.Fatal(err)
	}
	st := n.Stats()
	// One publish in flight at most, one buffered: at least 4 of 6 dropped.
	if st.Published != 0 || st.Dropped < 4 || st.Dropped+st.Failed != 6 {
		t.Errorf("stats %+v, want 0 published, >= 4 dropped, dropped+failed = 6", st)
	}
	if got := len(logs.Captured()[watermill.ErrorLogLevel]); got != 6 {
		t.Errorf("%d error lines, want 6 (one per drop or failure)", got)
	}
	b.ForceOpen() // after Close: dropped, never a panic
	if n.Stats().Dropped != st.Dropped+1 {
		t.Error("transition after Close not counted as dropped")
	}
}

func TestConfigAndDecode(t *testing.T) {
	for _, tc := range []struct {
		cfg   events.Config
		field string
	}{
		{events.Config{Buffer: -1}, "Buffer"},
		{events.Config{Buffer: 1 << 20}, "Buffer"},
		{events.Config{PublishTimeout: -time.Second}, "PublishTimeout"},
	} {
		_, err := events.New(tc.cfg)
		if !errors.Is(err, events.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%+v: %v, want invalid config naming %s", tc.cfg, err, tc.field)
		}
	}
	n, err := events.New(events.Config{}) // log only
	if err != nil {
		t.Fatal(err)
	}
	if n.Topic() != events.DefaultTopic {
		t.Errorf("topic %q", n.Topic())
	}
	n.Observe(breaker.Transition{Breaker: "x", From: breaker.StateClosed, To: breaker.StateOpen})
	if err := n.Close(context.Background()); err != nil || n.Stats() != (events.Stats{}) {
		t.Errorf("log-only notifier: %v, %+v", err, n.Stats())
	}

	m, err := events.Transition{Breaker: "x", From: "open", To: "half-open"}.Message("id-1")
	if err != nil {
		t.Fatal(err)
	}
	m.Metadata.Set(events.MetaEvent, "other")
	if _, err := events.Decode(m); !errors.Is(err, events.ErrNotTransition) {
		t.Errorf("decode of a foreign message: %v", err)
	}
}

// Config.Validate checks the config as [events.New] uses it, defaults
// applied to its zero fields, and leaves it as it is.
func TestConfigValidate(t *testing.T) {
	configtest.Run(t, events.ErrInvalidConfig, []configtest.Case[events.Config]{
		{Name: "minimal", Cfg: events.Config{}},
		{Name: "Buffer", Cfg: events.Config{Buffer: 1<<16 + 1}, Want: "Buffer must be in 1..65536, got 65537"},
		{Name: "PublishTimeout", Cfg: events.Config{PublishTimeout: -time.Second}, Want: "PublishTimeout must be > 0, got -1s"},
	}, nil)
}
