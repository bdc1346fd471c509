// Command edi-as2 runs floodgate's main job end to end on one machine: X12 850
// purchase orders for several retailers (-retailers) are published to NATS
// JetStream, and one Watermill handler, built with floodgate.New, delivers
// each over AS2 to the retailer its AS2-To names, each retailer behind its
// own circuit breaker. One retailer (-faulty) follows a fault script
// (healthy, outage, fragile recovery, healthy); the others stay healthy and
// keep flowing. -outage-calls N makes the outage last until the retailer
// answered N requests with 503 (and at least -outage), so its breaker sees
// them however slowly the machine runs; the producer goes on past
// -produce-for until the retailer has recovered (its last phase, its
// breaker closed), so the recovery always has traffic. While the faulty retailer's breaker is open, its orders are
// diverted to the JetStream retry queue; its drain releases the backlog
// once it is back, at a rate that seeks its spare capacity (-capacity-after
// sets its capacity once recovered). The timeline shows every
// breaker, the backlog and the faulty retailer's drain rate each second. At
// the end each retailer's received set is checked against the orders
// produced for it (an order another retailer received is misdelivered);
// the summary has a line per retailer and adds the faulty retailer's
// re-trips after recovery, time to full traffic and drain time.
//
//	go run ./examples/edi-as2                  # embedded NATS, default script
//	go run ./examples/edi-as2 -summary s.json  # also write a JSON summary
//	go run ./examples/edi-as2 -nats-url nats://127.0.0.1:4222
//	go run ./examples/edi-as2 -mdn async      # asynchronous MDNs (RFC 4130 §7.3)
//	go run ./examples/edi-as2 -as2-cert ours.pem -as2-key ours.key  # our AS2 certificate and key
//
// Secrets come from outside when given: our AS2 certificate and private key
// (-as2-cert, -as2-key; otherwise throwaway ones per retailer) and the NATS
// credentials (-user/-password, -token, -creds, -nkey or their NATS_*
// variables); none is ever printed.
//
// It exits 0 when every order was delivered to its own retailer or
// dead-lettered, 1 when some were lost, misdelivered or still queued when
// -settle ran out, 2 on bad flags.
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
	if sum.Lost > 0 || sum.Misdelivered > 0 {
		fmt.Fprintf(os.Stderr, "edi-as2: %d orders lost, %d misdelivered\n", sum.Lost, sum.Misdelivered)
		os.Exit(1)
	}
	if sum.Queued > 0 {
		fmt.Fprintf(os.Stderr, "edi-as2: %d messages still queued when -settle (%v) ran out; raise -settle to let the drain finish\n", sum.Queued, o.settle)
		os.Exit(1)
	}
}
