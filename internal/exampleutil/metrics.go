package exampleutil

import (
	"context"
	"fmt"
	"net"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/floodgate-go/floodgate/metrics"
)

// StartMetrics serves Prometheus metrics at addr's /metrics until ctx
// ends, from a registry of its own, and returns that registry for
// floodgate.Config.Metrics. An empty addr turns metrics off: it returns a
// nil Registerer (an untyped nil, so Config.Metrics is unset). It returns
// an error naming -metrics-addr when the address cannot be listened on.
func StartMetrics(ctx context.Context, addr string) (prometheus.Registerer, error) {
	if addr == "" {
		return nil, nil
	}
	reg := prometheus.NewRegistry()
	if _, err := metrics.Start(ctx, addr, reg); err != nil {
		return nil, fmt.Errorf("-metrics-addr: %w", err)
	}
	return reg, nil
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
