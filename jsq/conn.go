package jsq

import (
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// validateConn checks the connection fields shared by [PublisherConfig] and
// [SubscriberConfig]: one of url, nc and js, and nc and js on the same
// connection when both are set.
func validateConn(url string, nc *nats.Conn, js jetstream.JetStream) error {
	switch {
	case url == "" && nc == nil && js == nil:
		return fmt.Errorf("%w: URL, Conn or JetStream is required", ErrInvalidConfig)
	case js != nil && js.Conn() == nil:
		return fmt.Errorf("%w: JetStream has no connection", ErrInvalidConfig)
	case js != nil && nc != nil && js.Conn() != nc:
		return fmt.Errorf("%w: Conn and JetStream.Conn() are different connections; set one, or both to the same", ErrInvalidConfig)
	}
	return nil
}

// openConn returns js and its connection, or a JetStream on nc, or on a
// connection of its own to url (own reports it: the caller closes it), in
// that order.
func openConn(url string, opts []nats.Option, nc *nats.Conn, js jetstream.JetStream) (*nats.Conn, jetstream.JetStream, bool, error) {
	if js != nil {
		return js.Conn(), js, false, nil
	}
	own := false
	if nc == nil {
		var err error
		if nc, err = Connect(url, opts...); err != nil {
			return nil, nil, false, err
		}
		own = true
	}
	js, err := jetstream.New(nc)
	if err != nil {
		if own {
			nc.Close()
		}
		return nil, nil, false, fmt.Errorf("jsq: jetstream: %w", err)
	}
	return nc, js, own, nil
}
