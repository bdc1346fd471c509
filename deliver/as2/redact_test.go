package as2_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/floodgate-go/floodgate/deliver/as2"
	"github.com/floodgate-go/floodgate/deliver/as2/as2partner"
	"github.com/floodgate-go/floodgate/deliver/as2/as2test"
	"github.com/floodgate-go/floodgate/internal/redact/leaktest"
)

func TestConfigsRedactKeys(t *testing.T) {
	pki, err := as2test.New("CANARYSENDER", "CANARYPARTNER")
	if err != nil {
		t.Fatal(err)
	}
	forms := slices.Concat(leaktest.KeyForms(t, pki.Sender.Key), leaktest.KeyForms(t, pki.Partner.Key))
	cfg := pki.SenderConfig("https://as2.example.com/in")
	s, err := as2.NewSender(cfg)
	if err != nil {
		t.Fatal(err)
	}
	pcfg := pki.PartnerConfig()
	p, err := as2partner.New(pcfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		v    any
		want string
	}{
		{"Config", cfg, "REDACTED *rsa.PrivateKey"},
		{"Config with defaults", s.Config(), "REDACTED *rsa.PrivateKey"},
		{"Sender", s, "REDACTED *rsa.PrivateKey"},
		{"as2partner.Config", pcfg, "REDACTED *rsa.PrivateKey"},
		{"as2partner.Partner", p, "REDACTED *rsa.PrivateKey"},
	} {
		t.Run(c.name, func(t *testing.T) { leaktest.CheckPrinted(t, c.v, c.want, forms) })
	}
	// The check can fail: the key itself, printed, shows its forms.
	if got := leaktest.Printed(pki.Sender.Key)["%v"]; !containsAny(got, forms) {
		t.Fatalf("precondition: a printed key shows a form of itself: %.200s", got)
	}
}

func containsAny(s string, forms []string) bool {
	for _, f := range forms {
		if len(f) >= 4 && strings.Contains(s, f) {
			return true
		}
	}
	return false
}
