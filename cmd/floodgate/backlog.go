package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/floodgate-go/floodgate/internal/natsconn"
	"github.com/floodgate-go/floodgate/jsq"
	fgpartner "github.com/floodgate-go/floodgate/partner"
	"github.com/floodgate-go/floodgate/retryqueue"
)

// Defaults of the flags shared by the commands that work on the retry and
// dead-letter streams: those of retryqueue.Config.
const (
	defaultRetryTopic = "floodgate_retry"
	defaultDeadTopic  = "floodgate_dead"
	noTopic           = "(none)" // a message without floodgate_original_topic
)

// streamFlags are the flags of backlog and purge.
type streamFlags struct {
	conn       natsconn.Options
	retryTopic string
	deadTopic  string
	format     string
	timeout    time.Duration
	progress   bool
	route      routeFlags
}

// routeFlags select one service's or one partner's routes
// (retryqueue.RouteSubject); empty: any.
type routeFlags struct{ service, partner string }

func (r *routeFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&r.service, "service", "", "only the routes of this `service` (retryqueue.Config.Service, e.g. \"orders/as2\" derived from Source and Handler; default: any)")
	fs.StringVar(&r.partner, "partner", "", "only the routes of this partner `key` (retryqueue.Config.Partner, \"default\" when unset; default: any)")
}

// subject is the filter subject of the selected routes under stream, ""
// for any.
func (r routeFlags) subject(stream string) string {
	switch {
	case r.service != "" && r.partner != "":
		return retryqueue.RouteSubject(stream, r.service, r.partner)
	case r.service != "":
		return retryqueue.ServiceSubjects(stream, r.service)
	case r.partner != "":
		return stream + ".*." + fgpartner.Token(r.partner)
	}
	return ""
}

func (f *streamFlags) register(fs *flag.FlagSet) {
	f.conn.Register(fs)
	fs.StringVar(&f.retryTopic, "retry-topic", defaultRetryTopic, "retry stream (retryqueue.Config.RetryTopic)")
	fs.StringVar(&f.deadTopic, "dead-topic", defaultDeadTopic, "dead-letter stream (retryqueue.Config.DeadLetterTopic)")
	fs.StringVar(&f.format, "format", "table", "output `format`: table or json")
	fs.DurationVar(&f.timeout, "timeout", 5*time.Minute, "give up after this long, in (0, 24h]")
	f.route.register(fs)
	fs.BoolVar(&f.progress, "progress", false, "draw a progress bar on stderr even when it is not a terminal (it is drawn on a terminal anyway)")
}

// check validates the shared flags; it returns the message of a usage error.
func (f *streamFlags) check() string {
	switch {
	case f.format != "table" && f.format != "json":
		return fmt.Sprintf("-format: unknown format %q, allowed table or json", f.format)
	case f.timeout <= 0 || f.timeout > 24*time.Hour:
		return fmt.Sprintf("-timeout must be in (0, 24h], got %v", f.timeout)
	}
	return checkTopics(f.retryTopic, f.deadTopic)
}

// checkTopics validates -retry-topic and -dead-topic as retryqueue.Config
// does (jsq.ValidateStreamName, and distinct); it returns the message of a
// usage error, or "".
func checkTopics(retry, dead string) string {
	if err := jsq.ValidateStreamName(retry); err != nil {
		return fmt.Sprintf("-retry-topic: %v", err)
	}
	if err := jsq.ValidateStreamName(dead); err != nil {
		return fmt.Sprintf("-dead-topic: %v", err)
	}
	if retry == dead {
		return fmt.Sprintf("-retry-topic and -dead-topic must differ, both %q", retry)
	}
	return ""
}

// connect opens a connection with f's connection options. The caller
// closes it.
func (f *streamFlags) connect() (*nats.Conn, jetstream.JetStream, error) { return connect(f.conn) }

// progressBar draws "label [#####.....] n/total" on a terminal line, at most
// every 100ms, when enabled; done ends the line.
type progressBar struct {
	w       io.Writer
	label   string
	total   uint64
	n       uint64
	last    time.Time
	enabled bool
	drawn   bool
}

