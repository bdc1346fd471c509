package natskv_test

import (
	"context"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/breaker/natskv"
	"github.com/floodgate-go/floodgate/internal/configtest"
	"github.com/floodgate-go/floodgate/internal/natstest"
)

// Config.Validate checks the config as [natskv.New] uses it, defaults
// applied to its zero fields, leaves it as it is, and rejects what New
// rejects.
func TestConfigValidate(t *testing.T) {
	js := natstest.JetStream(t, natstest.Conn(t, natstest.URL(t)))
	configtest.Run(t, natskv.ErrInvalidConfig, []configtest.Case[natskv.Config]{
		{Name: "minimal", Cfg: natskv.Config{}},
		{Name: "Replicas", Cfg: natskv.Config{Replicas: 6}, Want: "Replicas 6, allowed 1..5"},
		{Name: "MarkerTTL", Cfg: natskv.Config{MarkerTTL: 500 * time.Millisecond}, Want: "MarkerTTL 500ms, allowed >= 1s"},
		{Name: "Bucket", Cfg: natskv.Config{Bucket: "a.b"}, Want: `Bucket "a.b"`},
		// '=' is valid in a key but not in a bucket name: JetStream refuses it.
		{Name: "Bucket with =", Cfg: natskv.Config{Bucket: "a=b"}, Want: `Bucket "a=b"`},
	}, &configtest.Options[natskv.Config]{
		New: func(c natskv.Config) error {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_, err := natskv.New(ctx, js, c)
			return err
		},
	})
}
