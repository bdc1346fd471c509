package retryqueue_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/floodgate-go/floodgate/internal/natstest"
	"github.com/floodgate-go/floodgate/retryqueue"
)

// A dead letter carries its full, bounded history: each diversion and the
// dead-lettering, with reasons, attempts and errors; older entries beyond
// MaxHistory are dropped and counted.
func TestHistoryIsKeptAndBounded(t *testing.T) {
	clock := newFakeClock()
	e := newEnv(t, natstest.URL(t), func(c *retryqueue.Config) { c.Clock = clock; c.MaxAttempts = 4; c.MaxHistory = 4 })
	msg := message.NewMessage("uuid-h", []byte("p"))
	steps := []struct {
		reason retryqueue.Reason
		err    error
	}{
		{retryqueue.ReasonOpen, errOpen},
		{retryqueue.ReasonFailure, errors.New("HTTP 503 one")},
		{retryqueue.ReasonProbeLimit, errOpen},
		{retryqueue.ReasonFailure, errors.New("HTTP 503 two\nsecond line")},
		{retryqueue.ReasonFailure, errors.New("HTTP 503 three")},
		{retryqueue.ReasonFailure, errors.New("HTTP 503 four")}, // attempt 4: dead
	}
	for i, s := range steps {
		if err := e.q.Divert(context.Background(), msg, s.reason, s.err); err != nil {
			t.Fatal(err)
		}
		clock.Advance(time.Second)
		if i < len(steps)-1 {
			msg = last(t, e.js, e.q.RetryTopic())
		}
	}
	dead := last(t, e.js, e.q.DeadLetterTopic())
	h, err := retryqueue.History(dead)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, en := range h {
		got = append(got, fmt.Sprintf("%s/%s/%d/%s", en.Event, en.Reason, en.Attempt, en.Error))
	}
	want := []string{
		"diverted/probe-limit/1/",
		"diverted/failure/2/HTTP 503 two\nsecond line",
		"diverted/failure/3/HTTP 503 three",
		"dead-lettered/max-attempts/4/HTTP 503 four",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("history\n got %q\nwant %q", got, want)
	}
	if d := dead.Metadata.Get(retryqueue.MetaHistoryDropped); d != "2" {
		t.Fatalf("history_dropped = %q, want 2", d)
	}
	if !h[0].At.Equal(clock.Now().Add(-4 * time.Second)) {
		t.Errorf("first kept entry at %s, want %s", h[0].At, clock.Now().Add(-4*time.Second))
	}
	if _, bad := e.q.Malformed(dead); bad {
		t.Fatal("a dead letter with history must not be malformed")
	}
	dead.Metadata.Set(retryqueue.MetaHistory, "[{not json")
	if why, bad := e.q.Malformed(dead); !bad || !strings.Contains(why, retryqueue.MetaHistory) {
		t.Fatalf("garbled history: Malformed = %q, %v", why, bad)
	}
}