func newProgress(w io.Writer, force bool, label string, total uint64) *progressBar {
	return &progressBar{w: w, label: label, total: total, enabled: force || isTerminal(w)}
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

func (p *progressBar) add(k uint64) {
	p.n += k
	if p.enabled && time.Since(p.last) >= 100*time.Millisecond {
		p.draw()
	}
}

func (p *progressBar) draw() {
	const width = 30
	total := max(p.total, p.n, 1)
	fill := int(p.n * width / total)
	fmt.Fprintf(p.w, "\r%s [%s%s] %d/%d", p.label, strings.Repeat("#", fill), strings.Repeat(".", width-fill), p.n, p.total)
	p.last, p.drawn = time.Now(), true
}

func (p *progressBar) done() {
	if p.enabled {
		p.draw()
		fmt.Fprintln(p.w)
	}
}

// topicDepth is one original topic's share of a stream.
type topicDepth struct {
	OriginalTopic string `json:"original_topic"`
	Messages      uint64 `json:"messages"`
	// Oldest is the storage time of its oldest message.
	Oldest time.Time `json:"oldest"`
}

// streamDepth is one stream's depth by original topic.
type streamDepth struct {
	Stream   string       `json:"stream"`
	Messages uint64       `json:"messages"`
	ByTopic  []topicDepth `json:"by_original_topic"`
	ByRoute  []routeDepth `json:"by_route"`
	// Unavailable names the fields left empty because the user may not
	// read the stream's messages (the read-only operator role): then the
	// counts come from the stream's info by route subject, and Note says
	// why. Empty for a full scan.
	Unavailable []string `json:"unavailable,omitempty"`
	Note        string   `json:"note,omitempty"`
}

// unavailableWithoutRead are the fields of streamDepth that need the
// messages' headers and times.
var unavailableWithoutRead = []string{"by_original_topic", "oldest"}

// routeDepth is one route's share of a stream (its floodgate_service and
// floodgate_partner headers; both empty for a message of the previous
// release's layout). Without read access they are the route subject's
// tokens, decoded where the token is reversible (partner.Decode).
type routeDepth struct {
	Service  string `json:"service"`
	Partner  string `json:"partner"`
	Messages uint64 `json:"messages"`
}

// backlogReport is the output of "floodgate backlog".
type backlogReport struct {
	Retry streamDepth `json:"retry"`
	Dead  streamDepth `json:"dead"`
}

const backlogUsage = `Usage: floodgate backlog [-s URL | -context NAME] [auth flags] [flags]

Shows the retry backlog and the dead letters by original topic (the
floodgate_original_topic header), with the age of the oldest message of each.
It reads the retry stream with message gets and the dead letters with an
ephemeral ordered consumer, creating no consumer beside the drainers', so it
is safe to run beside a live pipeline. A missing stream is an error (exit
status 1), as in every command.

A user who may not read messages (the read-only operator role of "floodgate
permissions", which reads no purchase order) gets the counts by route from
the streams' info instead, with the original topic and oldest columns shown
as "?" and a note saying so; the exit status stays 0.

Flags:
`

// runBacklog is "floodgate backlog".
func runBacklog(args []string, stdout, stderr io.Writer) int {
	var f streamFlags
	fs := flag.NewFlagSet("floodgate backlog", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(fs.Output(), backlogUsage); fs.PrintDefaults() }
	f.register(fs)
	if err := parseFlags(fs, args, stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() > 0 {
		return cmdUsageError(stderr, "backlog", "unexpected argument %q (flags only; see -h)", fs.Arg(0))
	}
	if msg := f.check(); msg != "" {
		return cmdUsageError(stderr, "backlog", "%s", msg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), f.timeout)
	defer cancel()
	var den denials
	nc, js, err := connect(f.conn, den.option())
	if err != nil {
		return cmdError(stderr, "backlog", err)
	}
	defer nc.Close()

	var rep backlogReport
	streams := [2]jetstream.Stream{}
	for i, s := range []struct{ name, flag string }{{f.retryTopic, "-retry-topic"}, {f.deadTopic, "-dead-topic"}} {
		if streams[i], err = requireStream(ctx, js, s.name, s.flag); err != nil {
			return cmdError(stderr, "backlog", err)
		}
	}
	for i, out := range []*streamDepth{&rep.Retry, &rep.Dead} {
		st := streams[i]
		name := st.CachedInfo().Config.Name
		var d streamDepth
		err := den.guardRead(ctx, name, func(ctx context.Context) (err error) {
			d, err = depthByTopic(ctx, st, f.route.subject(name), newProgress(stderr, f.progress, "scanning "+name, st.CachedInfo().State.Msgs))
			return err
		})
		if denied := err; errors.Is(denied, errReadDenied) {
			d, err = depthFromInfo(ctx, st, f.route.subject(name))
			d.Note = fmt.Sprintf("%s: original topic and oldest unavailable, %v; counts by route come from the stream's info (the rw role reads messages)", name, denied)
		}
		if err != nil {
			return cmdError(stderr, "backlog", err)
		}
		*out = d
	}
	if f.format == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return cmdError(stderr, "backlog", err)
		}
		return exitOK
	}
	writeBacklogTable(stdout, rep, time.Now())
	return exitOK
}

