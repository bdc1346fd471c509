package retryqueue_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/floodgate-go/floodgate/internal/configtest"
	"github.com/floodgate-go/floodgate/internal/natstest"
	"github.com/floodgate-go/floodgate/jsq"
	"github.com/floodgate-go/floodgate/retryqueue"
)

// Regression (fresh-user trial): Validate rejected zero values that are
// documented defaults (Config{Publisher: p}.Validate() failed on
// MaxAttempts, DrainerConfig's on Rate). Validate checks the config as the
// constructor uses it, defaults applied, and leaves it as it is.
func TestValidateAppliesDefaults(t *testing.T) {
	url := natstest.URL(t)
	js := natstest.JetStream(t, natstest.Conn(t, url))
	pub, err := jsq.NewPublisher(jsq.PublisherConfig{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pub.Close() })
	q, err := retryqueue.New(retryqueue.Config{Publisher: pub, Source: "orders"})
	if err != nil {
		t.Fatal(err)
	}
	handler := func(*message.Message) ([]*message.Message, error) { return nil, nil }
	gate := retryqueue.GateFunc(func() int { return 1 })

	t.Run("Config", func(t *testing.T) {
		minimal := retryqueue.Config{Publisher: pub, Source: "orders"}
		with := func(mod func(*retryqueue.Config)) retryqueue.Config { return configtest.With(minimal, mod) }
		configtest.Run(t, retryqueue.ErrInvalidConfig, []configtest.Case[retryqueue.Config]{
			{Name: "minimal", Cfg: minimal},
			{Name: "Service", Cfg: with(func(c *retryqueue.Config) { c.Source = "" }), Want: "Service, or Source (from which it is derived), is required"},
			{Name: "Service", Cfg: with(func(c *retryqueue.Config) { c.Service = "a\nb" }), Want: "Service \"a\\nb\" must be printable"},
			{Name: "JetStream", Cfg: with(func(c *retryqueue.Config) { c.Publisher = nopPublisher{} }), Want: "JetStream is required"},
			{Name: "MaxAttempts", Cfg: with(func(c *retryqueue.Config) { c.MaxAttempts = -1 }), Want: "MaxAttempts must be >= 1"},
			{Name: "PublishTimeout", Cfg: with(func(c *retryqueue.Config) { c.PublishTimeout = -time.Second }), Want: "PublishTimeout must be > 0"},
			{Name: "MaxAge", Cfg: with(func(c *retryqueue.Config) { c.MaxAge = -time.Hour }), Want: "MaxAge must be > 0"},
			{Name: "MaxRetryAfter", Cfg: with(func(c *retryqueue.Config) { c.MaxRetryAfter = -time.Hour }), Want: "MaxRetryAfter must be in (0, MaxAge"},
			{Name: "MaxRetryAfter", Cfg: with(func(c *retryqueue.Config) { c.MaxAge = time.Hour; c.MaxRetryAfter = 2 * time.Hour }), Want: "MaxRetryAfter must be in (0, MaxAge 1h0m0s], got 2h0m0s"},
			{Name: "MaxErrorLen", Cfg: with(func(c *retryqueue.Config) { c.MaxErrorLen = 15 }), Want: "MaxErrorLen must be >= 16"},
			{Name: "MaxHistory", Cfg: with(func(c *retryqueue.Config) { c.MaxHistory = 101 }), Want: "MaxHistory must be in 1..100"},
			{Name: "OrderingBuckets", Cfg: with(func(c *retryqueue.Config) { c.OrderingBuckets = -1 }), Want: "OrderingBuckets must be in 1..67108864 (2^26), got -1"},
			{Name: "OrderingBuckets", Cfg: with(func(c *retryqueue.Config) { c.OrderingBuckets = 1<<26 + 1 }), Want: "OrderingBuckets must be in 1..67108864"},
			{Name: "RetryTopic", Cfg: with(func(c *retryqueue.Config) { c.RetryTopic = "a.b" }), Want: "RetryTopic: "},
			{Name: "DeadLetterTopic", Cfg: with(func(c *retryqueue.Config) { c.DeadLetterTopic = "a b" }), Want: "DeadLetterTopic: "},
			{Name: "topics equal to a default", Cfg: with(func(c *retryqueue.Config) { c.RetryTopic = "floodgate_dead" }), Want: "RetryTopic and DeadLetterTopic must differ"},
		}, &configtest.Options[retryqueue.Config]{
			New:      func(c retryqueue.Config) error { _, err := retryqueue.New(c); return err },
			NewValid: true,
		})
	})

	t.Run("DrainerConfig", func(t *testing.T) {
		minimal := retryqueue.DrainerConfig{JetStream: js, Queue: q, Handler: handler, Gate: gate}
		with := func(mod func(*retryqueue.DrainerConfig)) retryqueue.DrainerConfig {
			return configtest.With(minimal, mod)
		}
		configtest.Run(t, retryqueue.ErrInvalidConfig, []configtest.Case[retryqueue.DrainerConfig]{
			{Name: "minimal", Cfg: minimal},
			{Name: "Rate", Cfg: with(func(c *retryqueue.DrainerConfig) { c.Rate = -1 }), Want: "Rate must be > 0"},
			{Name: "MinRate", Cfg: with(func(c *retryqueue.DrainerConfig) { c.Rate, c.MinRate = 5, 6 }), Want: "MinRate must be in (0, Rate=5]"},
			{Name: "MaxInFlight", Cfg: with(func(c *retryqueue.DrainerConfig) { c.MaxInFlight = 10001 }), Want: "MaxInFlight must be in 1..10000"},
			{Name: "AdjustInterval", Cfg: with(func(c *retryqueue.DrainerConfig) { c.AdjustInterval = time.Millisecond }), Want: "AdjustInterval must be >= 10ms"},
			{Name: "Decrease", Cfg: with(func(c *retryqueue.DrainerConfig) { c.Decrease = 1 }), Want: "Decrease must be in (0, 1)"},
			{Name: "AckWait", Cfg: with(func(c *retryqueue.DrainerConfig) { c.AckWait = 500 * time.Millisecond }), Want: "AckWait must be >= 1s"},
			{Name: "HandlerTimeout", Cfg: with(func(c *retryqueue.DrainerConfig) { c.HandlerTimeout = time.Minute }), Want: "HandlerTimeout must be > 0 and < AckWait (30s)"},
			{Name: "PollInterval", Cfg: with(func(c *retryqueue.DrainerConfig) { c.PollInterval = -time.Second }), Want: "PollInterval must be > 0"},
			{Name: "Consumer", Cfg: with(func(c *retryqueue.DrainerConfig) { c.Consumer = "a.b" }), Want: "Consumer: "},
		}, &configtest.Options[retryqueue.DrainerConfig]{
			// The func fields (Gate is a GateFunc), which reflect.DeepEqual
			// cannot compare, stand in as whether they are set.
			Snapshot: func(c retryqueue.DrainerConfig) any {
				type snapshot struct {
					Cfg                     retryqueue.DrainerConfig
					Handler, Gate, NakDelay bool
				}
				s := snapshot{c, c.Handler != nil, c.Gate != nil, c.NakDelay != nil}
				s.Cfg.Handler, s.Cfg.Gate, s.Cfg.NakDelay = nil, nil, nil
				return s
			},
			New:      func(c retryqueue.DrainerConfig) error { _, err := retryqueue.NewDrainer(c); return err },
			NewValid: true,
		})
	})

	// Regression (fresh-user trial): Provision's error for a bad topic did
	// not name the field.
	t.Run("Provision", func(t *testing.T) {
		for _, tc := range []struct {
			cfg   retryqueue.Config
			field string
		}{
			{retryqueue.Config{RetryTopic: "a.b"}, "RetryTopic: "},
			{retryqueue.Config{DeadLetterTopic: "a*b"}, "DeadLetterTopic: "},
			{retryqueue.Config{RetryTopic: "floodgate_dead"}, "RetryTopic and DeadLetterTopic must differ"},
		} {
			err := retryqueue.Provision(context.Background(), js, tc.cfg)
			if !errors.Is(err, retryqueue.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.field) {
				t.Errorf("Provision(%+v) = %v, want ErrInvalidConfig naming %q", tc.cfg, err, tc.field)
			}
		}
	})
}
