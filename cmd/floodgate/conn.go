package main

import (
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/floodgate-go/floodgate/internal/natsconn"
)

// connectTimeout bounds a command's connecting when its options do not;
// 0 is natsconn's default (5 s). The tests raise it: on a loaded machine
// an embedded server's first answer can take longer.
var connectTimeout time.Duration

// connect opens a connection with o and extra (no reconnection: a command
// fails rather than waits) and its JetStream context. The caller closes
// the connection. The error names the server with its user information
// redacted.
func connect(o natsconn.Options, extra ...nats.Option) (*nats.Conn, jetstream.JetStream, error) {
	if o.Timeout == 0 {
		o.Timeout = connectTimeout
	}
	nc, err := o.Connect("floodgate-cli", append([]nats.Option{nats.NoReconnect()}, extra...)...)
	if err != nil {
		return nil, nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return nc, js, nil
}
