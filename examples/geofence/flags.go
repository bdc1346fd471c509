package main

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/floodgate-go/floodgate/deliver/webhook"

	"github.com/floodgate-go/floodgate/internal/exampleutil"
	"github.com/floodgate-go/floodgate/internal/natsconn"
)

// options are the example's command-line settings.
type options struct {
	vehicles      int                      // vans replayed, from the trace's first
	consumers     int                      // webhook consumers; a van's triggers go to one
	faulty        int                      // the consumer (1-based) with the outage
	slowAt        time.Duration            // the other consumers' slow period starts
	slowFor       time.Duration            // and lasts
	slowLatency   time.Duration            // their latency in it
	speed         float64                  // trace seconds per wall second
	produceFor    time.Duration            // wall time the producer replays the trace
	dwell         time.Duration            // trace time inside a fence before a dwell trigger
	healthyFor    time.Duration            // consumer healthy before the spike
	degraded      time.Duration            // consumer's P99 spike; recovery after it
	degradedCalls int                      // when > 0, recovery after this many degraded requests instead
	fast          time.Duration            // consumer's normal latency
	spike         time.Duration            // consumer's slow latency while degraded
	slowFraction  float64                  // share of slow requests while degraded
	slowCall      time.Duration            // breaker's slow-call threshold
	timeout       time.Duration            // webhook sender timeout
	seed          uint64                   // breaker jitter seed; 0 = random
	nats          natsconn.Options         // external NATS; none named = embedded
	metrics       exampleutil.MetricsFlags // -metrics-addr (empty = off), -metrics-tls*
	summary       string                   // JSON summary file; empty = none
	settle        time.Duration            // wait for the backlog after producing
	quiet         bool                     // no timeline
	webhookSecret []byte                   // the consumers' signing key, from -webhook-secret-file or $FLOODGATE_WEBHOOK_SECRET; nil = generated

	// Not flags: a test sets them. stderr receives the log and the
	// dropped-fix lines (default os.Stderr); logLevel is the log's level
	// (default slog.LevelError: a panic the router recovered, an
	// unconfirmed diversion).
	stderr   io.Writer
	logLevel slog.Leveler
}

// EnvWebhookSecret holds the consumers' webhook secret itself when
// -webhook-secret-file is not given.
const EnvWebhookSecret = "FLOODGATE_WEBHOOK_SECRET"

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("geofence", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&o.vehicles, "vehicles", 16, "vans replayed from the trace, in [1, 16]")
	fs.IntVar(&o.consumers, "consumers", 2, fmt.Sprintf("webhook consumers, each its own endpoint and breaker; vans' triggers go to them in turn, in [1, %d]", maxConsumers))
	fs.IntVar(&o.faulty, "faulty", 1, "the consumer, 1 to -consumers, with the outage (-healthy, -degraded); the others have a slow period (-slow-at, -slow-for)")
	fs.DurationVar(&o.slowAt, "slow-at", 5*time.Second, "when the other consumers' slow period starts, in [0, 10m]")
	fs.DurationVar(&o.slowFor, "slow-for", 8*time.Second, "how long the other consumers' slow period lasts, in (0, 1h]")
	fs.DurationVar(&o.slowLatency, "slow-latency", 60*time.Millisecond, "the other consumers' latency in their slow period, below -slow-call, in [0, 1m]")
	fs.Float64Var(&o.speed, "speed", 40, "replay speed: trace seconds per wall second, in (0, 1000]")
	fs.DurationVar(&o.produceFor, "produce-for", 22*time.Second, "wall time the trace is replayed (it ends after 15 trace minutes), in (0, 10m]")
	fs.DurationVar(&o.dwell, "dwell", time.Minute, "trace time inside a fence before a dwell trigger, in (0, 1h]")
	fs.DurationVar(&o.healthyFor, "healthy", 3*time.Second, "consumer healthy before its P99 spike, in [0, 10m]")
	fs.DurationVar(&o.degraded, "degraded", 9500*time.Millisecond, "consumer's P99 spike; it recovers after it, in (0, 1h]")
	fs.IntVar(&o.degradedCalls, "degraded-calls", 0, "when > 0, the consumer recovers after this many requests while degraded instead of after -degraded, however fast the machine, in [0, 100000]")
	fs.DurationVar(&o.fast, "fast", 20*time.Millisecond, "consumer's normal latency, in [0, 10s]")
	fs.DurationVar(&o.spike, "spike", 900*time.Millisecond, "latency of the consumer's slow requests while degraded, in (0, 1m]")
	fs.Float64Var(&o.slowFraction, "slow-fraction", 0.5, "share of the consumer's requests that take -spike while degraded, in [0.01, 1]")
	fs.DurationVar(&o.slowCall, "slow-call", 200*time.Millisecond, "breaker's slow-call threshold: a slower call is a failure, in (0, 1m]")
	fs.DurationVar(&o.timeout, "timeout", 2*time.Second, "webhook request timeout, in (0, 1m]")
	fs.Uint64Var(&o.seed, "seed", 1, "seed of the breaker's open-window jitter; 0 draws a random one")
	o.metrics.Register(fs) // -metrics-addr (a port alone: loopback), -metrics-tlscert/-tlskey/-tlsca
	o.nats.Register(fs)    // -s/-server/-nats-url, -context, credentials, TLS; none: an embedded server
	fs.StringVar(&o.summary, "summary", "", "write a JSON summary to this `file`")
	fs.DurationVar(&o.settle, "settle", 40*time.Second, "after producing, how long to wait for the backlog to drain, in (0, 1h]")
	var secretFile string
	fs.StringVar(&secretFile, "webhook-secret-file", "", "`file` holding the Standard Webhooks secret (whsec_ and base64) every consumer verifies with and the sender signs with (env "+EnvWebhookSecret+" holds the secret itself; default: a throwaway secret per consumer)")
	fs.BoolVar(&o.quiet, "quiet", false, "do not print the per-second timeline (the summary is printed all the same)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	var err error
	if o.webhookSecret, err = loadSecret(secretFile); err != nil {
		return o, err
	}
	return o, o.validate()
}

