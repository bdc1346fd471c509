package natskv_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/breaker/natskv"
	"github.com/floodgate-go/floodgate/internal/natstest"
)

// Config.Validate checks the config as [natskv.New] uses it, defaults
// applied to its zero fields, leaves it as it is, and rejects what New
// rejects.
func TestConfigValidate(t *testing.T) {
	js := natstest.JetStream(t, natstest.Conn(t, natstest.URL(t)))
	for _, tc := range []struct {
		name  string
		cfg   natskv.Config
		field string // "" for valid
	}{
		{"minimal", natskv.Config{}, ""},
		{"Replicas", natskv.Config{Replicas: 6}, "Replicas 6, allowed 1..5"},
		{"MarkerTTL", natskv.Config{MarkerTTL: 500 * time.Millisecond}, "MarkerTTL 500ms, allowed >= 1s"},
		{"Bucket", natskv.Config{Bucket: "a.b"}, `Bucket "a.b"`},
		// '=' is valid in a key but not in a bucket name: JetStream refuses it.
		{"Bucket with =", natskv.Config{Bucket: "a=b"}, `Bucket "a=b"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := tc.cfg
			err := tc.cfg.Validate()
			if tc.cfg != before {
				t.Errorf("Validate modified the config: %+v, was %+v", tc.cfg, before)
			}
			if tc.field == "" {
				if err != nil {
					t.Fatalf("Validate = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, natskv.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.field) {
				t.Errorf("Validate = %v, want ErrInvalidConfig naming %q", err, tc.field)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if _, err := natskv.New(ctx, js, tc.cfg); !errors.Is(err, natskv.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.field) {
				t.Errorf("New = %v, want ErrInvalidConfig naming %q", err, tc.field)
			}
		})
	}
}