// depthByTopic counts stream's messages by original topic.
func depthByTopic(ctx context.Context, st jetstream.Stream, subject string, bar *progressBar) (streamDepth, error) {
	d := streamDepth{Stream: st.CachedInfo().Config.Name, ByTopic: []topicDepth{}, ByRoute: []routeDepth{}}
	by := map[string]*topicDepth{}
	routes := map[[2]string]*routeDepth{}
	err := scanStream(ctx, st, subject, bar, func(m storedMsg) error {
		key := [2]string{m.header.Get(retryqueue.MetaService), m.header.Get(retryqueue.MetaPartner)}
		if key[1] == "" {
			key[1] = m.header.Get(retryqueue.MetaPartnerToken)
		}
		if routes[key] == nil {
			routes[key] = &routeDepth{Service: key[0], Partner: key[1]}
		}
		routes[key].Messages++
		topic := m.header.Get(retryqueue.MetaOriginalTopic)
		if topic == "" {
			topic = noTopic
		}
		t := by[topic]
		if t == nil {
			t = &topicDepth{OriginalTopic: topic, Oldest: m.at.UTC()}
			by[topic] = t
		}
		t.Messages++
		d.Messages++
		return nil
	})
	if err != nil {
		return d, err
	}
	for _, t := range by {
		d.ByTopic = append(d.ByTopic, *t)
	}
	for _, r := range routes {
		d.ByRoute = append(d.ByRoute, *r)
	}
	sort.Slice(d.ByRoute, func(i, j int) bool {
		a, b := d.ByRoute[i], d.ByRoute[j]
		return a.Service < b.Service || a.Service == b.Service && a.Partner < b.Partner
	})
	sort.Slice(d.ByTopic, func(i, j int) bool {
		if d.ByTopic[i].Messages != d.ByTopic[j].Messages {
			return d.ByTopic[i].Messages > d.ByTopic[j].Messages
		}
		return d.ByTopic[i].OriginalTopic < d.ByTopic[j].OriginalTopic
	})
	return d, nil
}

// depthFromInfo counts stream's messages by route subject from its info
// with a subject filter (subject, or every route when ""), reading no
// message: what a user without read access can see. Messages on no route
// subject (the previous release's layout) count as the route with empty
// service and partner when subject is "". Unavailable is set.
func depthFromInfo(ctx context.Context, st jetstream.Stream, subject string) (streamDepth, error) {
	name := st.CachedInfo().Config.Name
	d := streamDepth{Stream: name, ByTopic: []topicDepth{}, ByRoute: []routeDepth{}, Unavailable: unavailableWithoutRead}
	filter := subject
	if filter == "" {
		filter = name + ".*.*"
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(filter))
	if err != nil {
		return d, fmt.Errorf("stream %s: %w", name, err)
	}
	for subj, n := range info.State.Subjects {
		svc, p, _ := strings.Cut(strings.TrimPrefix(subj, name+"."), ".")
		d.ByRoute = append(d.ByRoute, routeDepth{Service: decodeToken(svc), Partner: decodeToken(p), Messages: n})
		d.Messages += n
	}
	if subject == "" && info.State.Msgs > d.Messages {
		d.ByRoute = append(d.ByRoute, routeDepth{Messages: info.State.Msgs - d.Messages})
		d.Messages = info.State.Msgs
	}
	sort.Slice(d.ByRoute, func(i, j int) bool {
		a, b := d.ByRoute[i], d.ByRoute[j]
		return a.Service < b.Service || a.Service == b.Service && a.Partner < b.Partner
	})
	return d, nil
}

func writeBacklogTable(w io.Writer, rep backlogReport, now time.Time) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "queue\tstream\toriginal topic\tmessages\toldest\t")
	for _, s := range []struct {
		kind string
		d    streamDepth
	}{{"retry", rep.Retry}, {"dead", rep.Dead}} {
		switch {
		case len(s.d.Unavailable) > 0:
			fmt.Fprintf(tw, "%s\t%s\t?\t%d\t?\t\n", s.kind, s.d.Stream, s.d.Messages)
		case len(s.d.ByTopic) == 0:
			fmt.Fprintf(tw, "%s\t%s\t-\t0\t-\t\n", s.kind, s.d.Stream)
		}
		for _, t := range s.d.ByTopic {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t\n", s.kind, s.d.Stream, t.OriginalTopic, t.Messages, age(now, t.Oldest))
		}
	}
	fmt.Fprintf(tw, "total\t\t\t%d\t\t\n", rep.Retry.Messages+rep.Dead.Messages)
	tw.Flush()
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "\nqueue\tservice\tpartner\tmessages\t")
	for _, s := range []struct {
		kind string
		d    streamDepth
	}{{"retry", rep.Retry}, {"dead", rep.Dead}} {
		for _, r := range s.d.ByRoute {
			fmt.Fprintf(tw, "%s\t%q\t%q\t%d\t\n", s.kind, r.Service, r.Partner, r.Messages)
		}
	}
	tw.Flush()
	for _, d := range []streamDepth{rep.Retry, rep.Dead} {
		if d.Note != "" {
			fmt.Fprintf(w, "\nnote: %s\n", d.Note)
		}
	}
}

// age formats how long ago t was, to the second.
func age(now, t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return now.Sub(t).Truncate(time.Second).String()
}

// cmdUsageError reports a bad command line: exit status 2.
func cmdUsageError(stderr io.Writer, cmd, format string, args ...any) int {
	fmt.Fprintf(stderr, "floodgate %s: "+format+"\n", append([]any{cmd}, args...)...)
	fmt.Fprintf(stderr, "Run \"floodgate %s -h\" for the flags.\n", cmd)
	return exitUsage
}

// cmdError reports a failure: exit status 1.
func cmdError(stderr io.Writer, cmd string, err error) int {
	fmt.Fprintf(stderr, "floodgate %s: %v\n", cmd, err)
	return exitError
}
