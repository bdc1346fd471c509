package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/floodgate-go/floodgate/jsq"
	"github.com/floodgate-go/floodgate/retryqueue"
)

// deadLetter is one dead letter in the output of "floodgate deadletters"
// (the documented JSON schema: README, "Dead letters"). Times are RFC 3339
// UTC, durations in seconds, sizes in bytes.
type deadLetter struct {
	Seq     uint64 `json:"seq"`
	UUID    string `json:"uuid"`
	Subject string `json:"subject"`
	// Service and Partner are the route (retryqueue.Config.Service and
	// the partner key, retryqueue.PartnerKey); empty when absent.
	Service       string `json:"service"`
	Partner       string `json:"partner"`
	OriginalTopic string `json:"original_topic"`
	// Reason is the dead-letter reason (retryqueue.DeadReason*).
	Reason    string `json:"reason"`
	LastError string `json:"last_error"`
	Attempts  int    `json:"attempts"`
	// DeadLetteredAt is floodgate_dead_at, else the stream's timestamp.
	DeadLetteredAt  string  `json:"dead_lettered_at"`
	AgeSeconds      float64 `json:"age_seconds"`
	FirstDivertedAt string  `json:"first_diverted_at,omitempty"`
	Replays         int     `json:"replays"`
	// SizeBytes is the payload size: for a payload kept in the payload
	// bucket (PayloadInBucket), its size there.
	SizeBytes       int    `json:"size_bytes"`
	PayloadInBucket bool   `json:"payload_in_bucket"`
	PayloadPreview  string `json:"payload_preview"`
	// History and Metadata are in "show" only.
	History  []historyEntry    `json:"history,omitempty"`
	Metadata map[string]string `json:"metadata,omitempty"`
}

// historyEntry is a retryqueue.HistoryEntry with its Retry-After hint in
// seconds.
type historyEntry struct {
	At                string  `json:"at"`
	Event             string  `json:"event"`
	Reason            string  `json:"reason,omitempty"`
	Attempt           int     `json:"attempt"`
	Error             string  `json:"error,omitempty"`
	RetryAfterSeconds float64 `json:"retry_after_seconds,omitempty"`
}

// deadLetterList is the output of "floodgate deadletters list".
type deadLetterList struct {
	Stream string `json:"stream"`
	// Scanned counts the dead letters looked at, Matched those the filters
	// selected; DeadLetters holds the first -limit of them, oldest first.
	Scanned     uint64       `json:"scanned"`
	Matched     uint64       `json:"matched"`
	DeadLetters []deadLetter `json:"dead_letters"`
}

// toMessage maps a stored message to a Watermill message as jsq.Unmarshal
// does (first value of each non-reserved header), for retryqueue's
// metadata helpers.
func toMessage(m storedMsg) *message.Message {
	wm := message.NewMessage(m.header.Get(jsq.UUIDHeader), m.data)
	for k, v := range m.header {
		if !jsq.Reserved(k) && len(v) > 0 {
			wm.Metadata.Set(k, v[0])
		}
	}
	return wm
}

// describe builds the dead letter of m; preview bytes of the payload are
// shown, full adds the history and the metadata.
func describe(m storedMsg, now time.Time, preview int, full bool) deadLetter {
	wm := toMessage(m)
	md := wm.Metadata
	d := deadLetter{
		Seq: m.seq, UUID: wm.UUID, Subject: m.subject, Service: md.Get(retryqueue.MetaService),
		OriginalTopic: md.Get(retryqueue.MetaOriginalTopic), Reason: md.Get(retryqueue.MetaDeadReason),
		LastError: md.Get(retryqueue.MetaLastError), Attempts: retryqueue.Attempt(wm),
		FirstDivertedAt: md.Get(retryqueue.MetaFirstDivertedAt), SizeBytes: len(m.data),
	}
	d.Partner, _ = retryqueue.PartnerKey(wm)
	d.Replays, _ = strconv.Atoi(md.Get(retryqueue.MetaReplays))
	at := deadAt(m)
	d.DeadLetteredAt, d.AgeSeconds = rfc3339(at), now.Sub(at).Seconds()
	if md.Get(retryqueue.MetaPayloadObject) != "" {
		d.PayloadInBucket = true
		d.SizeBytes, _ = strconv.Atoi(md.Get(retryqueue.MetaPayloadSize))
	}
	d.PayloadPreview = previewOf(m.data, preview)
	if full {
		h, err := retryqueue.History(wm)
		if err != nil {
			d.History = []historyEntry{{Event: "unreadable", Error: err.Error()}}
		}
		for _, e := range h {
			d.History = append(d.History, historyEntry{At: rfc3339(e.At), Event: e.Event, Reason: e.Reason, Attempt: e.Attempt, Error: e.Error, RetryAfterSeconds: e.RetryAfter.Seconds()})
		}
		d.Metadata = md
	}
	return d
}

