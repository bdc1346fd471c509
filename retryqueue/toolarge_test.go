package retryqueue_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/floodgate-go/floodgate/internal/natsserver"
	"github.com/floodgate-go/floodgate/internal/natstest"
	"github.com/floodgate-go/floodgate/jsq"
	"github.com/floodgate-go/floodgate/retryqueue"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// smallMaxPayload keeps the messages that fill max_payload small.
const smallMaxPayload = 16 << 10

// smallServer starts an embedded server with max_payload smallMaxPayload.
// It ignores NATS_URL: the test needs to set the server's max_payload.
func smallServer(t *testing.T) string {
	t.Helper()
	s, err := natsserver.Start(natsserver.Options{MaxPayload: smallMaxPayload})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Shutdown)
	return s.ClientURL()
}

// fillMaxPayload publishes to a new source stream a message of exactly the
// server's max_payload: user metadata of about hdrBytes, the rest payload.
// It checks that one byte more is refused, and returns the message as
// consumed from the stream, with its source topic.
func fillMaxPayload(t *testing.T, e env, hdrBytes int) (*message.Message, string) {
	t.Helper()
	src := natstest.Name(t, "src")
	if _, err := jsq.EnsureStream(testCtx(t), e.js, src); err != nil {
		t.Fatal(err)
	}
	natstest.DeleteStreams(t, e.js, src)
	m := message.NewMessage("uuid-too-large-0001", nil)
	for i := 0; natstest.WireSize(jsq.Marshal(src, m)) < hdrBytes; i++ {
		m.Metadata.Set(fmt.Sprintf("x-user-%03d", i), strings.Repeat(string(rune('a'+i%26)), 200))
	}
	max := int(e.nc.MaxPayload())
	room := max - natstest.WireSize(jsq.Marshal(src, m))
	if room < 0 {
		t.Fatalf("headers alone exceed max_payload %d", max)
	}
	m.Payload = make([]byte, room+1)
	for i := range m.Payload {
		m.Payload[i] = byte(i * 7)
	}
	if err := e.pub.Publish(src, m); !errors.Is(err, nats.ErrMaxPayload) {
		t.Fatalf("a message one byte over max_payload: err = %v, want nats.ErrMaxPayload", err)
	}
	m.Payload = m.Payload[:room]
	if got := natstest.WireSize(jsq.Marshal(src, m)); got != max {
		t.Fatalf("source message is %d bytes, want exactly max_payload %d", got, max)
	}
	if err := e.pub.Publish(src, m); err != nil {
		t.Fatalf("a message of exactly max_payload: %v", err)
	}
	got := last(t, e.js, src)
	if len(got.Metadata) != len(m.Metadata) {
		t.Fatalf("consumed %d metadata keys, want %d", len(got.Metadata), len(m.Metadata))
	}
	// As the middleware sees it when consumed from src (the router puts
	// the topic in the context; the queue takes it from there or here).
	got.Metadata.Set(retryqueue.MetaOriginalTopic, src)
	return got, src
}

// Regression (issue 12): a message that filled the source's max_payload
// could be neither diverted nor dead-lettered (even the compacted copy's
// floodgate metadata did not fit), so its source was nacked forever. It is
// now dead-lettered with reason too-large, its payload (and, when even that
// does not fit, its metadata) kept in the payload bucket, from which
// Restore reads it back byte for byte.
func TestDivertTooLargeDeadLettersWithPayloadInBucket(t *testing.T) {
	for _, tc := range []struct {
		name     string
		hdrBytes int // user metadata on the wire
		metaObj  bool
	}{
		{"large payload", 600, false},
		{"maximal headers", smallMaxPayload - 300, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, smallServer(t), nil)
			src, srcTopic := fillMaxPayload(t, e, tc.hdrBytes)
			dead, err := e.q.Route(context.Background(), src, retryqueue.ReasonFailure, errors.New("partner said 503"))
			if err != nil {
				t.Fatalf("Route: %v", err)
			}
			if dead != retryqueue.DeadReasonTooLarge {
				t.Fatalf("dead reason %q, want %q", dead, retryqueue.DeadReasonTooLarge)
			}
			if n := streamCount(t, e.js, e.q.RetryTopic()); n != 0 {
				t.Errorf("retry stream holds %d messages, want 0", n)
			}
			dl := last(t, e.js, e.q.DeadLetterTopic())
			wantMeta(t, dl, map[string]string{
				retryqueue.MetaDeadReason:     retryqueue.DeadReasonTooLarge,
				retryqueue.MetaOriginalTopic:  srcTopic,
				retryqueue.MetaAttempt:        "1",
				retryqueue.MetaPayloadBucket:  e.cfg.DeadLetterTopic + "_payloads",
				retryqueue.MetaPayloadSize:    fmt.Sprint(len(src.Payload)),
				retryqueue.MetaLastError:      "partner said 503",
				retryqueue.MetaMetadataObject: map[bool]string{true: dl.Metadata.Get(retryqueue.MetaPayloadObject) + ".metadata", false: "<absent>"}[tc.metaObj],
			})
			if len(dl.Payload) != 0 {
				t.Errorf("dead letter payload %d bytes, want 0 (kept in the bucket)", len(dl.Payload))
			}
			got, err := e.q.Restore(testCtx(t), dl)
			if err != nil {
				t.Fatalf("Restore: %v", err)
			}
			if !bytes.Equal(got.Payload, src.Payload) {
				t.Errorf("restored payload differs from the source's (%d vs %d bytes)", len(got.Payload), len(src.Payload))
			}
			for k, v := range src.Metadata {
				if got.Metadata.Get(k) != v && strings.HasPrefix(k, "x-user-") {
					t.Errorf("restored metadata %s = %q, want %q", k, truncated(got.Metadata.Get(k)), truncated(v))
				}
			}
			if got.Metadata.Get(retryqueue.MetaPayloadObject) != "" || got.Metadata.Get(retryqueue.MetaDeadReason) != retryqueue.DeadReasonTooLarge {
				t.Errorf("restored message keeps the reference or lost the dead reason: %v", got.Metadata)
			}
		})
	}
}

