package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/floodgate-go/floodgate/retryqueue"
)

// migrateStream is one stream as "floodgate migrate" found it.
type migrateStream struct {
	Stream string `json:"stream"`
	// Layout is "previous" (the stream's name is a subject), "route" (already
	// migrated: nothing to do) or "missing".
	Layout string `json:"layout"`
	// Subject is the route subject its messages move to.
	Subject string `json:"subject"`
	// Bare counts the messages stored under the bare subject when the
	// command started, by floodgate_original_topic ("(none)" without it).
	Bare map[string]uint64 `json:"bare,omitempty"`
}

// migrateReport is the output of "floodgate migrate".
type migrateReport struct {
	Service string          `json:"service"`
	Partner string          `json:"partner"`
	DryRun  bool            `json:"dry_run"`
	Streams []migrateStream `json:"streams"`
	// UnfilteredConsumers are the previous release's drainer consumers on
	// the retry stream: deleted, or to be deleted on a dry run.
	UnfilteredConsumers []string `json:"unfiltered_consumers,omitempty"`
	// Moved counts the messages moved; 0 on a dry run.
	Moved int `json:"moved"`
}

const migrateUsage = `Usage: floodgate migrate [-s URL | -context NAME] [auth flags] (-source TOPIC [-handler NAME] | -service NAME) [flags]

Moves the retry and dead-letter streams of the previous release (the stream's
name as its only subject, one unfiltered drainer consumer) to the route layout
(subjects <topic>.>; messages under <topic>.<service>.<partner>), losing no
message: retryqueue.Migrate. Every message stored under the bare subject moves
to the route of -service (default -source + "/" + -handler, as
retryqueue.Config derives it) and -partner, each copy confirmed before its
original is deleted (a crash leaves a duplicate, never a loss). The retry
stream's unfiltered consumers are deleted. Streams already in the route
layout, or missing, are left alone, so a second run does nothing.

Stop every replica of the previous release first. The previous release kept
the messages of every service on one retry topic in one stream: the command
refuses to move a message whose floodgate_original_topic is not
-original-topic (default -source), since it would be delivered to this
route's partner; -all-topics moves them all anyway. -dry-run reports what
would be done and changes nothing.

Flags:
`

