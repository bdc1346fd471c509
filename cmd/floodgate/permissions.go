package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/floodgate-go/floodgate/breaker/natskv"
	"github.com/floodgate-go/floodgate/permissions"
)

// runPermissions prints the NATS permissions of a service's user or of an
// operator's CLI user (package permissions), as a nats-server
// configuration block or JSON.
func runPermissions(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("floodgate permissions", flag.ContinueOnError)
	var cfg permissions.Config
	var role, format string
	fs.StringVar(&cfg.Service, "service", "", "the service's `name` (retryqueue.Config.Service); required for -role service")
	fs.StringVar(&role, "role", "", "whose permissions: `service` (a service's replicas), ro (status, backlog counts; reads no message) or rw (also deadletters, purge, replay, open, close, reset, migrate)")
	fs.StringVar(&cfg.RetryTopic, "retry-topic", "", "retry stream (retryqueue.Config.RetryTopic); a service's own (default for ro/rw: "+defaultRetryTopic+")")
	fs.StringVar(&cfg.DeadLetterTopic, "dead-topic", "", "dead-letter stream (retryqueue.Config.DeadLetterTopic); a service's own (default for ro/rw: "+defaultDeadTopic+")")
	fs.StringVar(&cfg.PayloadBucket, "payload-bucket", "", "payload bucket (retryqueue.Config.PayloadBucket; default: derived from -dead-topic)")
	fs.StringVar(&cfg.FleetBucket, "bucket", "", "KV `bucket` of the service's fleet breakers (natskv.Config.Bucket, e.g. "+natskv.DefaultBucket+"); default: none")
	fs.StringVar(&cfg.ReceiptBucket, "receipt-bucket", "", "KV `bucket` of the service's pending asynchronous AS2 receipts (asyncmdn.StoreConfig.Bucket); default: none")
	fs.Func("source", "a `topic[=consumer]` the service consumes with jsq (split at the first =; consumer default: jsq.DefaultConsumerName); repeatable; -role service only", func(v string) error {
		topic, consumer, _ := strings.Cut(v, "=")
		cfg.Sources = append(cfg.Sources, permissions.Source{Topic: topic, Consumer: consumer})
		return nil
	})
	fs.StringVar(&format, "format", "nats-conf", "output `format`: nats-conf or json")
	if err := parseFlags(fs, args, stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	cfg.Role = permissions.Role(role)
	if format != "nats-conf" && format != "json" {
		fmt.Fprintf(stderr, "floodgate permissions: -format %q, want nats-conf or json\n", format)
		return exitUsage
	}
	set, err := permissions.Generate(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "floodgate permissions: %v\n", err)
		return exitUsage
	}
	if format == "json" {
		stdout.Write(set.JSON())
		return exitOK
	}
	if cfg.Role == permissions.RoleService {
		fmt.Fprintf(stdout, "# connect with nats.CustomInboxPrefix(%q)\n", permissions.InboxPrefix(cfg.Service))
	}
	fmt.Fprint(stdout, set.NATSConf())
	return exitOK
}