// loadSecret reads the webhook secret from file, or else from
// $FLOODGATE_WEBHOOK_SECRET, with [webhook.ParseSecret] (surrounding white
// space ignored); nil when neither is set. The error names the flag or the
// variable, never the secret.
func loadSecret(file string) ([]byte, error) {
	what, s := "$"+EnvWebhookSecret, os.Getenv(EnvWebhookSecret)
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("-webhook-secret-file: %w", err)
		}
		what, s = "-webhook-secret-file", string(b)
	}
	if s == "" && file == "" {
		return nil, nil
	}
	key, err := webhook.ParseSecret(strings.TrimSpace(s))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return key, nil
}

func (o options) validate() error {
	var c exampleutil.FlagCheck
	c.Int("vehicles", o.vehicles, 1, 16)
	c.Int("consumers", o.consumers, 1, maxConsumers)
	c.Int("faulty", o.faulty, 1, max(1, o.consumers))
	c.Duration("slow-at", o.slowAt, 0, 10*time.Minute, false)
	c.Duration("slow-for", o.slowFor, 0, time.Hour, true)
	c.Duration("slow-latency", o.slowLatency, 0, time.Minute, false)
	c.Float("speed", o.speed, 0, 1000, true, "trace seconds per second")
	c.Duration("produce-for", o.produceFor, 0, 10*time.Minute, true)
	c.Duration("dwell", o.dwell, 0, time.Hour, true)
	c.Duration("healthy", o.healthyFor, 0, 10*time.Minute, false)
	c.Duration("degraded", o.degraded, 0, time.Hour, true)
	c.Int("degraded-calls", o.degradedCalls, 0, 100000)
	c.Duration("fast", o.fast, 0, 10*time.Second, false)
	c.Duration("spike", o.spike, 0, time.Minute, true)
	c.Float("slow-fraction", o.slowFraction, 0.01, 1, false, "")
	c.Duration("slow-call", o.slowCall, 0, time.Minute, true)
	c.Duration("timeout", o.timeout, 0, time.Minute, true)
	c.Duration("settle", o.settle, 0, time.Hour, true)
	o.metrics.Check(&c)
	c.OutputFile("summary", o.summary) // before the run, not after it
	if o.slowLatency >= o.slowCall {
		c.Failf("-slow-latency (%v) must be below -slow-call (%v): the slow period degrades a consumer without tripping its breaker", o.slowLatency, o.slowCall)
	}
	if o.fast >= o.slowCall {
		c.Failf("-fast (%v) must be below -slow-call (%v), or the recovered consumer is slow", o.fast, o.slowCall)
	}
	return c.Err()
}
