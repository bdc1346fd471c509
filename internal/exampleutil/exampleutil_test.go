package exampleutil_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/internal/configtest"
	"github.com/floodgate-go/floodgate/internal/exampleutil"
	"github.com/floodgate-go/floodgate/internal/natstest"
	"github.com/floodgate-go/floodgate/middleware"
)

// TestGuardDivertsAndDrains wires a guard on an embedded JetStream server:
// a message rejected by the open breaker is diverted to the retry queue,
// and once the breaker closes the drainer delivers it through the same
// guarded handler.
func TestGuardDivertsAndDrains(t *testing.T) {
	nc, err := exampleutil.StartNATS("")
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if !nc.Embedded() {
		t.Fatal("no URL given, but not embedded")
	}
	b, err := breaker.New(breaker.Config{Name: "test"})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Stop()
	var delivered atomic.Int64
	var transitions atomic.Int64
	var events atomic.Int64
	g, err := exampleutil.NewGuard(context.Background(), exampleutil.GuardConfig{
		NATS:            nc,
		Breaker:         b,
		Source:          "orders",
		RetryTopic:      "retry_guard_test",
		DeadLetterTopic: "dead_guard_test",
		Deliver: func(*message.Message) ([]*message.Message, error) {
			delivered.Add(1)
			return nil, nil
		},
		OnEvent:      func(middleware.Event) { events.Add(1) },
		OnTransition: func(breaker.Transition) { transitions.Add(1) },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()

	b.ForceOpen()
	if _, err := g.Handler(message.NewMessage("m-1", []byte("x"))); err != nil {
		t.Fatal(err)
	}
	c := g.Counters
	if c.Diverted.Load() != 1 || c.Admitted.Load() != 0 || delivered.Load() != 0 || c.Trips.Load() != 1 {
		t.Fatalf("diverted %d, admitted %d, delivered %d, trips %d; want 1, 0, 0, 1",
			c.Diverted.Load(), c.Admitted.Load(), delivered.Load(), c.Trips.Load())
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Drainer.Run(ctx) }()
	natstest.Eventually(t, 10*time.Second, func() bool { return g.Backlog(ctx) == 1 }, "backlog never reached 1")
	b.ForceClose()
	natstest.Eventually(t, 10*time.Second, func() bool { return delivered.Load() == 1 && g.Backlog(ctx) == 0 },
		"drain did not deliver: delivered %d", natstest.Now(func() any { return delivered.Load() }))
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if c.Delivered.Load() != 1 || events.Load() != 2 || transitions.Load() != 2 {
		t.Errorf("delivered %d, events %d, transitions %d; want 1, 2, 2", c.Delivered.Load(), events.Load(), transitions.Load())
	}
}

// TestCloseDeletesStreamsOnExternalServer: a run on an external server
// leaves it as it found it.
func TestCloseDeletesStreamsOnExternalServer(t *testing.T) {
	srv := natstest.Server(t)
	nc, err := exampleutil.StartNATS(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	if nc.Embedded() {
		t.Fatal("URL given, but embedded")
	}
	ctx := context.Background()
	if err := nc.EnsureStreams(ctx, "src_close_test"); err != nil {
		t.Fatal(err)
	}
	b, err := breaker.New(breaker.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Stop()
	g, err := exampleutil.NewGuard(ctx, exampleutil.GuardConfig{NATS: nc, Breaker: b, Source: "orders",
		RetryTopic: "retry_close_test", DeadLetterTopic: "dead_close_test",
		Deliver: func(*message.Message) ([]*message.Message, error) { return nil, nil }})
	if err != nil {
		t.Fatal(err)
	}
	g.Close()
	nc.Close()
	nc.Close() // harmless

	js := natstest.JetStream(t, natstest.Conn(t, srv.ClientURL()))
	for _, s := range []string{"src_close_test", "retry_close_test", "dead_close_test"} {
		if _, err := js.Stream(ctx, s); !errors.Is(err, jetstream.ErrStreamNotFound) {
			t.Errorf("stream %s after Close: %v, want not found", s, err)
		}
	}
}

// GuardConfig.Validate leaves the config as it is and names a missing
// required field; NewGuard rejects the config the same way before it
// provisions anything.
func TestNewGuardRequiresFields(t *testing.T) {
	nc := &exampleutil.NATS{}
	b := &breaker.Breaker{}
	deliver := func(*message.Message) ([]*message.Message, error) { return nil, nil }
	configtest.Run(t, exampleutil.ErrInvalidConfig, []configtest.Case[exampleutil.GuardConfig]{
		// minimal: optional fields zero
		{Name: "minimal", Cfg: exampleutil.GuardConfig{NATS: nc, Breaker: b, Deliver: deliver, Source: "orders"}},
		{Name: "NATS", Cfg: exampleutil.GuardConfig{}, Want: "GuardConfig.NATS"},
		{Name: "Breaker", Cfg: exampleutil.GuardConfig{NATS: nc}, Want: "GuardConfig.Breaker"},
		{Name: "Deliver", Cfg: exampleutil.GuardConfig{NATS: nc, Breaker: b}, Want: "GuardConfig.Deliver"},
		{Name: "Source", Cfg: exampleutil.GuardConfig{NATS: nc, Breaker: b, Deliver: deliver}, Want: "GuardConfig.Source"},
	}, &configtest.Options[exampleutil.GuardConfig]{
		// Deliver, a func reflect.DeepEqual cannot compare, stands in as
		// whether it is set.
		Snapshot: func(c exampleutil.GuardConfig) any {
			type snapshot struct {
				Cfg     exampleutil.GuardConfig
				Deliver bool
			}
			s := snapshot{c, c.Deliver != nil}
			s.Cfg.Deliver = nil
			return s
		},
		New: func(c exampleutil.GuardConfig) error {
			_, err := exampleutil.NewGuard(context.Background(), c)
			return err
		},
	})
}

func TestStartNATSBadURL(t *testing.T) {
	_, err := exampleutil.StartNATS("nats://127.0.0.1:1")
	if err == nil || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Errorf("err = %v, want one naming the URL", err)
	}
}

func TestCounters(t *testing.T) {
	var c exampleutil.Counters
	for _, ev := range []middleware.Event{
		{UUID: "a", Action: middleware.Delivered, Admitted: true},
		{UUID: "b", Action: middleware.Diverted, Admitted: true, Probe: true},
		{UUID: "c", Action: middleware.Diverted},
		{UUID: "d", Action: middleware.DeadLettered, Admitted: true},
		{UUID: "e", Action: middleware.Nacked},
	} {
		c.OnEvent(ev)
	}
	c.OnTransition(breaker.Transition{From: breaker.StateClosed, To: breaker.StateOpen})
	c.OnTransition(breaker.Transition{From: breaker.StateOpen, To: breaker.StateHalfOpen})
	c.OnTransition(breaker.Transition{From: breaker.StateHalfOpen, To: breaker.StateOpen})
	got := []int64{c.Admitted.Load(), c.Probes.Load(), c.Delivered.Load(), c.Diverted.Load(), c.DeadLettered.Load(), c.Nacked.Load(), c.Trips.Load()}
	want := []int64{3, 1, 1, 2, 1, 1, 2}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("admitted, probes, delivered, diverted, dead, nacked, trips = %v, want %v", got, want)
		}
	}
	if !c.Dead("d") || c.Dead("a") {
		t.Error("Dead: want d only")
	}
}

func TestSummaryAccount(t *testing.T) {
	received := map[string]int{"a": 1, "b": 3, "d": 0}
	var s exampleutil.Summary
	s.Lost = 99 // recomputed
	s.Account([]string{"a", "b", "c", "d"}, func(id string) int { return received[id] }, func(id string) bool { return id == "c" })
	if s.Produced != 4 || s.DeliveredUnique != 2 || s.Duplicates != 2 || s.Lost != 1 {
		t.Errorf("produced %d, delivered %d, duplicates %d, lost %d; want 4, 2, 2, 1", s.Produced, s.DeliveredUnique, s.Duplicates, s.Lost)
	}
	s.Unsettled(3) // more queued than unaccounted: none lost
	if s.Queued != 3 || s.Lost != 0 {
		t.Errorf("queued %d, lost %d; want 3, 0", s.Queued, s.Lost)
	}
	s.Lost = 5
	s.Unsettled(2)
	if s.Queued != 2 || s.Lost != 3 {
		t.Errorf("queued %d, lost %d; want 2, 3", s.Queued, s.Lost)
	}
	s.Elapsed(time.Now().Add(-1540 * time.Millisecond))
	if s.ElapsedS != 1.5 {
		t.Errorf("elapsed %v, want 1.5", s.ElapsedS)
	}
	path := filepath.Join(t.TempDir(), "s.json")
	if err := exampleutil.WriteJSON(path, struct {
		exampleutil.Summary
		Extra int `json:"extra"`
	}{s, 7}); err != nil {
		t.Fatal(err)
	}
	if err := exampleutil.WriteJSON(filepath.Join(t.TempDir(), "no", "such", "dir.json"), s); err == nil {
		t.Error("write into a missing folder: no error")
	}
}

func TestFlagCheck(t *testing.T) {
	var c exampleutil.FlagCheck
	c.Duration("ok", time.Second, 0, time.Minute, true)
	c.Float("fine", 1, 0, 2, true, "")
	c.Int("good", 3, 1, 3)
	// A writable output file: a missing one is created empty, an existing
	// one is left as it is until the run writes it.
	dir := t.TempDir()
	fresh, kept := filepath.Join(dir, "new.json"), filepath.Join(dir, "old.json")
	if err := os.WriteFile(kept, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	c.OutputFile("summary", fresh)
	c.OutputFile("summary", kept)
	c.OutputFile("summary", "")
	if err := c.Err(); err != nil {
		t.Fatalf("in range: %v", err)
	}
	if b, err := os.ReadFile(fresh); err != nil || len(b) != 0 {
		t.Errorf("new output file: %q, %v; want created empty", b, err)
	}
	if b, err := os.ReadFile(kept); err != nil || string(b) != "old" {
		t.Errorf("existing output file: %q, %v; want unchanged", b, err)
	}
	c.Duration("produce-for", 0, 0, time.Minute, true)
	c.Float("rate", -5, 0, 5000, true, "messages/s")
	c.Int("vehicles", 0, 1, 16)
	c.Failf("-a and -b conflict")
	c.OutputFile("summary", filepath.Join(t.TempDir(), "no", "such", "dir.json"))
	msg := c.Err().Error()
	for _, want := range []string{
		"-summary: cannot write the output file",
		"-produce-for must be in (0s, 1m0s], got 0s",
		"-rate must be in (0, 5000] messages/s, got -5",
		"-vehicles must be in [1, 16], got 0",
		"-a and -b conflict",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("errors %q lack %q", msg, want)
		}
	}
}
