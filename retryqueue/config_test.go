package retryqueue_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

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
	q, err := retryqueue.New(retryqueue.Config{Publisher: pub})
	if err != nil {
		t.Fatal(err)
	}
	handler := func(*message.Message) ([]*message.Message, error) { return nil, nil }
	gate := retryqueue.GateFunc(func() int { return 1 })

	t.Run("Config", func(t *testing.T) {
		for _, tc := range []struct {
			name  string
			mod   func(*retryqueue.Config)
			field string // "" for valid
		}{
			{"minimal", func(*retryqueue.Config) {}, ""},
			{"MaxAttempts", func(c *retryqueue.Config) { c.MaxAttempts = -1 }, "MaxAttempts must be >= 1"},
			{"PublishTimeout", func(c *retryqueue.Config) { c.PublishTimeout = -time.Second }, "PublishTimeout must be > 0"},
			{"MaxAge", func(c *retryqueue.Config) { c.MaxAge = -time.Hour }, "MaxAge must be > 0"},
			{"MaxRetryAfter", func(c *retryqueue.Config) { c.MaxRetryAfter = -time.Hour }, "MaxRetryAfter must be in (0, MaxAge"},
			{"MaxRetryAfter", func(c *retryqueue.Config) { c.MaxAge = time.Hour; c.MaxRetryAfter = 2 * time.Hour }, "MaxRetryAfter must be in (0, MaxAge 1h0m0s], got 2h0m0s"},
			{"MaxErrorLen", func(c *retryqueue.Config) { c.MaxErrorLen = 15 }, "MaxErrorLen must be >= 16"},
			{"MaxHistory", func(c *retryqueue.Config) { c.MaxHistory = 101 }, "MaxHistory must be in 1..100"},
			{"RetryTopic", func(c *retryqueue.Config) { c.RetryTopic = "a.b" }, "RetryTopic: "},
			{"DeadLetterTopic", func(c *retryqueue.Config) { c.DeadLetterTopic = "a b" }, "DeadLetterTopic: "},
			{"topics equal to a default", func(c *retryqueue.Config) { c.RetryTopic = "floodgate_dead" }, "RetryTopic and DeadLetterTopic must differ"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				c := retryqueue.Config{Publisher: pub}
				tc.mod(&c)
				before := c
				err := c.Validate()
				if !reflect.DeepEqual(c, before) {
					t.Errorf("Validate modified the config: %+v, was %+v", c, before)
				}
				_, newErr := retryqueue.New(c)
				if tc.field == "" {
					if err != nil || newErr != nil {
						t.Fatalf("Validate = %v, New = %v; want both nil", err, newErr)
					}
					return
				}
				if !errors.Is(err, retryqueue.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.field) {
					t.Errorf("Validate = %v, want ErrInvalidConfig naming %q", err, tc.field)
				}
				if !errors.Is(newErr, retryqueue.ErrInvalidConfig) || !strings.Contains(newErr.Error(), tc.field) {
					t.Errorf("New = %v, want ErrInvalidConfig naming %q", newErr, tc.field)
				}
			})
		}
	})

	t.Run("DrainerConfig", func(t *testing.T) {
		// strip drops the func fields (Gate is a GateFunc), which
		// reflect.DeepEqual cannot compare.
		strip := func(c retryqueue.DrainerConfig) retryqueue.DrainerConfig {
			c.Handler, c.Gate, c.NakDelay = nil, nil, nil
			return c
		}
		for _, tc := range []struct {
			name  string
			mod   func(*retryqueue.DrainerConfig)
			field string // "" for valid
		}{
			{"minimal", func(*retryqueue.DrainerConfig) {}, ""},
			{"Rate", func(c *retryqueue.DrainerConfig) { c.Rate = -1 }, "Rate must be > 0"},
			{"MinRate", func(c *retryqueue.DrainerConfig) { c.Rate, c.MinRate = 5, 6 }, "MinRate must be in (0, Rate=5]"},
			{"MaxInFlight", func(c *retryqueue.DrainerConfig) { c.MaxInFlight = 10001 }, "MaxInFlight must be in 1..10000"},
			{"AdjustInterval", func(c *retryqueue.DrainerConfig) { c.AdjustInterval = time.Millisecond }, "AdjustInterval must be >= 10ms"},
			{"Decrease", func(c *retryqueue.DrainerConfig) { c.Decrease = 1 }, "Decrease must be in (0, 1)"},
			{"AckWait", func(c *retryqueue.DrainerConfig) { c.AckWait = 500 * time.Millisecond }, "AckWait must be >= 1s"},
			{"HandlerTimeout", func(c *retryqueue.DrainerConfig) { c.HandlerTimeout = time.Minute }, "HandlerTimeout must be > 0 and < AckWait (30s)"},
			{"PollInterval", func(c *retryqueue.DrainerConfig) { c.PollInterval = -time.Second }, "PollInterval must be > 0"},
			{"Consumer", func(c *retryqueue.DrainerConfig) { c.Consumer = "a.b" }, "Consumer: "},
		} {
			t.Run(tc.name, func(t *testing.T) {
				c := retryqueue.DrainerConfig{JetStream: js, Queue: q, Handler: handler, Gate: gate}
				tc.mod(&c)
				before := c
				err := c.Validate()
				if !reflect.DeepEqual(strip(c), strip(before)) || c.Handler == nil || c.Gate == nil || c.NakDelay != nil {
					t.Errorf("Validate modified the config: %+v, was %+v", c, before)
				}
				_, newErr := retryqueue.NewDrainer(c)
				if tc.field == "" {
					if err != nil || newErr != nil {
						t.Fatalf("Validate = %v, NewDrainer = %v; want both nil", err, newErr)
					}
					return
				}
				if !errors.Is(err, retryqueue.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.field) {
					t.Errorf("Validate = %v, want ErrInvalidConfig naming %q", err, tc.field)
				}
				if !errors.Is(newErr, retryqueue.ErrInvalidConfig) || !strings.Contains(newErr.Error(), tc.field) {
					t.Errorf("NewDrainer = %v, want ErrInvalidConfig naming %q", newErr, tc.field)
				}
			})
		}
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