// deadAt is when m was dead-lettered: floodgate_dead_at, else its storage
// time.
func deadAt(m storedMsg) time.Time {
	if t, err := time.Parse(retryqueue.TimeFormat, m.header.Get(retryqueue.MetaDeadAt)); err == nil {
		return t
	}
	return m.at
}

// previewOf returns up to n bytes of data as text: valid UTF-8 with
// control characters escaped, or, for binary data, hex; "…" marks a cut.
func previewOf(data []byte, n int) string {
	cut := len(data) > n
	data = data[:min(len(data), n)]
	var s string
	if utf8.Valid(data) || cut && utf8.Valid(data[:max(0, len(data)-3)]) {
		s = strings.Map(func(r rune) rune {
			if r == utf8.RuneError || r < 0x20 && r != '\n' && r != '\t' || r == 0x7f {
				return '.'
			}
			return r
		}, string(data))
		s = strconv.Quote(s)
		s = s[1 : len(s)-1]
	} else {
		s = "hex:" + fmt.Sprintf("%x", data)
	}
	if cut {
		s += "…"
	}
	return s
}

const deadLettersUsage = `Usage:
  floodgate deadletters list [-s URL | -context NAME] [auth flags] [filters] [flags]
  floodgate deadletters show [-s URL | -context NAME] [auth flags] [flags] <uuid|seq>

list shows the dead letters, oldest first: sequence, UUID, age, reason,
attempts, route (service and partner), original topic, size and the last
error; -format json adds the payload preview (see the README for the
schema). Filters: -reason, -original-topic, -service, -partner,
-older-than, -newer-than. show prints one dead letter, by stream sequence
or UUID, with its metadata, attempt history and a payload preview. Scans
read with an ephemeral ordered consumer in batches (removed by the server
once idle). A missing stream is an
error (exit status 1).

Dead letters hold the partners' documents: reading them needs the rw
operator role of "floodgate permissions" (the ro role reads counts only,
with "floodgate status" and "backlog"). For a user without it the command
fails at once with "reading messages is not permitted" (exit status 1).

Flags:
`

// Default -preview lengths, in bytes (README, "Dead letters").
const (
	showPreview = 512
	listPreview = 32
)

// dlFlags are the flags of "floodgate deadletters".
type dlFlags struct {
	streamFlags
	reason               reasonFlag
	origin               string
	olderThan, newerThan time.Duration
	limit, preview       int
}

