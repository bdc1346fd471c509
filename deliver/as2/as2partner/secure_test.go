package as2partner_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/deliver"
	"github.com/floodgate-go/floodgate/deliver/as2"
	"github.com/floodgate-go/floodgate/deliver/as2/as2partner"
	"github.com/floodgate-go/floodgate/deliver/as2/as2test"
)

// TestSecureFaultScript runs the fault script with signed and encrypted AS2:
// the outage answers 503 before any cryptography, the healthy phase
// processes and signs.
func TestSecureFaultScript(t *testing.T) {
	pki, err := as2test.New("NORTHWINDRTL", "BLUEWATERHG")
	if err != nil {
		t.Fatal(err)
	}
	clock := &fakeClock{t: t0}
	cfg := pki.PartnerConfig()
	cfg.Clock = clock
	cfg.Script = []as2partner.Phase{{Name: "outage", Duration: time.Second, Mode: as2partner.Down}, {Name: "healthy"}}
	p, err := as2partner.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(p)
	defer srv.Close()
	s, err := as2.NewSender(pki.SenderConfig(srv.URL))
	if err != nil {
		t.Fatal(err)
	}
	p.Start()
	payload := []byte("ISA*00*          *00*          *ZZ*NORTHWINDRTL   *ZZ*BLUEWATERHG    *250314*0930*U*00401*000000042*0*P*>~\nIEA*0*000000042~\n")
	if _, err := s.Send(context.Background(), "m-1", payload); !deliver.IsRetryable(err) {
		t.Fatalf("during outage: %v, want retryable", err)
	}
	clock.Set(t0.Add(2 * time.Second))
	mdn, err := s.Send(context.Background(), "m-1", payload)
	if err != nil || !mdn.Verified {
		t.Fatalf("after outage: %+v, %v", mdn, err)
	}
	st := p.Stats()
	if st.Errors != 1 || st.Processed != 1 || st.Signed != 1 || st.Encrypted != 1 || st.SignedMDNs != 1 {
		t.Errorf("Stats = %+v", st)
	}
	if r := p.Received(); r["<m-1@floodgate>"] != 1 {
		t.Errorf("Received = %v", r)
	}
	if cn := p.ControlNumbers(); cn["000000042"] != 1 {
		t.Errorf("ControlNumbers = %v", cn)
	}
}

func TestConfigKeyValidation(t *testing.T) {
	pki, err := as2test.New("A", "B")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name  string
		cfg   as2partner.Config
		field string
	}{
		{"cert without key", as2partner.Config{Cert: pki.Partner.Cert}, "Config.Key"},
		{"key without cert", as2partner.Config{Key: pki.Partner.Key}, "Config.Cert"},
		{"key of another cert", as2partner.Config{Cert: pki.Partner.Cert, Key: pki.Sender.Key}, "Config.Key"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := as2partner.New(tt.cfg)
			if !errors.Is(err, as2partner.ErrKey) || !strings.HasPrefix(err.Error(), "invalid config: "+tt.field) {
				t.Errorf("New = %v, want ErrKey naming %s", err, tt.field)
			}
		})
	}
}
