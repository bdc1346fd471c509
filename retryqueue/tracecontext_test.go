package retryqueue_test

import (
	"errors"
	"testing"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/floodgate-go/floodgate/internal/natstest"
	"github.com/floodgate-go/floodgate/retryqueue"
)

// W3C trace context (traceparent, tracestate), as Watermill users propagate
// it in message metadata, survives diversion, dead-lettering and replay, so
// a trace follows an order through an outage.
func TestTraceContextSurvivesDiversionDeadLetterAndReplay(t *testing.T) {
	e := newEnv(t, natstest.URL(t), nil)
	ctx := testCtx(t)
	trace := map[string]string{
		"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"tracestate":  "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7",
	}
	m := message.NewMessage("order-1", []byte("ISA*00*..."))
	for k, v := range trace {
		m.Metadata.Set(k, v)
	}
	if err := e.q.Divert(ctx, m, retryqueue.ReasonFailure, errors.New("HTTP 503")); err != nil {
		t.Fatal(err)
	}
	diverted := last(t, e.js, e.q.RetryTopic())
	wantMeta(t, diverted, trace)

	if err := e.q.DeadLetter(ctx, diverted, retryqueue.DeadReasonPermanent, errors.New("MDN: processed/error")); err != nil {
		t.Fatal(err)
	}
	dead := last(t, e.js, e.q.DeadLetterTopic())
	wantMeta(t, dead, trace)

	res, err := e.q.Replay(ctx, e.js, retryqueue.ReplayFilter{})
	if err != nil || res.Replayed != 1 {
		t.Fatalf("replay = %+v, %v; want 1 replayed", res, err)
	}
	replayed := last(t, e.js, e.q.RetryTopic())
	if replayed.UUID != "order-1" {
		t.Fatalf("retry stream's last message is %s, want order-1", replayed.UUID)
	}
	wantMeta(t, replayed, trace)
}