// runDeadLetters is "floodgate deadletters list|show".
func runDeadLetters(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || (args[0] != "list" && args[0] != "show") {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help") {
			return runDeadLetters([]string{"list", "-h"}, stdout, stderr)
		}
		return cmdUsageError(stderr, "deadletters", "want a subcommand: list or show")
	}
	sub := args[0]
	var f dlFlags
	fs := flag.NewFlagSet("floodgate deadletters "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(fs.Output(), deadLettersUsage); fs.PrintDefaults() }
	f.register(fs)
	fs.Var(&f.reason, "reason", reasonUsage+reasonValues())
	fs.StringVar(&f.origin, "original-topic", "", "only dead letters whose floodgate_original_topic is this `topic`")
	fs.DurationVar(&f.olderThan, "older-than", 0, "only dead letters dead-lettered at least this long ago, >= 0")
	fs.DurationVar(&f.newerThan, "newer-than", 0, "only dead letters dead-lettered less than this long ago, >= 0 (0: any)")
	fs.IntVar(&f.limit, "limit", 1000, "list at most this many (the oldest), >= 0 (0: no limit); the rest are counted")
	defPreview := listPreview
	if sub == "show" {
		defPreview = showPreview
	}
	fs.IntVar(&f.preview, "preview", defPreview, fmt.Sprintf("payload preview length in `bytes`, in [0, 65536]; default %d for show, %d for list (in its JSON)", showPreview, listPreview))
	fs.Lookup("preview").DefValue = "0" // the help names both defaults; -h shows no single one
	// Flags may come before or after the one argument of show.
	var pos []string
	rest := args[1:]
	for {
		if err := parseFlags(fs, rest, stderr); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return exitOK
			}
			return exitUsage
		}
		if fs.NArg() == 0 {
			break
		}
		pos, rest = append(pos, fs.Arg(0)), fs.Args()[1:]
	}
	cmd := "deadletters " + sub
	switch {
	case sub == "list" && len(pos) > 0:
		return cmdUsageError(stderr, cmd, "unexpected argument %q (flags only; see -h)", pos[0])
	case sub == "show" && len(pos) != 1:
		return cmdUsageError(stderr, cmd, "want one dead letter: its UUID or stream sequence")
	case f.olderThan < 0 || f.newerThan < 0:
		return cmdUsageError(stderr, cmd, "-older-than and -newer-than must be >= 0")
	case f.limit < 0:
		return cmdUsageError(stderr, cmd, "-limit must be >= 0, got %d", f.limit)
	case f.preview < 0 || f.preview > 65536:
		return cmdUsageError(stderr, cmd, "-preview must be in [0, 65536], got %d", f.preview)
	}
	if msg := f.check(); msg != "" {
		return cmdUsageError(stderr, cmd, "%s", msg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), f.timeout)
	defer cancel()
	var den denials
	nc, js, err := connect(f.conn, den.option())
	if err != nil {
		return cmdError(stderr, cmd, err)
	}
	defer nc.Close()
	st, err := requireStream(ctx, js, f.deadTopic, "-dead-topic")
	if err != nil {
		return cmdError(stderr, cmd, err)
	}
	now := time.Now()
	if sub == "show" {
		var d deadLetter
		err := den.guardRead(ctx, f.deadTopic, func(ctx context.Context) (err error) {
			d, err = showDeadLetter(ctx, st, pos[0], now, f.preview, newProgress(stderr, f.progress, "searching "+f.deadTopic, st.CachedInfo().State.Msgs))
			return err
		})
		if err != nil {
			return cmdError(stderr, cmd, err)
		}
		if f.format == "json" {
			if err := writeJSON(stdout, d); err != nil {
				return cmdError(stderr, cmd, err)
			}
			return exitOK
		}
		writeDeadLetter(stdout, d)
		return exitOK
	}
	out := deadLetterList{Stream: f.deadTopic, DeadLetters: []deadLetter{}}
	scanFn := listFn(&f, &out, now)
	err = den.guardRead(ctx, f.deadTopic, func(ctx context.Context) error {
		return scanStream(ctx, st, f.route.subject(f.deadTopic), newProgress(stderr, f.progress, "scanning "+f.deadTopic, st.CachedInfo().State.Msgs), scanFn)
	})
	if err != nil {
		return cmdError(stderr, cmd, err)
	}
	if f.format == "json" {
		if err := writeJSON(stdout, out); err != nil {
			return cmdError(stderr, cmd, err)
		}
		return exitOK
	}
	writeDeadLetterTable(stdout, out)
	return exitOK
}

// listFn is the scan function of "deadletters list": it counts and keeps
// the dead letters f selects into out.
func listFn(f *dlFlags, out *deadLetterList, now time.Time) func(storedMsg) error {
	return func(m storedMsg) error {
		out.Scanned++
		if !f.reason.match(m.header.Get(retryqueue.MetaDeadReason)) ||
			f.origin != "" && m.header.Get(retryqueue.MetaOriginalTopic) != f.origin {
			return nil
		}
		age := now.Sub(deadAt(m))
		if f.olderThan > 0 && age < f.olderThan || f.newerThan > 0 && age >= f.newerThan {
			return nil
		}
		out.Matched++
		if f.limit == 0 || len(out.DeadLetters) < f.limit {
			out.DeadLetters = append(out.DeadLetters, describe(m, now, f.preview, false))
		}
		return nil
	}
}

