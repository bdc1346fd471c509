// Command geofence runs floodgate's second job end to end on one machine:
// a fleet of delivery vans reports GPS fixes to NATS JetStream, a Watermill
// handler evaluates enter, exit and dwell against geofence polygons (depots,
// customer sites, a restricted zone) with github.com/paulmach/orb, and the
// triggers go to HTTP webhook consumers (-consumers, each van's triggers to
// one of them) through one handler built with floodgate.New: the partner
// key is the consumer's endpoint, so each consumer has its own breaker,
// backlog and drain, and each its own fault script.
//
// The consumers other than -faulty have a slow period (-slow-at, -slow-for,
// -slow-latency) that stays below the breaker's slow-call threshold: they
// are degraded but never trip. The faulty consumer follows the fault
// script of the geofence design note: its P99 latency spikes to 900 ms,
// then it recovers at a set time (-healthy, then -degraded). By default half its answers take the 900 ms spike while
// degraded (-slow-fraction), the rest 20 ms: like the note's consumer, most
// of its calls are then above the breaker's 200 ms slow-call threshold.
// The breaker judges every call on latency (a success slower than
// -slow-call is a failure; 20 % slow calls over the last 20 trip it), trips,
// and probes the recovering consumer with at most two probes in flight,
// closing after five consecutive fast ones; its open window grows 1 s, 2 s,
// 4 s, … (jittered ±20 %, from -seed) while the probes are slow. A slow
// answer is still a delivery: the trigger is acked, and only the breaker
// counts it as a failure.
// Triggers rejected meanwhile wait in the JetStream retry queue and are
// drained once the breaker closes. Every trigger carries an idempotency key
// derived from (vehicle, fence, event, time) and a Standard Webhooks
// signature (webhook-id, webhook-timestamp, webhook-signature); the
// consumer verifies the signature, refuses replays, and counts a
// redelivered key as a duplicate.
//
// With -degraded-calls N the spike ends after N requests instead of after
// -degraded, so the breaker sees the same outage however slowly a loaded
// machine feeds the consumer (TestShortRun uses it). The summary tells a
// trip that judges calls sent during the outage (within the grace after
// the recovery) from a re-trip on the recovered consumer. The summary has a
// line per consumer: produced, delivered, misdelivered (received by another
// consumer), lost, trips, drain time.
//
// The trace and the fences are in testdata/ (see testdata/README.md); the
// trace is replayed -speed times faster than real time.
//
//	go run ./examples/geofence                  # embedded NATS, default script
//	go run ./examples/geofence -summary s.json  # also write a JSON summary
//	go run ./examples/geofence -nats-url nats://127.0.0.1:4222
//	FLOODGATE_WEBHOOK_SECRET=whsec_... go run ./examples/geofence
//
// Secrets come from outside when given: the consumers' Standard Webhooks
// secret (-webhook-secret-file, or $FLOODGATE_WEBHOOK_SECRET holding it;
// otherwise a throwaway one per consumer) and the NATS credentials
// (-user/-password, -token, -creds, -nkey or their NATS_* variables); none
// is ever printed.
//
// It exits 0 when every trigger reached its own consumer (or was
// dead-lettered) with the right content, 1 when one did not, reached
// another consumer or was still queued when -settle ran out, 2 on bad
// flags.
package main

//go:generate go run ./internal/gen -out testdata

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/floodgate-go/floodgate/internal/exampleutil"
)

func main() {
	o, err := parseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "geofence:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	sum, err := run(ctx, o, os.Stdout)
	if o.summary != "" && sum != nil {
		if werr := exampleutil.WriteJSON(o.summary, sum); werr != nil {
			fmt.Fprintln(os.Stderr, "geofence:", werr)
			os.Exit(1)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "geofence:", err)
		os.Exit(1)
	}
	if sum.Lost > 0 || sum.Misdelivered > 0 || sum.Unexpected > 0 || sum.ContentMismatches > 0 {
		fmt.Fprintf(os.Stderr, "geofence: %d triggers lost, %d misdelivered, %d unexpected, %d with the wrong content\n",
			sum.Lost, sum.Misdelivered, sum.Unexpected, sum.ContentMismatches)
		os.Exit(1)
	}
	if sum.Queued > 0 {
		fmt.Fprintf(os.Stderr, "geofence: %d messages still queued when -settle (%v) ran out; raise -settle to let the drain finish\n", sum.Queued, o.settle)
		os.Exit(1)
	}
}
