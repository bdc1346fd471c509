package exampleutil

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/floodgate-go/floodgate/internal/natsconn"
	"github.com/floodgate-go/floodgate/internal/natsserver"
	"github.com/floodgate-go/floodgate/jsq"
)

// NATS is the JetStream an example runs on. Create it with [StartNATS] and
// release it with [NATS.Close]. Its methods are safe for concurrent use.
type NATS struct {
	// URL is the server's client URL(s): the external one StartNATS was
	// given (directly or by a context), or the embedded server's loopback
	// address. It may hold user information: print [natsconn.Redact](URL).
	URL string
	// ConnectOptions authenticate and set up TLS as the options given to
	// StartNATS did: pass them, with URL, to connections of one's own
	// (jsq.SubscriberConfig.ConnectOptions).
	ConnectOptions []nats.Option
	// Conn is a connection to URL, closed by Close.
	Conn *nats.Conn
	// JetStream is the JetStream context on Conn.
	JetStream jetstream.JetStream
	// Publisher publishes on Conn and returns only after JetStream confirmed
	// the publish (a PubAck), as the retry queue requires.
	Publisher *jsq.Publisher

	srv *natsserver.Server // nil when external

	mu      sync.Mutex
	streams []string // provisioned, deleted by Close on an external server
}

// StartNATS connects to the NATS server that o names (-server or
// $NATS_URL, or a context by -context or $NATS_CONTEXT; with credentials
// and TLS as the nats CLI takes them, [natsconn.Options]), or, when o names
// none ([natsconn.Options.Explicit]: the selected context is not used; its
// InboxPrefix is kept),
// starts an embedded JetStream server on a random loopback port with its
// store in a new temporary folder (removed by Close). The connection
// reconnects forever. The error names the server, its user information
// redacted.
func StartNATS(o natsconn.Options) (*NATS, error) {
	n := &NATS{}
	if !o.Explicit() {
		srv, err := natsserver.Start(natsserver.Options{})
		if err != nil {
			return nil, fmt.Errorf("start embedded NATS: %w", err)
		}
		n.srv = srv
		o = natsconn.Options{Server: srv.ClientURL(), InboxPrefix: o.InboxPrefix}
	}
	var err error
	if n.URL, n.ConnectOptions, err = o.Resolve(); err != nil {
		n.Close()
		return nil, err
	}
	if n.Conn, err = o.Connect("floodgate-example", nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond)); err != nil {
		n.Close()
		return nil, err
	}
	if n.JetStream, err = jetstream.New(n.Conn); err != nil {
		n.Close()
		return nil, err
	}
	if n.Publisher, err = jsq.NewPublisher(jsq.PublisherConfig{Conn: n.Conn}); err != nil {
		n.Close()
		return nil, err
	}
	return n, nil
}

// Embedded reports whether n runs its own server.
func (n *NATS) Embedded() bool { return n.srv != nil }

// EnsureStreams creates the stream of each topic ([jsq.StreamConfig]) if it
// is missing, and remembers it for Close.
func (n *NATS) EnsureStreams(ctx context.Context, topics ...string) error {
	for _, t := range topics {
		if _, err := jsq.EnsureStream(ctx, n.JetStream, t); err != nil {
			return fmt.Errorf("provision stream %s: %w", t, err)
		}
		n.track(t)
	}
	return nil
}

// Track remembers streams made elsewhere (the retry and dead-letter
// streams floodgate.New provisions) for Close to delete on an external
// server.
func (n *NATS) Track(streams ...string) { n.track(streams...) }

func (n *NATS) track(streams ...string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.streams = append(n.streams, streams...)
}

// Close deletes the streams it provisioned when the server is external,
// closes the publisher and the connection, and shuts an embedded server
// down, removing its store. It is safe to call more than once.
func (n *NATS) Close() {
	n.mu.Lock()
	streams := n.streams
	n.streams = nil
	n.mu.Unlock()
	if n.srv == nil && n.JetStream != nil {
		for _, s := range streams {
			if s != "" {
				_ = n.JetStream.DeleteStream(context.Background(), s)
			}
		}
	}
	if n.Publisher != nil {
		_ = n.Publisher.Close()
	}
	if n.Conn != nil {
		n.Conn.Close()
	}
	if n.srv != nil {
		n.srv.Shutdown()
	}
}

// PrintStreams writes the run's retry and dead-letter stream names to w,
// with the floodgate command that inspects them while the example runs
// (the names carry a per-run suffix; on an external server Close deletes
// the streams, with an embedded one they go with the server).
func PrintStreams(w io.Writer, n *NATS, retry, dead string) {
	fmt.Fprintf(w, "streams: retry %s, dead letters %s; while it runs: floodgate backlog -s %s -retry-topic %s -dead-topic %s\n",
		retry, dead, natsconn.Redact(n.URL), retry, dead)
}
