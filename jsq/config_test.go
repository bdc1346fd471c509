package jsq_test

import (
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/internal/configtest"
	"github.com/floodgate-go/floodgate/jsq"
)

// PublisherConfig.Validate checks the config as [jsq.NewPublisher] uses it,
// defaults applied to its zero fields, and leaves it as it is.
func TestPublisherConfigValidate(t *testing.T) {
	configtest.Run(t, jsq.ErrInvalidConfig, []configtest.Case[jsq.PublisherConfig]{
		{Name: "minimal", Cfg: jsq.PublisherConfig{URL: "nats://127.0.0.1:4222"}},
		{Name: "URL", Cfg: jsq.PublisherConfig{}, Want: "URL, Conn or JetStream is required"},
		{Name: "PublishTimeout", Cfg: jsq.PublisherConfig{URL: "nats://127.0.0.1:4222", PublishTimeout: -time.Second}, Want: "PublishTimeout must be > 0, got -1s"},
	}, &configtest.Options[jsq.PublisherConfig]{
		// NewPublisher fails the same way, before connecting.
		New: func(c jsq.PublisherConfig) error { _, err := jsq.NewPublisher(c); return err },
	})
}

// Regression (fresh-user trial): SubscriberConfig{URL: …}.Validate()
// failed with "AckWait must be >= 1s, got 0s" although 0 means the 30s
// default. Validate checks the config as [jsq.NewSubscriber] uses it,
// defaults applied, and leaves it as it is.
func TestSubscriberConfigValidate(t *testing.T) {
	const url = "nats://127.0.0.1:4222"
	// The func fields (ConsumerName, NakDelay) and Logger stay nil, so the
	// default snapshot, the config itself, compares.
	configtest.Run(t, jsq.ErrInvalidConfig, []configtest.Case[jsq.SubscriberConfig]{
		{Name: "minimal", Cfg: jsq.SubscriberConfig{URL: url}},
		{Name: "URL", Cfg: jsq.SubscriberConfig{}, Want: "URL, Conn or JetStream is required"},
		{Name: "AckWait", Cfg: jsq.SubscriberConfig{URL: url, AckWait: 500 * time.Millisecond}, Want: "AckWait must be >= 1s, got 500ms"},
		{Name: "Concurrency", Cfg: jsq.SubscriberConfig{URL: url, Concurrency: 1025}, Want: "Concurrency must be in 1..1024, got 1025"},
		{Name: "Prefetch", Cfg: jsq.SubscriberConfig{URL: url, Prefetch: 4097}, Want: "Prefetch must be in 1..4096, or negative for none, got 4097"},
		{Name: "Prefetch none", Cfg: jsq.SubscriberConfig{URL: url, Prefetch: -1}},
		{Name: "Prefetch finite MaxDeliver", Cfg: jsq.SubscriberConfig{URL: url, Prefetch: 4, MaxDeliver: 5, AllowFiniteMaxDeliver: true}, Want: "Prefetch 4 with a finite MaxDeliver 5"},
		{Name: "finite MaxDeliver, default Prefetch", Cfg: jsq.SubscriberConfig{URL: url, MaxDeliver: 5, AllowFiniteMaxDeliver: true}},
		{Name: "MaxAckPending", Cfg: jsq.SubscriberConfig{URL: url, MaxAckPending: -2}, Want: "MaxAckPending must be -1 or >= 1, got -2"},
		{Name: "CloseGrace", Cfg: jsq.SubscriberConfig{URL: url, CloseGrace: time.Minute}, Want: "CloseGrace must be < AckWait (30s), got 1m0s"},
		{Name: "FetchWait", Cfg: jsq.SubscriberConfig{URL: url, FetchWait: time.Millisecond}, Want: "FetchWait must be in 100ms..AckWait (30s), got 1ms"},
		// Issue 12: a finite MaxDeliver lets the server drop a message
		// silently, so it needs the explicit option.
		{Name: "MaxDeliver finite", Cfg: jsq.SubscriberConfig{URL: url, MaxDeliver: 5}, Want: "MaxDeliver 5 is finite"},
		{Name: "MaxDeliver finite allowed", Cfg: jsq.SubscriberConfig{URL: url, MaxDeliver: 5, AllowFiniteMaxDeliver: true}},
		{Name: "MaxDeliver unlimited", Cfg: jsq.SubscriberConfig{URL: url, MaxDeliver: -1}},
		{Name: "MaxDeliver range", Cfg: jsq.SubscriberConfig{URL: url, MaxDeliver: -2, AllowFiniteMaxDeliver: true}, Want: "MaxDeliver must be -1, or >= 1 with AllowFiniteMaxDeliver, got -2"},
	}, &configtest.Options[jsq.SubscriberConfig]{
		// NewSubscriber fails the same way, before connecting.
		New: func(c jsq.SubscriberConfig) error { _, err := jsq.NewSubscriber(c); return err },
	})
}