func truncated(s string) string {
	if len(s) > 20 {
		return s[:20] + "..."
	}
	return s
}

// A message dead-lettered for another reason that does not fit gets
// "too-large: " and that reason; a forged payload reference on the source
// is dropped, not trusted.
func TestDeadLetterTooLargeKeepsItsReason(t *testing.T) {
	e := newEnv(t, smallServer(t), nil)
	src, _ := fillMaxPayload(t, e, 600)
	src.Metadata.Set(retryqueue.MetaPayloadObject, "someone-elses-object")
	if err := e.q.DeadLetter(context.Background(), src, retryqueue.DeadReasonPermanent, errors.New("rejected")); err != nil {
		t.Fatal(err)
	}
	dl := last(t, e.js, e.q.DeadLetterTopic())
	if got := dl.Metadata.Get(retryqueue.MetaDeadReason); got != "too-large: permanent" {
		t.Errorf("dead reason %q, want %q", got, "too-large: permanent")
	}
	delete(src.Metadata, retryqueue.MetaPayloadObject)
	got, err := e.q.Restore(testCtx(t), dl)
	if err != nil || !bytes.Equal(got.Payload, src.Payload) {
		t.Fatalf("Restore: %v (payload equal: %v)", err, err == nil && bytes.Equal(got.Payload, src.Payload))
	}
}

