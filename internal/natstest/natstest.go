// Package natstest holds test helpers for code that talks to NATS JetStream:
// a server URL (an external server named by the NATS_URL environment
// variable, or an embedded one started for the test), connections closed at
// the end of the test, unique stream names, and a polling helper that waits
// for a condition with a deadline instead of sleeping a fixed time.
package natstest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/floodgate-go/floodgate/internal/natsserver"
	"github.com/floodgate-go/floodgate/jsq"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// EnvURL is the environment variable naming an external NATS server with
// JetStream that [URL] uses instead of starting an embedded one.
const EnvURL = "NATS_URL"

// URL returns the URL of a NATS server with JetStream for the test: the value
// of NATS_URL if set, otherwise an embedded server (file storage in a
// temporary directory) shut down when the test ends.
func URL(t testing.TB) string {
	t.Helper()
	if u := os.Getenv(EnvURL); u != "" {
		return u
	}
	return Server(t).ClientURL()
}

// Server starts an embedded NATS server with JetStream for tests that must
// control the server itself (stop, restart). It ignores NATS_URL. The server
// is shut down and its store removed when the test ends.
func Server(t testing.TB) *natsserver.Server {
	t.Helper()
	s, err := natsserver.Start(natsserver.Options{})
	if err != nil {
		t.Fatalf("natstest: start embedded NATS server: %v", err)
	}
	t.Cleanup(s.Shutdown)
	return s
}

// Conn connects to url and closes the connection when the test ends. The
// connection reconnects forever, waiting 50 ms between attempts, so it
// survives a server restart within the test.
func Conn(t testing.TB, url string) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(url,
		nats.MaxReconnects(-1),
		nats.ReconnectWait(50*time.Millisecond),
		nats.Name(t.Name()),
	)
	if err != nil {
		t.Fatalf("natstest: connect %s: %v", url, err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// JetStream returns a JetStream context on nc.
func JetStream(t testing.TB, nc *nats.Conn) jetstream.JetStream {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("natstest: jetstream: %v", err)
	}
	return js
}

var seq atomic.Uint64

// Name returns a name unique within the process, usable as a stream, subject,
// consumer or Watermill topic name: prefix, the test name and a counter, with
// every character outside [A-Za-z0-9_-] replaced by '_'. Tests use it so
// runs against a shared external server do not collide.
func Name(t testing.TB, prefix string) string {
	n := fmt.Sprintf("%s_%s_%d_%d", prefix, t.Name(), os.Getpid(), seq.Add(1))
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-':
			return r
		}
		return '_'
	}, n)
}

// Eventually polls cond every 10 ms until it returns true, and fails the
// test with msg if it has not within timeout. cond runs on the calling
// goroutine. msg is a format for args; pass a [Now] to show a value as
// it is when the test fails, not as it was at the call.
func Eventually(t testing.TB, timeout time.Duration, cond func() bool, msg string, args ...any) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("natstest: condition not met within %s: %s", timeout, fmt.Sprintf(msg, args...))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Finishes runs fn on a new goroutine and fails the test with msg if fn
// has not returned within guard. It is a hang guard, not a timing
// assertion: pick guard far above any healthy duration on a loaded machine
// and below the time fn would take if the rule under test were broken
// (for example, an hour-long fallback timeout). fn must not call t.Fatal.
func Finishes(t testing.TB, guard time.Duration, fn func(), msg string, args ...any) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); fn() }()
	select {
	case <-done:
	case <-time.After(guard):
		t.Fatalf("natstest: not finished within %s: %s", guard, fmt.Sprintf(msg, args...))
	}
}

// Now is a value read when it is formatted: an argument to [Eventually]'s
// message that shows the value at the deadline, not at the call.
type Now func() any

// Format formats f's current value with the verb and flags in use.
func (f Now) Format(st fmt.State, verb rune) {
	fmt.Fprintf(st, fmt.FormatString(st, verb), f())
}

// DeleteStreams deletes the named streams when the test ends (best effort),
// so tests against an external server leave nothing behind. Register it
// after [Conn] so it runs before the connection closes.
func DeleteStreams(t testing.TB, js jetstream.JetStream, names ...string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		for _, n := range names {
			_ = js.DeleteStream(ctx, n)
		}
	})
}

// ReadGuard is the hang guard of each JetStream request [StreamMsgs] and
// [StreamCount] make: far above any healthy round trip on a loaded machine
// (CI runs the suite under -race on 2 shared cores), so reaching it means a
// request hung, never that the machine was slow.
const ReadGuard = time.Minute

// StreamMsgs reads every message stored in stream, in order, with direct
// gets (a work-queue stream admits no second consumer), decoded as the
// floodgate publishers encode them. It fails the test on any error. Each
// request has its own [ReadGuard]: a stream of thousands of messages takes
// as many round trips, and no deadline spans them all.
func StreamMsgs(t testing.TB, js jetstream.JetStream, stream string) []*message.Message {
	t.Helper()
	s, info := streamInfo(t, js, stream)
	var out []*message.Message
	if info.State.Msgs == 0 {
		return nil
	}
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
		ctx, cancel := context.WithTimeout(context.Background(), ReadGuard)
		raw, err := s.GetMsg(ctx, seq)
		cancel()
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			t.Fatalf("natstest: stream %s seq %d: %v", stream, seq, err)
		}
		m := message.NewMessage(raw.Header.Get(jsq.UUIDHeader), raw.Data)
		for k, v := range raw.Header {
			if !jsq.Reserved(k) {
				m.Metadata.Set(k, v[0])
			}
		}
		out = append(out, m)
	}
	return out
}

// StreamCount returns how many messages stream stores: one request, so a
// poll can wait for a count before reading the messages with [StreamMsgs].
// It fails the test on any error.
func StreamCount(t testing.TB, js jetstream.JetStream, stream string) uint64 {
	t.Helper()
	_, info := streamInfo(t, js, stream)
	return info.State.Msgs
}

// streamInfo looks stream up and reads its info, each request with its own
// [ReadGuard]; it fails the test on any error.
func streamInfo(t testing.TB, js jetstream.JetStream, stream string) (jetstream.Stream, *jetstream.StreamInfo) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), ReadGuard)
	defer cancel()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatalf("natstest: stream %s: %v", stream, err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatalf("natstest: stream %s info: %v", stream, err)
	}
	return s, info
}

// WireSize returns the size m counts against the server's max_payload: its
// data plus its header block as nats.go encodes it ("NATS/1.0\r\n", a
// "key: value\r\n" line per value, "\r\n"), for header values without
// line breaks.
func WireSize(m *nats.Msg) int {
	n := len(m.Data)
	if len(m.Header) == 0 {
		return n
	}
	n += len("NATS/1.0\r\n") + len("\r\n")
	for k, vs := range m.Header {
		for _, v := range vs {
			n += len(k) + len(": ") + len(v) + len("\r\n")
		}
	}
	return n
}

// Run runs run (a drainer's Run, say) in its own goroutine until the end of
// the test: at cleanup it cancels run's context, waits for run to return and
// reports a non-nil error.
func Run(t testing.TB, run func(context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}
