// Command quickstart is the README's quick start: orders for three partners,
// each behind its own circuit breaker, with a durable retry queue on NATS
// JetStream. It needs a NATS server with JetStream (NATS_URL, default
// nats://127.0.0.1:4222) and runs until interrupted (SIGINT or SIGTERM).
package main

import (
	"cmp"
	"context"
	"fmt"
	"log"
	"os"
	"os/signal"
	"syscall"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/floodgate-go/floodgate"
	"github.com/floodgate-go/floodgate/jsq"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	url := cmp.Or(os.Getenv("NATS_URL"), nats.DefaultURL)
	nc, err := nats.Connect(url)
	check(err)
	js, err := jetstream.New(nc)
	check(err)
	sub, err := jsq.NewSubscriber(jsq.SubscriberConfig{Conn: nc, Concurrency: 4})
	check(err)
	router, err := message.NewRouter(message.RouterConfig{}, watermill.NopLogger{})
	check(err)

	// One call: a breaker per partner, the retry queue and its drain.
	_, err = floodgate.New(ctx, router, floodgate.Config{
		Name: "send-orders", Topic: "orders", Subscriber: sub, JetStream: js,
		PartnerKey: func(m *message.Message) string { return m.Metadata.Get("partner") },
		Deliver: func(m *message.Message) error {
			// Send the order to its partner here: AS2, a webhook, an API.
			fmt.Printf("delivered %s to %s\n", m.UUID, m.Metadata.Get("partner"))
			return nil
		},
	})
	check(err)

	pub, err := jsq.NewPublisher(jsq.PublisherConfig{Conn: nc})
	check(err)
	go func() {
		<-router.Running()
		for i, partner := range []string{"acme", "globex", "initech"} {
			m := message.NewMessage(fmt.Sprintf("order-%d", i), []byte("850"))
			m.Metadata.Set("partner", partner)
			check(pub.Publish("orders", m))
		}
	}()
	check(router.Run(ctx))
}

func check(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
