package exampleutil_test

import (
	"flag"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/floodgate-go/floodgate/internal/exampleutil"
	"github.com/floodgate-go/floodgate/internal/tlstest"
)

// TestLoopbackByDefault: a port alone binds to 127.0.0.1; a named host,
// including every interface by name, is kept.
func TestLoopbackByDefault(t *testing.T) {
	for in, want := range map[string]string{
		":9090":          "127.0.0.1:9090",
		":0":             "127.0.0.1:0",
		"0.0.0.0:9090":   "0.0.0.0:9090",
		"[::]:9090":      "[::]:9090",
		"localhost:9090": "localhost:9090",
		"10.0.0.5:9090":  "10.0.0.5:9090",
		"nohost":         "nohost",
	} {
		if got := exampleutil.LoopbackByDefault(in); got != want {
			t.Errorf("LoopbackByDefault(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestMetricsFlagsTLS: with -metrics-addr :0 and the three TLS flags the
// endpoint listens on loopback only, over HTTPS, and answers a scraper
// with a client certificate of the CA and refuses one without.
func TestMetricsFlagsTLS(t *testing.T) {
	f := tlstest.New(t, "example-metrics-ca")
	var m exampleutil.MetricsFlags
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	m.Register(fs)
	if err := fs.Parse([]string{"-metrics-addr", ":0", "-metrics-tlscert", f.Files.ServerCert,
		"-metrics-tlskey", f.Files.ServerKey, "-metrics-tlsca", f.Files.CA}); err != nil {
		t.Fatal(err)
	}
	var c exampleutil.FlagCheck
	m.Check(&c)
	if err := c.Err(); err != nil {
		t.Fatal(err)
	}
	reg, addr, err := m.Start(t.Context())
	if err != nil || reg == nil {
		t.Fatalf("Start: %v, %v", reg, err)
	}
	if ip := addr.(*net.TCPAddr).IP; !ip.IsLoopback() {
		t.Errorf("bound to %v, want loopback", ip)
	}
	for _, withCert := range []bool{true, false} {
		tr := &http.Transport{TLSClientConfig: f.ClientConfig(withCert)}
		resp, err := (&http.Client{Transport: tr}).Get("https://" + addr.String() + "/metrics")
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		if ok := err == nil && resp.StatusCode == http.StatusOK; ok != withCert {
			t.Errorf("client certificate %v: err %v", withCert, err)
		}
		tr.CloseIdleConnections()
	}
}

// TestMetricsFlagsCheck: the TLS flags' combinations are checked, each
// error naming the flag.
func TestMetricsFlagsCheck(t *testing.T) {
	for _, tc := range []struct {
		m    exampleutil.MetricsFlags
		want string
	}{
		{exampleutil.MetricsFlags{Addr: ":9090", TLSCert: "c.pem"}, "-metrics-tlskey"},
		{exampleutil.MetricsFlags{Addr: ":9090", TLSCA: "ca.pem"}, "-metrics-tlsca"},
		{exampleutil.MetricsFlags{TLSCert: "c.pem", TLSKey: "k.pem"}, "-metrics-addr"},
		{exampleutil.MetricsFlags{Addr: "9090"}, "-metrics-addr"},
	} {
		var c exampleutil.FlagCheck
		tc.m.Check(&c)
		if err := c.Err(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want an error naming %s", tc.m, err, tc.want)
		}
	}
}

// TestPrintMetricsURL: the URL names the bound address, https with a
// certificate; nothing is printed when metrics are off.
func TestPrintMetricsURL(t *testing.T) {
	addr := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40123}
	for _, tc := range []struct {
		m    exampleutil.MetricsFlags
		addr net.Addr
		want string
	}{
		{exampleutil.MetricsFlags{Addr: ":0"}, addr, "metrics: http://127.0.0.1:40123/metrics\n"},
		{exampleutil.MetricsFlags{Addr: ":0", TLSCert: "c.pem", TLSKey: "k.pem"}, addr, "metrics: https://127.0.0.1:40123/metrics\n"},
		{exampleutil.MetricsFlags{}, nil, ""},
	} {
		var b strings.Builder
		exampleutil.PrintMetricsURL(&b, tc.m, tc.addr)
		if b.String() != tc.want {
			t.Errorf("%+v: %q, want %q", tc.m, b.String(), tc.want)
		}
	}
}
