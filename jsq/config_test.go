package jsq_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/jsq"
)

// PublisherConfig.Validate checks the config as [jsq.NewPublisher] uses it,
// defaults applied to its zero fields, and leaves it as it is.
func TestPublisherConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cfg   jsq.PublisherConfig
		field string // "" for valid
	}{
		{"minimal", jsq.PublisherConfig{URL: "nats://127.0.0.1:4222"}, ""},
		{"URL", jsq.PublisherConfig{}, "URL or Conn is required"},
		{"PublishTimeout", jsq.PublisherConfig{URL: "nats://127.0.0.1:4222", PublishTimeout: -time.Second}, "PublishTimeout must be > 0, got -1s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := tc.cfg
			err := tc.cfg.Validate()
			if !reflect.DeepEqual(tc.cfg, before) {
				t.Errorf("Validate modified the config: %+v, was %+v", tc.cfg, before)
			}
			if tc.field == "" {
				if err != nil {
					t.Fatalf("Validate = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, jsq.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.field) {
				t.Errorf("Validate = %v, want ErrInvalidConfig naming %q", err, tc.field)
			}
			// NewPublisher fails the same way, before connecting.
			if _, err := jsq.NewPublisher(tc.cfg); !errors.Is(err, jsq.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.field) {
				t.Errorf("NewPublisher = %v, want ErrInvalidConfig naming %q", err, tc.field)
			}
		})
	}
}

// Regression (fresh-user trial): SubscriberConfig{URL: …}.Validate()
// failed with "AckWait must be >= 1s, got 0s" although 0 means the 30s
// default. Validate checks the config as [jsq.NewSubscriber] uses it,
// defaults applied, and leaves it as it is.
func TestSubscriberConfigValidate(t *testing.T) {
	const url = "nats://127.0.0.1:4222"
	for _, tc := range []struct {
		name  string
		cfg   jsq.SubscriberConfig
		field string // "" for valid
	}{
		{"minimal", jsq.SubscriberConfig{URL: url}, ""},
		{"URL", jsq.SubscriberConfig{}, "URL is required"},
		{"AckWait", jsq.SubscriberConfig{URL: url, AckWait: 500 * time.Millisecond}, "AckWait must be >= 1s, got 500ms"},
		{"Concurrency", jsq.SubscriberConfig{URL: url, Concurrency: 1025}, "Concurrency must be in 1..1024, got 1025"},
		{"MaxAckPending", jsq.SubscriberConfig{URL: url, MaxAckPending: -2}, "MaxAckPending must be -1 or >= 1, got -2"},
		{"CloseGrace", jsq.SubscriberConfig{URL: url, CloseGrace: time.Minute}, "CloseGrace must be < AckWait (30s), got 1m0s"},
		{"FetchWait", jsq.SubscriberConfig{URL: url, FetchWait: time.Millisecond}, "FetchWait must be in 100ms..AckWait (30s), got 1ms"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := tc.cfg
			err := tc.cfg.Validate()
			// The func fields (ConsumerName, NakDelay) and Logger stay nil.
			if !reflect.DeepEqual(tc.cfg, before) {
				t.Errorf("Validate modified the config: %+v, was %+v", tc.cfg, before)
			}
			if tc.field == "" {
				if err != nil {
					t.Fatalf("Validate = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, jsq.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.field) {
				t.Errorf("Validate = %v, want ErrInvalidConfig naming %q", err, tc.field)
			}
			// NewSubscriber fails the same way, before connecting.
			if _, err := jsq.NewSubscriber(tc.cfg); !errors.Is(err, jsq.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.field) {
				t.Errorf("NewSubscriber = %v, want ErrInvalidConfig naming %q", err, tc.field)
			}
		})
	}
}