// runMigrate is "floodgate migrate".
func runMigrate(args []string, stdout, stderr io.Writer) int {
	var (
		f                        streamFlags
		service, source, handler string
		partnerKey, origin       string
		allTopics, dryRun        bool
	)
	fs := flag.NewFlagSet("floodgate migrate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(fs.Output(), migrateUsage); fs.PrintDefaults() }
	f.conn.Register(fs)
	fs.StringVar(&f.retryTopic, "retry-topic", defaultRetryTopic, "retry stream (retryqueue.Config.RetryTopic)")
	fs.StringVar(&f.deadTopic, "dead-topic", defaultDeadTopic, "dead-letter stream (retryqueue.Config.DeadLetterTopic)")
	fs.StringVar(&f.format, "format", "table", "output `format`: table or json")
	fs.DurationVar(&f.timeout, "timeout", 5*time.Minute, "give up after this long, in (0, 24h]")
	fs.StringVar(&source, "source", "", "the `topic` the service consumes (retryqueue.Config.Source)")
	fs.StringVar(&handler, "handler", "", "the service's handler `name` (retryqueue.Config.Handler)")
	fs.StringVar(&service, "service", "", "the route's `service` (retryqueue.Config.Service; default -source + \"/\" + -handler)")
	fs.StringVar(&partnerKey, "partner", retryqueue.DefaultPartner, "the route's partner `key` (retryqueue.Config.Partner)")
	fs.StringVar(&origin, "original-topic", "", "the floodgate_original_topic every moved message must have (default -source)")
	fs.BoolVar(&allTopics, "all-topics", false, "move every message to the route, whatever its floodgate_original_topic")
	fs.BoolVar(&dryRun, "dry-run", false, "report what would be moved and deleted; change nothing")
	fs.BoolVar(&f.progress, "progress", false, "draw a progress bar on stderr even when it is not a terminal (it is drawn on a terminal anyway)")
	if err := parseFlags(fs, args, stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() > 0 {
		return cmdUsageError(stderr, "migrate", "unexpected argument %q (flags only; see -h)", fs.Arg(0))
	}
	if msg := f.check(); msg != "" {
		return cmdUsageError(stderr, "migrate", "%s", msg)
	}
	switch {
	case service == "" && source == "":
		return cmdUsageError(stderr, "migrate", "-source or -service is required: the route the previous release's messages move to")
	case service != "" && (source != "" || handler != ""):
		return cmdUsageError(stderr, "migrate", "-service names the route; give it alone, or -source and -handler")
	case service == "":
		service = retryqueue.ServiceName(source, handler)
	}
	if origin == "" {
		origin = source
	}
	if origin == "" && !allTopics {
		return cmdUsageError(stderr, "migrate", "-original-topic is required with -service (the topic whose messages move), or -all-topics")
	}
	if origin != "" && allTopics {
		return cmdUsageError(stderr, "migrate", "-all-topics moves every message; it excludes -original-topic")
	}
	if partnerKey == "" {
		return cmdUsageError(stderr, "migrate", "-partner: a partner key is required (default %q)", retryqueue.DefaultPartner)
	}

	ctx, cancel := context.WithTimeout(context.Background(), f.timeout)
	defer cancel()
	nc, js, err := f.connect()
	if err != nil {
		return cmdError(stderr, "migrate", err)
	}
	defer nc.Close()

	cfg := retryqueue.Config{Service: service, Partner: partnerKey, RetryTopic: f.retryTopic, DeadLetterTopic: f.deadTopic}
	rep := migrateReport{Service: service, Partner: partnerKey, DryRun: dryRun}
	fail := func(err error) int {
		if f.format == "json" {
			_ = writeJSON(stdout, rep)
		}
		return cmdError(stderr, "migrate", err)
	}
	if err := migratePlan(ctx, js, &rep, f.retryTopic, f.deadTopic, func(label string, total uint64) *progressBar {
		return newProgress(stderr, f.progress, label, total)
	}); err != nil {
		return fail(err)
	}
	if !allTopics {
		if other := foreignTopics(rep, origin); len(other) > 0 {
			return fail(fmt.Errorf("the previous layout holds messages of other topics than %q: %s; moved to this route they would go to its partner: migrate with -all-topics only if they should (nothing changed)",
				origin, strings.Join(other, ", ")))
		}
	}
	if !dryRun {
		res, err := retryqueue.Migrate(ctx, js, cfg)
		rep.Moved = res.Moved
		rep.UnfilteredConsumers = res.DeletedConsumers
		if err != nil {
			return fail(err)
		}
	}
	if f.format == "json" {
		if err := writeJSON(stdout, rep); err != nil {
			return cmdError(stderr, "migrate", err)
		}
		return exitOK
	}
	writeMigrate(stdout, rep)
	return exitOK
}

// migratePlan fills rep with each stream's layout, its bare messages by
// original topic and the retry stream's unfiltered consumers, changing
// nothing.
func migratePlan(ctx context.Context, js jetstream.JetStream, rep *migrateReport, retry, dead string, prog func(string, uint64) *progressBar) error {
	for i, name := range []string{retry, dead} {
		ms := migrateStream{Stream: name, Subject: retryqueue.RouteSubject(name, rep.Service, rep.Partner)}
		st, err := js.Stream(ctx, name)
		switch {
		case errors.Is(err, jetstream.ErrStreamNotFound):
			ms.Layout = "missing"
		case err != nil:
			return fmt.Errorf("stream %s: %w", name, err)
		case !slices.Contains(st.CachedInfo().Config.Subjects, name):
			ms.Layout = "route"
		default:
			ms.Layout = "previous"
			ms.Bare = map[string]uint64{}
			if err := scanStream(ctx, st, name, prog("scanning "+name, st.CachedInfo().State.Msgs),
				func(m storedMsg) error {
					topic := m.header.Get(retryqueue.MetaOriginalTopic)
					if topic == "" {
						topic = noTopic
					}
					ms.Bare[topic]++
					return nil
				}); err != nil {
				return err
			}
			if i == 0 && rep.DryRun {
				lister := st.ListConsumers(ctx)
				for ci := range lister.Info() {
					if ci.Config.FilterSubject == "" && len(ci.Config.FilterSubjects) == 0 {
						rep.UnfilteredConsumers = append(rep.UnfilteredConsumers, name+"/"+ci.Name)
					}
				}
				if err := lister.Err(); err != nil {
					return fmt.Errorf("list consumers of %s: %w", name, err)
				}
			}
		}
		rep.Streams = append(rep.Streams, ms)
	}
	return nil
}

// foreignTopics lists the original topics other than origin among the bare
// messages, with their counts.
func foreignTopics(rep migrateReport, origin string) []string {
	var out []string
	for _, ms := range rep.Streams {
		for topic, n := range ms.Bare {
			if topic != origin {
				out = append(out, fmt.Sprintf("%s in %s: %d", topic, ms.Stream, n))
			}
		}
	}
	sort.Strings(out)
	return out
}

func writeMigrate(w io.Writer, rep migrateReport) {
	verb := "moved"
	if rep.DryRun {
		verb = "would move"
	}
	for _, ms := range rep.Streams {
		switch ms.Layout {
		case "missing":
			fmt.Fprintf(w, "%s: no such stream, nothing to do\n", ms.Stream)
		case "route":
			fmt.Fprintf(w, "%s: route layout already, nothing to do\n", ms.Stream)
		default:
			var n uint64
			for _, c := range ms.Bare {
				n += c
			}
			fmt.Fprintf(w, "%s: previous layout, %d messages on %s to %s\n", ms.Stream, n, ms.Stream, ms.Subject)
		}
	}
	for _, c := range rep.UnfilteredConsumers {
		if rep.DryRun {
			fmt.Fprintf(w, "would delete the unfiltered consumer %s\n", c)
		} else {
			fmt.Fprintf(w, "deleted the unfiltered consumer %s\n", c)
		}
	}
	if rep.DryRun {
		var n uint64
		for _, ms := range rep.Streams {
			for _, c := range ms.Bare {
				n += c
			}
		}
		fmt.Fprintf(w, "%s %d messages to service %q, partner %q\n", verb, n, rep.Service, rep.Partner)
		return
	}
	fmt.Fprintf(w, "%s %d messages to service %q, partner %q\n", verb, rep.Moved, rep.Service, rep.Partner)
}
