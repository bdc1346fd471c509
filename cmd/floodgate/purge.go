package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/floodgate-go/floodgate/retryqueue"
)

// purgeReport is the output of "floodgate purge".
type purgeReport struct {
	Stream string `json:"stream"`
	// Queue is "dead" or "retry" (-queue).
	Queue         string `json:"queue"`
	OriginalTopic string `json:"original_topic,omitempty"`
	Reason        string `json:"reason,omitempty"`
	OlderThan     string `json:"older_than,omitempty"`
	DryRun        bool   `json:"dry_run"`
	// Selected counts the messages the filters selected (all of them
	// without filters).
	Selected uint64 `json:"selected"`
	// Purged counts the messages removed; 0 on a dry run.
	Purged uint64 `json:"purged"`
}

const purgeUsage = `Usage: floodgate purge [-s URL | -context NAME] [auth flags] -yes [flags]

Removes messages for good: by default the dead letters, with -queue retry the
retry backlog (messages never delivered: they are lost). -original-topic,
-reason (dead letters; as in "floodgate deadletters list") and -older-than
select a part (each selected message is deleted by sequence);
without them the stream is purged up to its last message when the command
starts. It refuses to run without -yes; -dry-run only counts. No consumer is
created.

Flags:
`

// runPurge is "floodgate purge".
func runPurge(args []string, stdout, stderr io.Writer) int {
	var (
		f             streamFlags
		queue, origin string
		olderThan     time.Duration
		yes, dryRun   bool
		reason        reasonFlag
	)
	fs := flag.NewFlagSet("floodgate purge", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(fs.Output(), purgeUsage); fs.PrintDefaults() }
	f.register(fs)
	fs.StringVar(&queue, "queue", "dead", "which stream to purge: `dead` (the -dead-topic stream) or retry (the -retry-topic stream)")
	fs.StringVar(&origin, "original-topic", "", "only messages whose floodgate_original_topic is this `topic`")
	fs.Var(&reason, "reason", "with -queue dead, "+reasonUsage+reasonValues())
	fs.DurationVar(&olderThan, "older-than", 0, "only messages stored at least this long ago, >= 0")
	fs.BoolVar(&yes, "yes", false, "really remove the messages (required unless -dry-run)")
	fs.BoolVar(&dryRun, "dry-run", false, "count what would be removed and remove nothing")
	if err := parseFlags(fs, args, stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() > 0 {
		return cmdUsageError(stderr, "purge", "unexpected argument %q (flags only; see -h)", fs.Arg(0))
	}
	if msg := f.check(); msg != "" {
		return cmdUsageError(stderr, "purge", "%s", msg)
	}
	stream := f.deadTopic
	switch queue {
	case "dead":
	case "retry":
		stream = f.retryTopic
	default:
		return cmdUsageError(stderr, "purge", "-queue: unknown queue %q, allowed dead or retry", queue)
	}
	if reason != "" && queue != "dead" {
		return cmdUsageError(stderr, "purge", "-reason selects dead letters: it needs -queue dead")
	}
	if olderThan < 0 {
		return cmdUsageError(stderr, "purge", "-older-than must be >= 0, got %v", olderThan)
	}
	if !yes && !dryRun {
		return cmdUsageError(stderr, "purge", "refusing to remove messages from %s without -yes (or count them with -dry-run)", stream)
	}

	ctx, cancel := context.WithTimeout(context.Background(), f.timeout)
	defer cancel()
	var den denials // a denied request ends the purge at once (a read-only user's)
	ctx, stop := den.guardAll(ctx)
	defer stop()
	nc, js, err := connect(f.conn, den.option())
	if err != nil {
		return cmdError(stderr, "purge", err)
	}
	defer nc.Close()

	rep := purgeReport{Stream: stream, Queue: queue, OriginalTopic: origin, Reason: string(reason), DryRun: dryRun}
	if olderThan > 0 {
		rep.OlderThan = olderThan.String()
	}
	if err := purge(ctx, js, &rep, f.route.subject(stream), origin, reason, olderThan, time.Now(), func(label string, total uint64) *progressBar {
		return newProgress(stderr, f.progress, label, total)
	}); err != nil {
		err = deniedCause(ctx, err)
		if f.format == "json" && !errors.Is(err, errStreamNotFound) {
			writeJSON(stdout, rep) // what was done before the failure
		}
		return cmdError(stderr, "purge", err)
	}
	if f.format == "json" {
		if err := writeJSON(stdout, rep); err != nil {
			return cmdError(stderr, "purge", err)
		}
		return exitOK
	}
	verb := "purged"
	n := rep.Purged
	if dryRun {
		verb, n = "would purge", rep.Selected
	}
	fmt.Fprintf(stdout, "%s %d messages from %s", verb, n, stream)
	if origin != "" {
		fmt.Fprintf(stdout, " (original topic %s)", origin)
	}
	if reason != "" {
		fmt.Fprintf(stdout, " (reason %s)", reason)
	}
	if olderThan > 0 {
		fmt.Fprintf(stdout, " (older than %v)", olderThan)
	}
	fmt.Fprintln(stdout)
	return exitOK
}

// purge selects and removes messages of rep.Stream; it fills rep as it
// goes, so a failure reports what was done.
func purge(ctx context.Context, js jetstream.JetStream, rep *purgeReport, subject, origin string, reason reasonFlag, olderThan time.Duration, now time.Time, prog func(string, uint64) *progressBar) error {
	flag := "-dead-topic"
	if rep.Queue == "retry" {
		flag = "-retry-topic"
	}
	st, err := requireStream(ctx, js, rep.Stream, flag)
	if err != nil {
		return err
	}
	info := st.CachedInfo()
	if subject == "" && origin == "" && reason == "" && olderThan == 0 { // everything stored now: one request
		rep.Selected = info.State.Msgs
		if rep.DryRun || info.State.Msgs == 0 {
			return nil
		}
		if err := st.Purge(ctx, jetstream.WithPurgeSequence(info.State.LastSeq+1)); err != nil {
			return fmt.Errorf("purge %s: %w", rep.Stream, err)
		}
		rep.Purged = info.State.Msgs
		return nil
	}
	var seqs []uint64
	err = scanStream(ctx, st, subject, prog("scanning "+rep.Stream, info.State.Msgs),
		func(m storedMsg) error {
			if origin != "" && m.header.Get(retryqueue.MetaOriginalTopic) != origin ||
				!reason.match(m.header.Get(retryqueue.MetaDeadReason)) {
				return nil
			}
			if olderThan > 0 && now.Sub(m.at) < olderThan {
				return nil
			}
			seqs = append(seqs, m.seq)
			return nil
		})
	if err != nil {
		return err
	}
	rep.Selected = uint64(len(seqs))
	if rep.DryRun || len(seqs) == 0 {
		return nil
	}
	bar := prog("purging "+rep.Stream, uint64(len(seqs)))
	defer bar.done()
	for _, seq := range seqs {
		err := st.DeleteMsg(ctx, seq)
		if err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) { // acked or deleted meanwhile: gone anyway
			return fmt.Errorf("delete message %d from %s: %w", seq, rep.Stream, err)
		}
		if err == nil {
			rep.Purged++
		}
		bar.add(1)
	}
	return nil
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