// Replay selects dead letters by original topic and by age, moves them back
// to the retry queue with fresh attempt and age, and removes them from the
// dead letters only after the retry copy is stored; a dry run moves nothing.
func TestReplaySelectsAndMoves(t *testing.T) {
	clock := newFakeClock()
	e := newEnv(t, natstest.URL(t), func(c *retryqueue.Config) { c.Clock = clock })
	ctx := testCtx(t)
	dead := func(id, topic string) {
		m := message.NewMessage(id, []byte("payload "+id))
		m.Metadata.Set(retryqueue.MetaOriginalTopic, topic)
		m.Metadata.Set(retryqueue.MetaAttempt, "7")
		if err := e.q.DeadLetter(ctx, m, retryqueue.DeadReasonPermanent, errors.New("MDN: processed/error")); err != nil {
			t.Fatal(err)
		}
	}
	dead("a1", "orders")
	dead("b1", "invoices")
	clock.Advance(2 * time.Hour)
	dead("a2", "orders")
	dead("b2", "invoices")

	res, err := e.q.Replay(ctx, e.js, retryqueue.ReplayFilter{DryRun: true})
	if err != nil || res.Selected != 4 || res.Replayed != 0 || !slices.Equal(res.UUIDs, []string{"a1", "b1", "a2", "b2"}) {
		t.Fatalf("dry run = %+v, %v", res, err)
	}
	if n := streamCount(t, e.js, e.q.DeadLetterTopic()); n != 4 {
		t.Fatalf("dry run left %d dead letters, want 4", n)
	}

	res, err = e.q.Replay(ctx, e.js, retryqueue.ReplayFilter{OriginalTopic: "orders", OlderThan: time.Hour})
	if err != nil || res.Replayed != 1 || !slices.Equal(res.UUIDs, []string{"a1"}) || res.Scanned != 4 {
		t.Fatalf("orders older than 1h = %+v, %v; want a1 only", res, err)
	}
	res, err = e.q.Replay(ctx, e.js, retryqueue.ReplayFilter{OriginalTopic: "invoices"})
	if err != nil || res.Replayed != 2 || !slices.Equal(res.UUIDs, []string{"b1", "b2"}) {
		t.Fatalf("invoices = %+v, %v; want b1, b2", res, err)
	}
	left := streamMsgs(t, e.js, e.q.DeadLetterTopic())
	if len(left) != 1 || left[0].UUID != "a2" {
		t.Fatalf("dead letters left %v, want a2", left)
	}
	retry := streamMsgs(t, e.js, e.q.RetryTopic())
	var ids []string
	for _, m := range retry {
		ids = append(ids, m.UUID)
		wantMeta(t, m, map[string]string{
			retryqueue.MetaAttempt:         "0",
			retryqueue.MetaReason:          "replay",
			retryqueue.MetaReplays:         "1",
			retryqueue.MetaDeadReason:      "<absent>",
			retryqueue.MetaDeadAt:          "<absent>",
			retryqueue.MetaNotBefore:       "<absent>",
			retryqueue.MetaFirstDivertedAt: clock.Now().UTC().Format(retryqueue.TimeFormat),
		})
		if string(m.Payload) != "payload "+m.UUID {
			t.Errorf("%s payload %q", m.UUID, m.Payload)
		}
		h, err := retryqueue.History(m)
		if err != nil || len(h) != 2 || h[0].Event != retryqueue.EventDeadLettered || h[1].Event != retryqueue.EventReplayed {
			t.Errorf("%s history %+v, %v; want dead-lettered then replayed", m.UUID, h, err)
		}
	}
	if !slices.Equal(ids, []string{"a1", "b1", "b2"}) {
		t.Fatalf("retry stream %v, want a1 b1 b2", ids)
	}

	res, err = e.q.Replay(ctx, e.js, retryqueue.ReplayFilter{})
	if err != nil || res.Replayed != 1 || streamCount(t, e.js, e.q.DeadLetterTopic()) != 0 {
		t.Fatalf("replay all = %+v, %v", res, err)
	}
	res, err = e.q.Replay(ctx, e.js, retryqueue.ReplayFilter{})
	if err != nil || res.Scanned != 0 {
		t.Fatalf("replay of empty dead letters = %+v, %v", res, err)
	}
	if _, err := e.q.Replay(ctx, e.js, retryqueue.ReplayFilter{OlderThan: -time.Second}); !errors.Is(err, retryqueue.ErrInvalidConfig) {
		t.Fatalf("negative OlderThan: %v", err)
	}
}

// A replay whose retry publish is not confirmed keeps the dead letter.
func TestReplayKeepsDeadLetterWhenPublishFails(t *testing.T) {
	srv := natstest.Server(t)
	e := newEnv(t, srv.ClientURL(), func(c *retryqueue.Config) { c.PublishTimeout = 300 * time.Millisecond })
	ctx := testCtx(t)
	if err := e.q.DeadLetter(ctx, message.NewMessage("d1", []byte("p")), retryqueue.DeadReasonPermanent, nil); err != nil {
		t.Fatal(err)
	}
	if err := e.js.DeleteStream(ctx, e.q.RetryTopic()); err != nil {
		t.Fatal(err)
	}
	res, err := e.q.Replay(ctx, e.js, retryqueue.ReplayFilter{})
	if !errors.Is(err, retryqueue.ErrPublish) || res.Replayed != 0 {
		t.Fatalf("replay without retry stream = %+v, %v; want ErrPublish", res, err)
	}
	if n := streamCount(t, e.js, e.q.DeadLetterTopic()); n != 1 {
		t.Fatalf("dead letters = %d, want 1 kept", n)
	}
}

