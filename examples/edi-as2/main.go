// Command edi-as2 runs floodgate's main job end to end on one machine: X12 850
// purchase orders are published to NATS JetStream, a Watermill router delivers
// each one over AS2 to a partner through floodgate's middleware, and the
// partner follows a fault script (healthy, outage, fragile recovery, healthy).
// While the breaker is open, orders are diverted to the JetStream retry queue;
// the drainer releases the backlog once the partner is back, at a rate that
// seeks the partner's spare capacity (-capacity-after sets the capacity of
// the recovered partner). The timeline shows the backlog depth and the drain
// rate each second. At the end the partner's received set is checked against
// what was produced; the summary adds the re-trips after recovery, the time
// to full traffic and the drain time (recovery to an empty backlog).
//
//	go run ./examples/edi-as2                  # embedded NATS, default script
//	go run ./examples/edi-as2 -summary s.json  # also write a JSON summary
//	go run ./examples/edi-as2 -nats-url nats://127.0.0.1:4222
//
// It exits 0 when every order was delivered or dead-lettered, 1 when some
// were lost or still queued when -settle ran out, 2 on bad flags.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	o, err := parseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "edi-as2:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	sum, err := run(ctx, o, os.Stdout)
	if o.summary != "" && sum != nil {
		if werr := sum.writeFile(o.summary); werr != nil {
			fmt.Fprintln(os.Stderr, "edi-as2:", werr)
			os.Exit(1)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "edi-as2:", err)
		os.Exit(1)
	}
	if sum.Lost > 0 {
		fmt.Fprintf(os.Stderr, "edi-as2: %d messages lost\n", sum.Lost)
		os.Exit(1)
	}
	if sum.Queued > 0 {
		fmt.Fprintf(os.Stderr, "edi-as2: %d messages still queued when -settle (%v) ran out; raise -settle to let the drain finish\n", sum.Queued, o.settle)
		os.Exit(1)
	}
}
