package metrics

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Path is where [Serve] exposes the metrics.
const Path = "/metrics"

// Handler returns the HTTP handler exposing g's metrics in the Prometheus
// text (or OpenMetrics, when asked) format. A collection error is answered
// with HTTP 500.
func Handler(g prometheus.Gatherer) http.Handler {
	return promhttp.HandlerFor(g, promhttp.HandlerOpts{EnableOpenMetrics: true})
}

// Serve listens on addr (host:port; ":9090" for every interface) and serves
// g's metrics at [Path] until ctx is done, then shuts the server down
// (waiting up to 5 s for scrapes in flight) and returns nil. It returns the
// error if it cannot listen or the server fails.
func Serve(ctx context.Context, addr string, g prometheus.Gatherer) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("metrics: listen on %s: %w", addr, err)
	}
	return ServeListener(ctx, ln, g)
}

// ServeListener is [Serve] on a listener the caller opened (for example on
// port 0, to learn the address first). It closes ln.
func ServeListener(ctx context.Context, ln net.Listener, g prometheus.Gatherer) error {
	mux := http.NewServeMux()
	mux.Handle(Path, Handler(g))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("metrics: serve: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := srv.Shutdown(sctx)
	if serr := <-errc; !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	if err != nil {
		return fmt.Errorf("metrics: shutdown: %w", err)
	}
	return nil
}

// Start listens on addr and serves g's metrics at [Path] in the background
// until ctx is done, like [Serve] but returning at once: the error is the
// listen error (a bad or busy address), so a program can fail fast on it.
// It returns the bound address (useful with port 0). Errors of the server
// after it started are dropped; use [ServeListener] to see them.
func Start(ctx context.Context, addr string, g prometheus.Gatherer) (net.Addr, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics: listen on %s: %w", addr, err)
	}
	go func() { _ = ServeListener(ctx, ln, g) }()
	return ln.Addr(), nil
}
