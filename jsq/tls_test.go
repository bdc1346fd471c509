package jsq_test

import (
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/nats-io/nats.go"

	"github.com/floodgate-go/floodgate/internal/natsserver"
	"github.com/floodgate-go/floodgate/internal/natstest"
	"github.com/floodgate-go/floodgate/internal/tlstest"
	"github.com/floodgate-go/floodgate/jsq"
)

// TestTLSConnectOptions: a publisher and a subscriber that connect by URL
// reach a server requiring TLS and a client certificate from a private CA
// with ConnectOptions (nats.RootCAs, nats.ClientCert), and a message goes
// through; without the client certificate NewPublisher fails.
func TestTLSConnectOptions(t *testing.T) {
	pki := tlstest.New(t, "jsq-ca")
	srv, err := natsserver.Start(natsserver.Options{TLS: pki.ServerConfig(true)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	f := pki.Files
	opts := []nats.Option{nats.RootCAs(f.CA), nats.ClientCert(f.ClientCert, f.ClientKey)}
	pub, err := jsq.NewPublisher(jsq.PublisherConfig{URL: srv.ClientURL(), ConnectOptions: opts})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	sub, err := jsq.NewSubscriber(jsq.SubscriberConfig{URL: srv.ClientURL(), ConnectOptions: opts})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	topic := natstest.Name(t, "tls")
	msgs, err := sub.Subscribe(t.Context(), topic)
	if err != nil {
		t.Fatal(err)
	}
	if err := pub.Publish(topic, message.NewMessage("tls-1", []byte("x"))); err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-msgs:
		if m.UUID != "tls-1" {
			t.Errorf("got %q", m.UUID)
		}
		m.Ack()
	case <-time.After(20 * time.Second): // hang guard
		t.Fatal("no message over TLS")
	}

	if p, err := jsq.NewPublisher(jsq.PublisherConfig{URL: srv.ClientURL(), ConnectOptions: []nats.Option{nats.RootCAs(f.CA)}}); err == nil {
		p.Close()
		t.Error("connected without a client certificate")
	}
}