// showDeadLetter finds one dead letter by stream sequence (a number) or
// UUID (a scan).
func showDeadLetter(ctx context.Context, st jetstream.Stream, id string, now time.Time, preview int, bar *progressBar) (deadLetter, error) {
	name := st.CachedInfo().Config.Name
	if seq, err := strconv.ParseUint(id, 10, 64); err == nil {
		raw, err := st.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return deadLetter{}, fmt.Errorf("no dead letter with sequence %d in %s", seq, name)
		}
		if err != nil {
			return deadLetter{}, fmt.Errorf("stream %s: read message %d: %w", name, seq, err)
		}
		return describe(storedMsg{seq: raw.Sequence, subject: raw.Subject, header: raw.Header, data: raw.Data, at: raw.Time}, now, preview, true), nil
	}
	var found storedMsg
	err := scanStream(ctx, st, "", bar, func(m storedMsg) error {
		if m.header.Get(jsq.UUIDHeader) == id {
			found = m
			return errStopScan
		}
		return nil
	})
	switch {
	case errors.Is(err, errStopScan):
		return describe(found, now, preview, true), nil
	case err != nil:
		return deadLetter{}, err
	}
	return deadLetter{}, fmt.Errorf("no dead letter with UUID %q in %s", id, name)
}

func writeDeadLetterTable(w io.Writer, l deadLetterList) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SEQ\tUUID\tAGE\tREASON\tATTEMPTS\tSERVICE\tPARTNER\tORIGINAL TOPIC\tSIZE\tLAST ERROR")
	for _, d := range l.DeadLetters {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%d\t%s\n", d.Seq, oneLine(d.UUID, 80),
			time.Duration(d.AgeSeconds*float64(time.Second)).Truncate(time.Second), orDash(oneLine(d.Reason, 40)), d.Attempts,
			orDash(quoted(d.Service)), orDash(quoted(d.Partner)), orDash(oneLine(d.OriginalTopic, 80)), d.SizeBytes, orDash(oneLine(d.LastError, 60)))
	}
	tw.Flush()
	fmt.Fprintf(w, "%d of %d dead letters in %s match", l.Matched, l.Scanned, l.Stream)
	if n := uint64(len(l.DeadLetters)); n < l.Matched {
		fmt.Fprintf(w, "; the oldest %d shown (-limit)", n)
	}
	fmt.Fprintln(w)
}

func writeDeadLetter(w io.Writer, d deadLetter) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, kv := range [][2]string{
		{"sequence", strconv.FormatUint(d.Seq, 10)}, {"uuid", oneLine(d.UUID, 200)}, {"subject", oneLine(d.Subject, 300)},
		{"service", orDash(quoted(d.Service))}, {"partner", orDash(quoted(d.Partner))},
		{"original topic", orDash(oneLine(d.OriginalTopic, 300))}, {"reason", orDash(oneLine(d.Reason, 100))}, {"attempts", strconv.Itoa(d.Attempts)},
		{"replays", strconv.Itoa(d.Replays)}, {"dead-lettered at", oneLine(d.DeadLetteredAt, 100)},
		{"age", time.Duration(d.AgeSeconds * float64(time.Second)).Truncate(time.Second).String()},
		{"first diverted at", orDash(oneLine(d.FirstDivertedAt, 100))}, {"size", fmt.Sprintf("%d bytes", d.SizeBytes)},
		{"payload in bucket", strconv.FormatBool(d.PayloadInBucket)}, {"last error", orDash(oneLine(d.LastError, 1000))},
	} {
		fmt.Fprintf(tw, "%s:\t%s\n", kv[0], kv[1])
	}
	tw.Flush()
	fmt.Fprintln(w, "\nhistory:")
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  AT\tEVENT\tREASON\tATTEMPT\tERROR")
	for _, h := range d.History {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%d\t%s\n", orDash(oneLine(h.At, 40)), oneLine(h.Event, 40), orDash(oneLine(h.Reason, 40)), h.Attempt, orDash(oneLine(h.Error, 80)))
	}
	tw.Flush()
	fmt.Fprintln(w, "\nmetadata:")
	keys := make([]string, 0, len(d.Metadata))
	for k := range d.Metadata {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Fprintf(w, "  %s: %s\n", oneLine(k, 100), oneLine(d.Metadata[k], 200))
	}
	fmt.Fprintf(w, "\npayload (%d bytes): %s\n", d.SizeBytes, d.PayloadPreview)
}

// oneLine returns s on one line (control characters quoted), cut at n
// bytes.
func oneLine(s string, n int) string {
	if len(s) > n {
		s = s[:n] + "…"
	}
	q := strconv.Quote(s)
	return q[1 : len(q)-1]
}
