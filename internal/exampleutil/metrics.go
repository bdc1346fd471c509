package exampleutil

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/floodgate-go/floodgate/metrics"
)

// MetricsFlags are an example's metrics endpoint flags: -metrics-addr,
// -metrics-tlscert, -metrics-tlskey and -metrics-tlsca. The zero value
// serves nothing.
type MetricsFlags struct {
	// Addr is host:port; "" turns metrics off. A port alone (":9090")
	// binds to loopback, 127.0.0.1 (see [LoopbackByDefault]).
	Addr string
	// TLSCert and TLSKey, both or neither, serve HTTPS with this
	// certificate and key (PEM files).
	TLSCert, TLSKey string
	// TLSCA, with TLSCert and TLSKey, requires scrapers to present a
	// client certificate chained to this CA bundle (mTLS).
	TLSCA string
}

// Register adds the flags to fs.
func (m *MetricsFlags) Register(fs *flag.FlagSet) {
	fs.StringVar(&m.Addr, "metrics-addr", "", "serve Prometheus metrics at `host:port`/metrics; a port alone (:9090) binds to 127.0.0.1, 0.0.0.0:9090 or [::]:9090 to every interface (default: off)")
	fs.StringVar(&m.TLSCert, "metrics-tlscert", "", "serve metrics over HTTPS with this certificate `file` (PEM; with -metrics-tlskey)")
	fs.StringVar(&m.TLSKey, "metrics-tlskey", "", "private key `file` of -metrics-tlscert (PEM)")
	fs.StringVar(&m.TLSCA, "metrics-tlsca", "", "require scrapers' client certificates chained to this CA `file` (PEM; needs -metrics-tlscert)")
}

// Check adds the flags' errors to c: a bad address, a certificate
// without its key, a CA without a certificate.
func (m MetricsFlags) Check(c *FlagCheck) {
	c.Addr("metrics-addr", m.Addr)
	if (m.TLSCert == "") != (m.TLSKey == "") {
		c.Failf("-metrics-tlscert and -metrics-tlskey go together: give both or neither")
	}
	if m.TLSCA != "" && m.TLSCert == "" {
		c.Failf("-metrics-tlsca needs -metrics-tlscert and -metrics-tlskey (mTLS is on top of HTTPS)")
	}
	if m.Addr == "" && m.TLSCert != "" {
		c.Failf("-metrics-tlscert needs -metrics-addr")
	}
}

// Start serves the metrics as the flags say until ctx ends, from a
// registry of its own, and returns that registry (a nil Registerer when
// Addr is "") and the bound address. The error names the flag.
func (m MetricsFlags) Start(ctx context.Context) (prometheus.Registerer, net.Addr, error) {
	if m.Addr == "" {
		return nil, nil, nil
	}
	reg := prometheus.NewRegistry()
	addr := LoopbackByDefault(m.Addr)
	var (
		bound net.Addr
		err   error
	)
	if m.TLSCert != "" {
		cfg, terr := metrics.TLSConfig(m.TLSCert, m.TLSKey, m.TLSCA)
		if terr != nil {
			return nil, nil, fmt.Errorf("-metrics-tlscert/-metrics-tlskey/-metrics-tlsca: %w", terr)
		}
		bound, err = metrics.StartTLS(ctx, addr, reg, cfg)
	} else {
		bound, err = metrics.Start(ctx, addr, reg)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("-metrics-addr: %w", err)
	}
	return reg, bound, nil
}

// LoopbackByDefault returns addr with an empty host replaced by
// 127.0.0.1: ":9090" serves this machine only. Every interface must be
// asked for by name, "0.0.0.0:9090" or "[::]:9090", so an example never
// exposes its metrics by accident. An addr that does not split is
// returned unchanged (the listen error then names it).
func LoopbackByDefault(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || strings.TrimSpace(host) != "" {
		return addr
	}
	return net.JoinHostPort("127.0.0.1", port)
}

// Addr checks that flag -name's v is empty (off) or a host:port address.
func (f *FlagCheck) Addr(name, v string) {
	if v == "" {
		return
	}
	_, port, err := net.SplitHostPort(v)
	if n, perr := strconv.Atoi(port); err != nil || perr != nil || n < 0 || n > 65535 {
		f.errs = append(f.errs, fmt.Errorf("-%s must be host:port with a port in [0, 65535] (e.g. :9090), got %q", name, v))
	}
}

// PrintMetricsURL writes the metrics endpoint's URL to w, "metrics:
// http://127.0.0.1:9090/metrics" (https with -metrics-tlscert), so a
// scraper finds a port the system chose (-metrics-addr :0). It writes
// nothing when addr is nil (metrics off).
func PrintMetricsURL(w io.Writer, m MetricsFlags, addr net.Addr) {
	if addr == nil {
		return
	}
	scheme := "http"
	if m.TLSCert != "" {
		scheme = "https"
	}
	fmt.Fprintf(w, "metrics: %s://%s/metrics\n", scheme, addr)
}
