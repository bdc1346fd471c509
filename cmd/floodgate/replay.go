package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/floodgate-go/floodgate/internal/natsconn"
	"github.com/floodgate-go/floodgate/jsq"
	"github.com/floodgate-go/floodgate/retryqueue"
)

const replayUsage = `Usage: floodgate replay [-s URL | -context NAME] [auth flags] [flags]

Moves dead letters back into the retry queue, oldest first, where the drainer
delivers them again. Each is published to the retry stream and removed from the
dead-letter stream only after JetStream confirmed the publish: an interrupted
replay leaves a duplicate, never a loss. Its attempt count and age start afresh.
Select all dead letters (the default), or those of one original topic
(-original-topic, as in "floodgate purge"; -topic is an alias kept for old
scripts), of one reason (-reason, as in "floodgate deadletters list"), or
those dead-lettered at least -older-than ago; -limit caps how many are
moved.

A dead letter with reason too-large (its payload kept in the payload bucket)
does not fit the retry stream: with -original-topic T it is restored from the
bucket and published, as first consumed, back to T, and its objects removed.
Dead letters that cannot be replayed are listed with the reason and left in
place.

Flags:
`

// replayOptions are the flags of "floodgate replay".
type replayOptions struct {
	conn       natsconn.Options
	route      routeFlags
	topic      string
	reason     reasonFlag
	olderThan  time.Duration
	limit      int
	dryRun     bool
	retryTopic string
	deadTopic  string
	format     string
	timeout    time.Duration
	progress   bool
}

func parseReplayFlags(args []string, stderr io.Writer) (replayOptions, error) {
	var o replayOptions
	fs := flag.NewFlagSet("floodgate replay", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), replayUsage)
		fs.PrintDefaults()
	}
	o.conn.Register(fs)
	var alias string
	fs.StringVar(&o.topic, "original-topic", "", "replay only dead letters whose floodgate_original_topic is this `topic` (default: any)")
	fs.StringVar(&alias, "topic", "", "the same as -original-topic `topic` (an alias kept for old scripts)")
	fs.Var(&o.reason, "reason", "replay "+reasonUsage+reasonValues())
	fs.DurationVar(&o.olderThan, "older-than", 0, "replay only dead letters dead-lettered at least this long ago, >= 0 (default: any age)")
	fs.IntVar(&o.limit, "limit", 0, "replay at most this many (oldest first), >= 0 (default 0: no limit)")
	o.route.register(fs)
	fs.BoolVar(&o.dryRun, "dry-run", false, "list what would be replayed; move nothing")
	fs.StringVar(&o.retryTopic, "retry-topic", "floodgate_retry", "retry stream (retryqueue.Config.RetryTopic)")
	fs.StringVar(&o.deadTopic, "dead-topic", "floodgate_dead", "dead-letter stream (retryqueue.Config.DeadLetterTopic)")
	fs.StringVar(&o.format, "format", "table", "output `format`: table or json")
	fs.DurationVar(&o.timeout, "timeout", 5*time.Minute, "give up after this long, in (0, 24h]")
	fs.BoolVar(&o.progress, "progress", false, "draw a progress bar on stderr even when it is not a terminal (it is drawn on a terminal anyway)")
	if err := parseFlags(fs, args, stderr); err != nil {
		return o, err
	}
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	if set["topic"] {
		if set["original-topic"] && alias != o.topic {
			return o, fmt.Errorf("-topic (an alias of -original-topic) %q and -original-topic %q differ; give one", alias, o.topic)
		}
		o.topic = alias
	}
	switch {
	case fs.NArg() > 0:
		return o, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	case o.olderThan < 0:
		return o, fmt.Errorf("-older-than must be >= 0, got %v", o.olderThan)
	case o.limit < 0:
		return o, fmt.Errorf("-limit must be >= 0, got %d", o.limit)
	case o.format != "table" && o.format != "json":
		return o, fmt.Errorf("-format: unknown format %q, allowed table or json", o.format)
	case o.timeout <= 0 || o.timeout > 24*time.Hour:
		return o, fmt.Errorf("-timeout must be in (0, 24h], got %v", o.timeout)
	}
	if msg := checkTopics(o.retryTopic, o.deadTopic); msg != "" {
		return o, errors.New(msg)
	}
	return o, nil
}

