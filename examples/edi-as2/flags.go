package main

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/floodgate-go/floodgate/internal/exampleutil"
	"github.com/floodgate-go/floodgate/internal/natsconn"
)

// options are the example's command-line settings.
type options struct {
	rate            float64                  // messages published per second, over all retailers
	retailers       int                      // AS2 partners the orders go to, in turn
	faulty          int                      // the retailer (1-based) that follows the fault script
	produceFor      time.Duration            // how long the producer publishes
	healthyFor      time.Duration            // healthy partner before the outage
	outage          time.Duration            // partner answers 503
	outageCalls     int                      // the outage lasts also until this many requests; 0 = time only
	fragile         time.Duration            // partner capacity-limited after the outage
	fragileCapacity float64                  // messages/s the partner takes while fragile
	capacityAfter   float64                  // messages/s the partner takes once healthy; 0 = unlimited
	nats            natsconn.Options         // external NATS; none named = embedded
	metrics         exampleutil.MetricsFlags // -metrics-addr (empty = off), -metrics-tls*
	summary         string                   // JSON summary file; empty = none
	settle          time.Duration            // how long to wait for the backlog after producing
	quiet           bool                     // no timeline
	mdn             string                   // "sync" or "async" (as2.MDNSync, as2.MDNAsync)
	as2Cert, as2Key string                   // our AS2 certificate and private key (PEM files); empty = generated

	// Not flags: a test sets them. stderr receives the log (default
	// os.Stderr); logLevel is its level (default slog.LevelError: a panic
	// the router recovered, an unconfirmed diversion).
	stderr   io.Writer
	logLevel slog.Leveler
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("edi-as2", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Float64Var(&o.rate, "rate", 60, "X12 850 messages published per second, over all retailers, in (0, 5000]")
	fs.IntVar(&o.retailers, "retailers", 3, fmt.Sprintf("retailers (AS2 partners) the orders go to in turn, each with its own breaker, in [1, %d]", maxRetailers))
	fs.IntVar(&o.faulty, "faulty", 1, "the retailer, 1 to -retailers, that follows the fault script (-healthy, -outage, -fragile); the others stay healthy")
	fs.DurationVar(&o.produceFor, "produce-for", 20*time.Second, "how long the producer publishes at least, in (0, 10m]; it goes on (at most -settle more) until the faulty retailer is in its last phase with its breaker closed, so the run always shows the recovery")
	fs.DurationVar(&o.healthyFor, "healthy", 3*time.Second, "faulty retailer healthy before the outage, in [0, 10m]")
	fs.DurationVar(&o.outage, "outage", 6*time.Second, "outage: the faulty retailer answers HTTP 503, in [0, 1h]")
	fs.IntVar(&o.outageCalls, "outage-calls", 0, "the outage lasts also until the faulty retailer has answered this many requests with 503, so its breaker sees that many failures however slowly the machine runs; 0 = -outage alone, in [0, 100000]")
	fs.DurationVar(&o.fragile, "fragile", 5*time.Second, "fragile recovery after the outage, in [0, 1h]")
	fs.Float64Var(&o.fragileCapacity, "fragile-capacity", 15, "messages/s the faulty retailer takes while fragile; excess gets 503, in (0, 5000]")
	fs.Float64Var(&o.capacityAfter, "capacity-after", 100, "messages/s the faulty retailer takes once recovered (excess gets 503); 0 = unlimited, in [0, 5000]")
	o.nats.Register(fs) // -s/-server/-nats-url, -context, credentials, TLS; none: an embedded server
	fs.StringVar(&o.summary, "summary", "", "write a JSON summary to this `file`")
	fs.DurationVar(&o.settle, "settle", 60*time.Second, "after producing, how long to wait for the backlog to drain, in (0, 1h]")
	o.metrics.Register(fs) // -metrics-addr (a port alone: loopback), -metrics-tlscert/-tlskey/-tlsca
	fs.StringVar(&o.mdn, "mdn", "sync", "how the retailers return their signed MDN: sync (in the answer) or async (posted later to a receipt endpoint on loopback, RFC 4130 §7.3; pending receipts in a JetStream KV bucket, a deadline sweep every second)")
	fs.StringVar(&o.as2Cert, "as2-cert", "", "our AS2 certificate `file` (PEM), with -as2-key: the retailers verify our signatures with it (default: a throwaway one per retailer)")
	fs.StringVar(&o.as2Key, "as2-key", "", "our AS2 private key `file` (PEM: PKCS #8, PKCS #1 or SEC 1, unencrypted; RSA or ECDSA) of -as2-cert: it signs every order")
	fs.BoolVar(&o.quiet, "quiet", false, "do not print the per-second timeline (the summary is printed all the same)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	return o, o.validate()
}

func (o options) validate() error {
	var c exampleutil.FlagCheck
	c.Float("rate", o.rate, 0, 5000, true, "messages/s")
	c.Int("retailers", o.retailers, 1, maxRetailers)
	c.Int("faulty", o.faulty, 1, max(1, o.retailers))
	c.Float("fragile-capacity", o.fragileCapacity, 0, 5000, true, "messages/s")
	c.Float("capacity-after", o.capacityAfter, 0, 5000, false, "messages/s")
	c.Duration("produce-for", o.produceFor, 0, 10*time.Minute, true)
	c.Duration("healthy", o.healthyFor, 0, 10*time.Minute, false)
	c.Duration("outage", o.outage, 0, time.Hour, false)
	c.Int("outage-calls", o.outageCalls, 0, 100000)
	if o.outageCalls > 0 && o.outage == 0 {
		c.Failf("-outage-calls %d needs an outage: -outage must be > 0", o.outageCalls)
	}
	c.Duration("fragile", o.fragile, 0, time.Hour, false)
	c.Duration("settle", o.settle, 0, time.Hour, true)
	if o.mdn != "sync" && o.mdn != "async" {
		c.Failf("-mdn %q: allowed sync or async", o.mdn)
	}
	if (o.as2Cert == "") != (o.as2Key == "") {
		c.Failf("-as2-cert and -as2-key go together: give both or neither")
	} else if _, err := loadIdentity(o); err != nil {
		c.Failf("%v", err) // refused before anything starts; names the flag, never the key
	}
	o.metrics.Check(&c)
	c.OutputFile("summary", o.summary) // before the run, not after it
	return c.Err()
}
