package main

import (
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/floodgate-go/floodgate/internal/natsconn"
)

// connect opens a connection with o and extra (no reconnection: a command
// fails rather than waits) and its JetStream context. The caller closes
// the connection. The error names the server with its user information
// redacted.
func connect(o natsconn.Options, extra ...nats.Option) (*nats.Conn, jetstream.JetStream, error) {
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