// Limit stops a replay, and a dry run, after that many selected dead
// letters: the rest stay in the dead-letter stream untouched, in order, and
// a later replay picks them up.
func TestReplayHonoursLimit(t *testing.T) {
	e := newEnv(t, natstest.URL(t), nil)
	ctx := testCtx(t)
	var all []string
	for i := range 8 {
		id := fmt.Sprintf("d%d", i)
		all = append(all, id)
		m := message.NewMessage(id, []byte("p"))
		m.Metadata.Set(retryqueue.MetaOriginalTopic, "orders")
		if err := e.q.DeadLetter(ctx, m, retryqueue.DeadReasonPermanent, nil); err != nil {
			t.Fatal(err)
		}
	}
	ids := func(ms []*message.Message) []string {
		var out []string
		for _, m := range ms {
			out = append(out, m.UUID)
		}
		return out
	}

	res, err := e.q.Replay(ctx, e.js, retryqueue.ReplayFilter{Limit: 3, DryRun: true})
	if err != nil || res.Selected != 3 || res.Replayed != 0 || !slices.Equal(res.UUIDs, all[:3]) {
		t.Fatalf("dry run with Limit 3 = %+v, %v; want d0 d1 d2 selected, none replayed", res, err)
	}
	if got := ids(streamMsgs(t, e.js, e.q.DeadLetterTopic())); !slices.Equal(got, all) {
		t.Fatalf("after dry run dead letters %v, want all 8", got)
	}

	res, err = e.q.Replay(ctx, e.js, retryqueue.ReplayFilter{Limit: 1})
	if err != nil || res.Selected != 1 || res.Replayed != 1 || res.Scanned != 1 || !slices.Equal(res.UUIDs, all[:1]) {
		t.Fatalf("replay with Limit 1 = %+v, %v; want d0 only", res, err)
	}
	if got := ids(streamMsgs(t, e.js, e.q.RetryTopic())); !slices.Equal(got, all[:1]) {
		t.Fatalf("retry stream %v, want d0", got)
	}
	dead := streamMsgs(t, e.js, e.q.DeadLetterTopic())
	if got := ids(dead); !slices.Equal(got, all[1:]) {
		t.Fatalf("dead letters %v, want d1..d7 kept", got)
	}
	for _, m := range dead {
		wantMeta(t, m, map[string]string{
			retryqueue.MetaReplays:    "<absent>",
			retryqueue.MetaDeadReason: string(retryqueue.DeadReasonPermanent),
		})
	}

	res, err = e.q.Replay(ctx, e.js, retryqueue.ReplayFilter{OriginalTopic: "orders", Limit: 4})
	if err != nil || res.Replayed != 4 || !slices.Equal(res.UUIDs, all[1:5]) {
		t.Fatalf("replay with Limit 4 = %+v, %v; want d1..d4", res, err)
	}
	if got := ids(streamMsgs(t, e.js, e.q.DeadLetterTopic())); !slices.Equal(got, all[5:]) {
		t.Fatalf("dead letters %v, want d5..d7 kept", got)
	}
	if _, err := e.q.Replay(ctx, e.js, retryqueue.ReplayFilter{Limit: -1}); !errors.Is(err, retryqueue.ErrInvalidConfig) {
		t.Fatalf("negative Limit: %v", err)
	}
}

// MatchReason selects dead letters by their dead reason; the others stay.
func TestReplayMatchesReason(t *testing.T) {
	e := newEnv(t, natstest.URL(t), nil)
	ctx := testCtx(t)
	for id, reason := range map[string]string{"p1": retryqueue.DeadReasonPermanent, "m1": retryqueue.DeadReasonMaxAttempts, "p2": retryqueue.DeadReasonPermanent} {
		if err := e.q.DeadLetter(ctx, message.NewMessage(id, []byte(id)), reason, errors.New("HTTP 400")); err != nil {
			t.Fatal(err)
		}
	}
	var asked []string
	res, err := e.q.Replay(ctx, e.js, retryqueue.ReplayFilter{MatchReason: func(r string) bool {
		asked = append(asked, r)
		return r == retryqueue.DeadReasonMaxAttempts
	}})
	if err != nil || res.Replayed != 1 || !slices.Equal(res.UUIDs, []string{"m1"}) {
		t.Fatalf("replay of max-attempts = %+v, %v; want m1 only", res, err)
	}
	if len(asked) != 3 {
		t.Errorf("MatchReason called %d times (%q), want once per dead letter", len(asked), asked)
	}
	left := streamMsgs(t, e.js, e.q.DeadLetterTopic())
	if len(left) != 2 {
		t.Fatalf("%d dead letters left, want the 2 permanent ones", len(left))
	}
}