// runReplay is "floodgate replay".
func runReplay(args []string, stdout, stderr io.Writer) int {
	o, err := parseReplayFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if errors.Is(err, errReported) {
		return exitUsage
	}
	if err != nil {
		fmt.Fprintln(stderr, "floodgate replay:", err)
		return exitUsage
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	var den denials // a denied request ends the replay at once (a read-only user's)
	ctx, stop := den.guardAll(ctx)
	defer stop()
	res, err := replay(ctx, o, &den, stderr)
	if res != nil {
		writeReplay(stdout, o, *res)
	}
	if err != nil {
		err = deniedCause(ctx, err)
		fmt.Fprintln(stderr, "floodgate replay:", err)
		return exitError
	}
	return exitOK
}

// replay connects, reporting permission violations to den, checks both
// streams exist, and replays.
func replay(ctx context.Context, o replayOptions, den *denials, stderr io.Writer) (*retryqueue.ReplayResult, error) {
	nc, js, err := connect(o.conn, den.option())
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	for _, s := range []struct{ name, flag string }{{o.deadTopic, "-dead-topic"}, {o.retryTopic, "-retry-topic"}} {
		if _, err := requireStream(ctx, js, s.name, s.flag); err != nil {
			return nil, err
		}
	}
	pub, err := jsq.NewPublisher(jsq.PublisherConfig{Conn: nc})
	if err != nil {
		return nil, err
	}
	defer pub.Close()
	// Replay puts each dead letter back on its own route: the queue's own
	// route (Service) is never used.
	q, err := retryqueue.New(retryqueue.Config{Publisher: pub, Service: "floodgate-cli", RetryTopic: o.retryTopic, DeadLetterTopic: o.deadTopic})
	if err != nil {
		return nil, err
	}
	var bar *progressBar
	progress := func(n, total uint64) {
		if bar == nil {
			bar = newProgress(stderr, o.progress, "replaying "+o.deadTopic, total)
		}
		bar.add(n - bar.n)
	}
	res, err := q.Replay(ctx, js, retryqueue.ReplayFilter{Service: o.route.service, Partner: o.route.partner, OriginalTopic: o.topic,
		MatchReason: o.reason.matcher(), OlderThan: o.olderThan, Limit: o.limit, DryRun: o.dryRun, Progress: progress})
	if bar != nil {
		bar.done()
	}
	return &res, err
}

func writeReplay(w io.Writer, o replayOptions, res retryqueue.ReplayResult) {
	if o.format == "json" {
		out := struct {
			retryqueue.ReplayResult
			DryRun bool `json:"dry_run"`
		}{res, o.dryRun}
		if out.UUIDs == nil {
			out.UUIDs = []string{}
		}
		b, _ := json.MarshalIndent(out, "", "  ")
		fmt.Fprintln(w, string(b))
		return
	}
	verb := "replayed"
	if o.dryRun {
		verb = "would replay"
	}
	fmt.Fprintf(w, "scanned %d dead letters in %s, selected %d, %s %d to %s\n",
		res.Scanned, o.deadTopic, res.Selected, verb, max(res.Replayed, boolInt(o.dryRun)*res.Selected), o.retryTopic)
	if res.Restored > 0 {
		fmt.Fprintf(w, "of which %d too-large, restored from the payload bucket to %s\n", res.Restored, o.topic)
	}
	for _, id := range res.UUIDs {
		fmt.Fprintln(w, id)
	}
	for _, sk := range res.Skipped {
		fmt.Fprintf(w, "skipped %s: %s\n", sk.UUID, sk.Why)
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