// Replay sends a too-large dead letter back to its original topic, restored
// byte for byte, only when the operator names that topic; it removes the
// dead letter and its objects after the publish was confirmed, and says why
// it leaves one in place.
func TestReplayRestoresTooLargeToOriginalTopic(t *testing.T) {
	e := newEnv(t, smallServer(t), nil)
	src, srcTopic := fillMaxPayload(t, e, smallMaxPayload-300)
	if err := e.q.Divert(context.Background(), src, retryqueue.ReasonOpen, nil); err != nil {
		t.Fatal(err)
	}
	dl := last(t, e.js, e.q.DeadLetterTopic())

	res, err := e.q.Replay(testCtx(t), e.js, retryqueue.ReplayFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Replayed != 0 || len(res.Skipped) != 1 || !strings.Contains(res.Skipped[0].Why, srcTopic) {
		t.Fatalf("replay without a topic: %+v, want it skipped naming %s", res, srcTopic)
	}

	res, err = e.q.Replay(testCtx(t), e.js, retryqueue.ReplayFilter{OriginalTopic: srcTopic})
	if err != nil {
		t.Fatal(err)
	}
	if res.Replayed != 1 || res.Restored != 1 || len(res.Skipped) != 0 {
		t.Fatalf("replay to %s: %+v, want 1 replayed and restored", srcTopic, res)
	}
	if n := streamCount(t, e.js, e.q.DeadLetterTopic()); n != 0 {
		t.Errorf("dead letters left: %d, want 0", n)
	}
	ms := streamMsgs(t, e.js, srcTopic)
	if len(ms) != 2 {
		t.Fatalf("source holds %d messages, want the original and its replay", len(ms))
	}
	back := ms[1]
	if back.UUID != src.UUID || !bytes.Equal(back.Payload, src.Payload) || len(back.Metadata) != len(src.Metadata)-1 {
		t.Errorf("replayed message differs: uuid %s, %d bytes, %d keys; want %s, %d bytes, %d keys",
			back.UUID, len(back.Payload), len(back.Metadata), src.UUID, len(src.Payload), len(src.Metadata)-1)
	}
	for k, v := range src.Metadata {
		if back.Metadata.Get(k) != v && k != retryqueue.MetaOriginalTopic {
			t.Errorf("replayed metadata %s differs", k)
		}
	}
	if _, err := e.q.Restore(testCtx(t), dl); !errors.Is(err, retryqueue.ErrPayloadUnavailable) {
		t.Errorf("Restore after replay: %v, want ErrPayloadUnavailable (objects removed)", err)
	}
}

// Regression (issue 12): Provision accepted retry and dead-letter streams
// whose MaxMsgSize is below the source's, so a message the source holds
// could never be diverted.
func TestProvisionRefusesSmallMaxMsgSize(t *testing.T) {
	url := natstest.URL(t)
	js := natstest.JetStream(t, natstest.Conn(t, url))
	ctx := testCtx(t)
	cfg := retryqueue.Config{RetryTopic: natstest.Name(t, "retry"), DeadLetterTopic: natstest.Name(t, "dead")}
	src := natstest.Name(t, "src")
	natstest.DeleteStreams(t, js, cfg.RetryTopic, cfg.DeadLetterTopic, src, "OBJ_"+cfg.DeadLetterTopic+"_payloads")
	sc := jsq.StreamConfig(src)
	sc.MaxMsgSize = 4000
	if _, err := js.CreateStream(ctx, sc); err != nil {
		t.Fatal(err)
	}
	dc := retryqueue.DeadLetterStreamConfig(cfg.DeadLetterTopic)
	dc.MaxMsgSize = 3000
	if _, err := js.CreateStream(ctx, dc); err != nil {
		t.Fatal(err)
	}
	for _, sources := range [][]string{{src}, nil} {
		err := retryqueue.Provision(ctx, js, cfg, sources...)
		if !errors.Is(err, retryqueue.ErrStreamConfig) || !strings.Contains(err.Error(), cfg.DeadLetterTopic) || !strings.Contains(err.Error(), "MaxMsgSize") {
			t.Errorf("sources %v: Provision = %v, want ErrStreamConfig naming %s and MaxMsgSize", sources, err, cfg.DeadLetterTopic)
		}
	}
	dc.MaxMsgSize = 4000
	if _, err := js.UpdateStream(ctx, dc); err != nil {
		t.Fatal(err)
	}
	if err := retryqueue.Provision(ctx, js, cfg, src); err != nil {
		t.Errorf("dead-letter MaxMsgSize equal to the source's: %v", err)
	}
	if err := retryqueue.Provision(ctx, js, cfg); !errors.Is(err, retryqueue.ErrStreamConfig) {
		t.Errorf("no sources, MaxMsgSize below max_payload: %v, want ErrStreamConfig", err)
	}
	if _, err := js.ObjectStore(ctx, cfg.DeadLetterTopic+"_payloads"); err != nil {
		t.Errorf("payload bucket not created: %v", err)
	}
	if err := retryqueue.Provision(ctx, js, cfg, natstest.Name(t, "missing")); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Errorf("missing source: %v, want ErrStreamNotFound", err)
	}
}

// A retry stream whose MaxMsgSize (not the server's max_payload) refuses
// the copy counts as too large as well: the server's error is recognised.
func TestDivertTooLargeForStreamMaxMsgSize(t *testing.T) {
	e := newEnv(t, natstest.URL(t), nil)
	small := natstest.Name(t, "retry_small")
	sc := retryqueue.RetryStreamConfig(small)
	sc.MaxMsgSize = 2000
	if _, err := e.js.CreateStream(testCtx(t), sc); err != nil {
		t.Fatal(err)
	}
	natstest.DeleteStreams(t, e.js, small)
	q, err := retryqueue.New(retryqueue.Config{Publisher: e.pub, Service: "svc", RetryTopic: small, DeadLetterTopic: e.cfg.DeadLetterTopic})
	if err != nil {
		t.Fatal(err)
	}
	m := message.NewMessage("uuid-msg-size", bytes.Repeat([]byte("x"), 3000))
	dead, err := q.Route(context.Background(), m, retryqueue.ReasonOpen, nil)
	if err != nil || dead != retryqueue.DeadReasonTooLarge {
		t.Fatalf("Route = %q, %v; want %q", dead, err, retryqueue.DeadReasonTooLarge)
	}
	dl := last(t, e.js, e.cfg.DeadLetterTopic)
	if !bytes.Equal(dl.Payload, m.Payload) || dl.Metadata.Get(retryqueue.MetaPayloadObject) != "" {
		t.Errorf("dead letter: %d bytes, object %q; want the payload inline (the dead-letter stream holds it)", len(dl.Payload), dl.Metadata.Get(retryqueue.MetaPayloadObject))
	}
}
