package metrics_test

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/floodgate-go/floodgate/internal/tlstest"
	"github.com/floodgate-go/floodgate/metrics"
)

// TestStartTLSWithClientCA: metrics served by StartTLS with a config from
// PEM files and a client CA answer a scraper presenting a client
// certificate of that CA, and refuse one without it and a plain-HTTP one.
func TestStartTLSWithClientCA(t *testing.T) {
	pki := tlstest.New(t, "metrics-ca")
	f := pki.Files
	cfg, err := metrics.TLSConfig(f.ServerCert, f.ServerKey, f.CA)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "tls_test_total", Help: "test"})
	reg.MustRegister(c)
	c.Inc()
	addr, err := metrics.StartTLS(t.Context(), "127.0.0.1:0", reg, cfg)
	if err != nil {
		t.Fatal(err)
	}
	url := "https://" + addr.String() + metrics.Path
	get := func(tr *http.Transport, url string) (string, error) {
		defer tr.CloseIdleConnections()
		resp, err := (&http.Client{Transport: tr}).Get(url)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err == nil && resp.StatusCode != http.StatusOK {
			err = errors.New(resp.Status)
		}
		return string(b), err
	}
	body, err := get(&http.Transport{TLSClientConfig: pki.ClientConfig(true)}, url)
	if err != nil || !strings.Contains(body, "tls_test_total 1") {
		t.Errorf("with a client certificate: %v, body %.200q", err, body)
	}
	if _, err := get(&http.Transport{TLSClientConfig: pki.ClientConfig(false)}, url); err == nil {
		t.Error("without a client certificate: scraped")
	}
	if body, err := get(&http.Transport{}, "http://"+addr.String()+metrics.Path); err == nil || strings.Contains(body, "tls_test_total") {
		t.Errorf("plain HTTP: scraped: %.200q", body)
	}
}

// TestTLSConfigErrors: missing files and a missing certificate wrap
// ErrTLSConfig; without a client CA no client certificate is required.
func TestTLSConfigErrors(t *testing.T) {
	pki := tlstest.New(t, "metrics-ca")
	f := pki.Files
	for name, args := range map[string][3]string{
		"no key":        {f.ServerCert, "", ""},
		"missing cert":  {f.ServerCert + ".nope", f.ServerKey, ""},
		"CA not PEM":    {f.ServerCert, f.ServerKey, f.ServerKey + ".nope"},
		"key for other": {f.ServerCert, f.ClientKey, ""},
	} {
		if _, err := metrics.TLSConfig(args[0], args[1], args[2]); !errors.Is(err, metrics.ErrTLSConfig) {
			t.Errorf("%s: err %v, want ErrTLSConfig", name, err)
		}
	}
	cfg, err := metrics.TLSConfig(f.ServerCert, f.ServerKey, "")
	if err != nil || cfg.ClientAuth != 0 {
		t.Errorf("no client CA: %v, ClientAuth %v", err, cfg.ClientAuth)
	}
	if _, err := metrics.StartTLS(t.Context(), "127.0.0.1:0", prometheus.NewRegistry(), nil); !errors.Is(err, metrics.ErrTLSConfig) {
		t.Errorf("nil config: %v", err)
	}
}
