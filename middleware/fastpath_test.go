package middleware_test

import (
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/middleware"
	"github.com/floodgate-go/floodgate/partner"
	"github.com/floodgate-go/floodgate/retryqueue"
)

var eventSink string

// TestDeliveredAllocations: a healthy message (no floodgate metadata,
// closed breaker, delivered) costs no allocation with NoTimeout and one
// (the handler's context) at the default Timeout, in both modes, with an
// OnEvent that keeps the event's partner token as metrics would.
func TestDeliveredAllocations(t *testing.T) {
	e := newEnv(t, smallBreaker)
	b, err := breaker.New(breaker.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Stop)
	reg, err := partner.New(partner.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(reg.Close)
	onEvent := func(ev middleware.Event) { eventSink = ev.Partner }
	key := func(m *message.Message) string { return m.Metadata.Get("to") }
	msg := message.NewMessage("m1", []byte("x"))
	msg.Metadata.Set("to", "ACME")
	for _, tc := range []struct {
		name      string
		cfg       middleware.Config
		maxAllocs float64
	}{
		{"single, NoTimeout", middleware.Config{Breaker: b, Timeout: middleware.NoTimeout}, 0},
		{"single, default Timeout", middleware.Config{Breaker: b}, 1},
		{"partners, NoTimeout", middleware.Config{Partners: reg, PartnerKey: key, Timeout: middleware.NoTimeout}, 0},
		{"partners, default Timeout", middleware.Config{Partners: reg, PartnerKey: key}, 1},
	} {
		tc.cfg.Queue, tc.cfg.OnEvent = e.q, onEvent
		mw, err := middleware.New(tc.cfg)
		if err != nil {
			t.Fatal(err)
		}
		h := mw(ok)
		// Under -race a sync.Pool drops a quarter of what it is given, so a
		// lease's guard is sometimes allocated: 0.25 on average, which
		// AllocsPerRun's integer average does not show.
		n := testing.AllocsPerRun(1000, func() {
			if _, err := h(msg); err != nil {
				t.Fatal(err)
			}
		})
		if n > tc.maxAllocs {
			t.Errorf("%s: %v allocations per message, want <= %v", tc.name, n, tc.maxAllocs)
		}
	}
	if s := b.Snapshot(); s.State != breaker.StateClosed || s.Calls == 0 {
		t.Errorf("breaker %v with %d calls, want closed with calls", s.State, s.Calls)
	}
}

// TestNoTimeout: with NoTimeout the handler gets the message's own
// context, without a deadline; a probe's is marked, and the message gets
// its own back after the call.
func TestNoTimeout(t *testing.T) {
	e := tripped(t, smallBreaker)
	mw, err := middleware.New(middleware.Config{Breaker: e.b, Queue: e.q, Timeout: middleware.NoTimeout})
	if err != nil {
		t.Fatal(err)
	}
	type key struct{}
	own := context.WithValue(context.Background(), key{}, "own")
	var probe, deadline bool
	var got any
	seen := func(m *message.Message) ([]*message.Message, error) {
		_, deadline = m.Context().Deadline()
		probe, got = middleware.IsProbe(m.Context()), m.Context().Value(key{})
		return nil, nil
	}
	e.clock.Advance(2 * time.Second) // half-open: the next call is a probe
	msg := newMsg()
	msg.SetContext(own)
	if _, err := mw(seen)(msg); err != nil {
		t.Fatal(err)
	}
	if !probe || deadline || got != "own" || msg.Context() != own {
		t.Errorf("probe: IsProbe %v, deadline %v, value %v, context restored %v; want true, false, own, true",
			probe, deadline, got, msg.Context() == own)
	}
	for range smallBreaker.SuccessesToClose - 1 {
		if _, err := mw(seen)(msg); err != nil {
			t.Fatal(err)
		}
	}
	if s := e.b.State(); s != breaker.StateClosed {
		t.Fatalf("after %d good probes: %v, want closed", smallBreaker.SuccessesToClose, s)
	}
	if _, err := mw(seen)(msg); err != nil {
		t.Fatal(err)
	}
	if probe || deadline || got != "own" || msg.Context() != own {
		t.Errorf("closed: IsProbe %v, deadline %v, value %v; want false, false, own", probe, deadline, got)
	}
}

// TestDefaultTimeoutDeadline: at the default Timeout the handler's context
// has a deadline DefaultTimeout after admission, and is cancelled once the
// handler returns (a context kept by the handler is done).
func TestDefaultTimeoutDeadline(t *testing.T) {
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
	var kept context.Context
	var left time.Duration
	before := time.Now()
	_, err = mw(func(m *message.Message) ([]*message.Message, error) {
		kept = m.Context()
		d, _ := kept.Deadline()
		left = d.Sub(before)
		return nil, kept.Err()
	})(newMsg())
	if err != nil {
		t.Fatal(err)
	}
	if left < middleware.DefaultTimeout || left > middleware.DefaultTimeout+time.Hour {
		t.Errorf("deadline %v after the call began, want DefaultTimeout (%v) after admission", left, middleware.DefaultTimeout)
	}
	select {
	case <-kept.Done():
	default:
		t.Error("handler's context not done after the call")
	}
	if kept.Err() != context.Canceled {
		t.Errorf("handler's context after the call: %v, want Canceled", kept.Err())
	}
}

// TestMetadataCheckOnlyWithFloodgateKeys: a live message without
// floodgate metadata is not screened as malformed (a metadata key that
// cannot be a NATS header does not keep it from its partner), but one
// that fails is still dead-lettered as malformed by the diversion, never
// queued; a message with any floodgate key is checked before admission
// (TestMalformedMetadataIsDeadLettered).
func TestMetadataCheckOnlyWithFloodgateKeys(t *testing.T) {
	e := newEnv(t, smallBreaker)
	msg := message.NewMessage("no-floodgate-keys", []byte("x"))
	msg.Metadata.Set("bad key:", "v")
	called := false
	if _, err := e.mw(func(*message.Message) ([]*message.Message, error) { called = true; return nil, nil })(msg); err != nil {
		t.Fatal(err)
	}
	if ev := e.lastEvent(); !called || ev.Action != middleware.Delivered {
		t.Errorf("handler called %v, event %+v; want delivered", called, ev)
	}
	if _, err := e.mw(failWith(errPartner503))(msg); err != nil {
		t.Fatal(err)
	}
	if ev := e.lastEvent(); ev.Action != middleware.DeadLettered || ev.Reason != retryqueue.DeadReasonMalformed {
		t.Errorf("failed: event %v %q, want dead-lettered %q", ev.Action, ev.Reason, retryqueue.DeadReasonMalformed)
	}
	if n := len(e.retry()); n != 0 {
		t.Errorf("%d messages in the retry queue, want 0", n)
	}
}

// TestFloodgateMetadataKeysArePrefixed: the middleware screens a message
// for malformed metadata only when a key starts with "floodgate_", so
// every metadata key the retry queue reads must. It parses the
// retryqueue package for its Meta* constants, so a new one is checked too.
func TestFloodgateMetadataKeysArePrefixed(t *testing.T) {
	values := map[string]string{
		"MetaAttempt": retryqueue.MetaAttempt, "MetaReason": retryqueue.MetaReason,
		"MetaOriginalTopic": retryqueue.MetaOriginalTopic, "MetaFirstDivertedAt": retryqueue.MetaFirstDivertedAt,
		"MetaDivertedAt": retryqueue.MetaDivertedAt, "MetaDiversions": retryqueue.MetaDiversions,
		"MetaLastError": retryqueue.MetaLastError, "MetaNotBefore": retryqueue.MetaNotBefore,
		"MetaNotAttempted": retryqueue.MetaNotAttempted, "MetaDeadReason": retryqueue.MetaDeadReason,
		"MetaDeadAt": retryqueue.MetaDeadAt, "MetaDroppedKeys": retryqueue.MetaDroppedKeys,
		"MetaMalformed": retryqueue.MetaMalformed, "MetaHistory": retryqueue.MetaHistory,
		"MetaHistoryDropped": retryqueue.MetaHistoryDropped, "MetaReplays": retryqueue.MetaReplays,
		"MetaPayloadBucket": retryqueue.MetaPayloadBucket, "MetaPayloadObject": retryqueue.MetaPayloadObject,
		"MetaPayloadSize": retryqueue.MetaPayloadSize, "MetaMetadataObject": retryqueue.MetaMetadataObject,
		"MetaService": retryqueue.MetaService, "MetaPartner": retryqueue.MetaPartner,
		"MetaPartnerBase64": retryqueue.MetaPartnerBase64, "MetaPartnerToken": retryqueue.MetaPartnerToken,
	}
	files, err := filepath.Glob("../retryqueue/*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("retryqueue sources: %v, %v", files, err)
	}
	found := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			gd, isGen := d.(*ast.GenDecl)
			if !isGen || gd.Tok != token.CONST {
				continue
			}
			for _, s := range gd.Specs {
				for _, n := range s.(*ast.ValueSpec).Names {
					if !n.IsExported() || !strings.HasPrefix(n.Name, "Meta") {
						continue
					}
					found++
					v, listed := values[n.Name]
					if !listed {
						t.Errorf("retryqueue.%s is not listed here: add it", n.Name)
					} else if !strings.HasPrefix(v, "floodgate_") {
						t.Errorf("retryqueue.%s = %q does not start with floodgate_: the middleware would not screen it", n.Name, v)
					}
				}
			}
		}
	}
	if found != len(values) {
		t.Errorf("found %d Meta* constants in retryqueue, %d listed here", found, len(values))
	}
}
