package wmnats_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/wmnats"
)

// TestConfigValidate: each bad field is refused at construction with an
// error wrapping ErrInvalidConfig that names the field and its range.
func TestConfigValidate(t *testing.T) {
	ok := wmnats.Config{URL: "nats://127.0.0.1:1", Durable: "orders-as2"}
	if err := ok.Validate(); err != nil {
		t.Fatalf("valid config refused: %v", err)
	}
	for _, tc := range []struct {
		name string
		edit func(*wmnats.Config)
		want string
	}{
		{"no URL", func(c *wmnats.Config) { c.URL = "" }, "URL is required"},
		{"no Durable", func(c *wmnats.Config) { c.Durable = "" }, "Durable is required"},
		{"Durable with a dot", func(c *wmnats.Config) { c.Durable = "a.b" }, "Durable"},
		{"Durable with a wildcard", func(c *wmnats.Config) { c.Durable = "a>" }, "Durable"},
		{"Durable too long", func(c *wmnats.Config) { c.Durable = strings.Repeat("d", 256) }, "at most 255"},
		{"negative Handlers", func(c *wmnats.Config) { c.Handlers = -1 }, "Handlers must be in 1..1024"},
		{"too many Handlers", func(c *wmnats.Config) { c.Handlers = 1025 }, "Handlers must be in 1..1024"},
		{"AckWait too short", func(c *wmnats.Config) { c.AckWait = time.Millisecond }, "AckWait must be in 1s..24h"},
		{"AckWait too long", func(c *wmnats.Config) { c.AckWait = 25 * time.Hour }, "AckWait must be in 1s..24h"},
		{"negative NakDelay", func(c *wmnats.Config) { c.NakDelay = -time.Second }, "NakDelay must be in 1ms..AckWait"},
		{"NakDelay beyond AckWait", func(c *wmnats.Config) { c.AckWait, c.NakDelay = time.Second, 2*time.Second }, "NakDelay must be in 1ms..AckWait"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := ok
			tc.edit(&c)
			err := c.Validate()
			if !errors.Is(err, wmnats.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate: %v, want ErrInvalidConfig naming %q", err, tc.want)
			}
			_, err = wmnats.NewSubscriber(c)
			if !errors.Is(err, wmnats.ErrInvalidConfig) || !strings.HasPrefix(err.Error(), "invalid config: ") {
				t.Fatalf("NewSubscriber: %v, want invalid config: ... wrapping ErrInvalidConfig", err)
			}
		})
	}
}
