package as2_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/deliver/as2"
	"github.com/floodgate-go/floodgate/internal/configtest"
)

func TestNewSenderValidates(t *testing.T) {
	valid := as2.Config{URL: "https://as2.bluewater.example/as2", From: buyerID, To: supplierID}
	tests := []struct {
		name  string
		mod   func(*as2.Config)
		want  error
		field string
	}{
		{"no URL", func(c *as2.Config) { c.URL = "" }, as2.ErrURL, "Config.URL"},
		{"relative URL", func(c *as2.Config) { c.URL = "/as2" }, as2.ErrURL, "Config.URL"},
		{"ftp URL", func(c *as2.Config) { c.URL = "ftp://host/as2" }, as2.ErrURL, "Config.URL"},
		{"no From", func(c *as2.Config) { c.From = "" }, as2.ErrAS2ID, "Config.From"},
		{"long To", func(c *as2.Config) { c.To = strings.Repeat("x", 129) }, as2.ErrAS2ID, "Config.To"},
		{"To with newline", func(c *as2.Config) { c.To = "A\nB" }, as2.ErrAS2ID, "Config.To"},
		{"Subject with CR", func(c *as2.Config) { c.Subject = "a\rb" }, as2.ErrHeaderValue, "Config.Subject"},
		{"bad content type", func(c *as2.Config) { c.ContentType = "EDI X12" }, as2.ErrContentType, "Config.ContentType"},
		{"MDNTo non-ASCII", func(c *as2.Config) { c.MDNTo = "édi" }, as2.ErrHeaderValue, "Config.MDNTo"},
		{"negative timeout", func(c *as2.Config) { c.Timeout = -time.Second }, as2.ErrNegative, "Config.Timeout"},
		{"domain with @", func(c *as2.Config) { c.MessageIDDomain = "a@b" }, as2.ErrMessageIDDomain, "Config.MessageIDDomain"},
		{"domain with ..", func(c *as2.Config) { c.MessageIDDomain = "a..b" }, as2.ErrMessageIDDomain, "Config.MessageIDDomain"},
		{"negative MaxMDNSize", func(c *as2.Config) { c.MaxMDNSize = -1 }, as2.ErrNegative, "Config.MaxMDNSize"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := valid
			tt.mod(&cfg)
			s, err := as2.NewSender(cfg)
			if s != nil || !errors.Is(err, tt.want) {
				t.Fatalf("NewSender = %v, %v; want %v", s, err, tt.want)
			}
			if !strings.HasPrefix(err.Error(), "invalid config: "+tt.field) {
				t.Errorf("error %q does not start with invalid config: %s", err, tt.field)
			}
		})
	}

	s, err := as2.NewSender(valid)
	if err != nil {
		t.Fatal(err)
	}
	got := s.Config()
	if got.ContentType != "application/EDI-X12" || got.MDNTo != buyerID || got.Timeout != 30*time.Second ||
		got.MessageIDDomain != "floodgate" || got.Subject != "AS2 message" || got.MaxMDNSize != 1<<20 || got.HTTPClient == nil {
		t.Errorf("defaults not applied: %+v", got)
	}
}

// Config.Validate checks the config as [as2.NewSender] uses it, defaults
// applied to its zero fields (MDNTo from From among them), and leaves it as
// it is.
func TestValidateAppliesDefaults(t *testing.T) {
	minimal := as2.Config{URL: "https://as2.bluewater.example/as2", From: buyerID, To: supplierID}
	configtest.Run(t, nil, []configtest.Case[as2.Config]{
		{Name: "minimal", Cfg: minimal},
		{Name: "negative MaxMDNSize", Cfg: configtest.With(minimal, func(c *as2.Config) { c.MaxMDNSize = -1 }), Err: as2.ErrNegative, Want: "Config.MaxMDNSize"},
		{Name: "unknown SignAlgorithm", Cfg: configtest.With(minimal, func(c *as2.Config) { c.SignAlgorithm = "md5" }), Err: as2.ErrAlgorithm, Want: "Config.SignAlgorithm"},
	}, &configtest.Options[as2.Config]{Match: configtest.HasPrefix})
}
