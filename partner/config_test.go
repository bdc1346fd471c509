package partner_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/internal/configtest"
	"github.com/floodgate-go/floodgate/partner"
)

func TestConfigValidate(t *testing.T) {
	with := func(mod func(*partner.Config)) partner.Config { return configtest.With(partner.Config{}, mod) }
	configtest.Run(t, partner.ErrInvalidConfig, []configtest.Case[partner.Config]{
		{Name: "zero", Cfg: partner.Config{}},
		{Name: "full", Cfg: with(func(c *partner.Config) {
			c.MaxPartners, c.IdleAfter, c.SweepInterval, c.MaxKeyLen = 5, time.Second, time.Second, 100
			c.Template.MaxInFlight = 3
		})},
		{Name: "MaxPartners", Cfg: with(func(c *partner.Config) { c.MaxPartners = -1 }), Want: "MaxPartners must be in 1..16777216, got -1"},
		{Name: "MaxPartners too large", Cfg: with(func(c *partner.Config) { c.MaxPartners = 1<<24 + 1 }), Want: "MaxPartners must be in 1..16777216"},
		{Name: "IdleAfter", Cfg: with(func(c *partner.Config) { c.IdleAfter = -time.Second }), Want: "IdleAfter must be > 0, got -1s"},
		{Name: "SweepInterval", Cfg: with(func(c *partner.Config) { c.SweepInterval = -1 }), Want: "SweepInterval must be > 0"},
		{Name: "MaxKeyLen", Cfg: with(func(c *partner.Config) { c.MaxKeyLen = 1<<20 + 1 }), Want: "MaxKeyLen must be in 1..1048576"},
		{Name: "Template.MaxInFlight", Cfg: with(func(c *partner.Config) { c.Template.MaxInFlight = -2 }), Want: "Template.MaxInFlight must be in 1..1048576, got -2"},
		{Name: "Template.Breaker", Cfg: with(func(c *partner.Config) { c.Template.Breaker.WindowSize = -1 }), Want: "Template.Breaker: breaker: invalid config: WindowSize"},
	}, &configtest.Options[partner.Config]{
		Snapshot: func(c partner.Config) any {
			c.Override, c.HasBacklog, c.OnTransition, c.OnEvict = nil, nil, nil, nil
			return c
		},
		New: func(c partner.Config) error {
			r, err := partner.New(c)
			if err == nil {
				r.Close()
			} else if !strings.HasPrefix(err.Error(), "invalid config: partner: invalid config: ") {
				return errors.New("New did not wrap invalid config: " + err.Error())
			}
			return err
		},
		NewValid: true,
	})
}

func TestPartnerConfigValidate(t *testing.T) {
	configtest.Run(t, partner.ErrInvalidConfig, []configtest.Case[partner.PartnerConfig]{
		{Name: "zero", Cfg: partner.PartnerConfig{}},
		{Name: "MaxInFlight", Cfg: partner.PartnerConfig{MaxInFlight: 1<<20 + 1}, Want: "MaxInFlight must be in 1..1048576"},
		{Name: "Breaker", Cfg: partner.PartnerConfig{Breaker: breaker.Config{ProbeConcurrency: -1}}, Want: "Breaker: breaker: invalid config: ProbeConcurrency"},
	}, nil)
	err := partner.PartnerConfig{Breaker: breaker.Config{ProbeConcurrency: -1}}.Validate()
	if !errors.Is(err, breaker.ErrInvalidConfig) {
		t.Fatalf("%v does not match breaker.ErrInvalidConfig", err)
	}
}
