package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/breaker/natskv"
	"github.com/floodgate-go/floodgate/internal/natsconn"
	fgpartner "github.com/floodgate-go/floodgate/partner"
)

// breakerStatus is one breaker in the output of "floodgate status" and
// of open, close and reset with -format json: a partner of a service (a
// fleet name <service token>.<partner token>), or a breaker with a
// one-token name (Service and Partner empty). Its JSON is the documented
// schema (README, "status -format json"): states by name, durations in
// seconds, times in RFC 3339 UTC, no storage internals.
type breakerStatus struct {
	Breaker string `json:"breaker"`
	// Service and Partner are the decoded tokens of a partner's breaker
	// (the token itself when it is hashed); "" for a one-token name.
	Service string `json:"service"`
	Partner string `json:"partner"`
	// State is "closed", "open" or "half-open"; "unknown" without a
	// shared state (HasSharedState false).
	State string `json:"state"`
	// HasSharedState is false for a breaker that never wrote one: a fleet
	// breaker that never tripped, or a breaker not in a fleet.
	HasSharedState bool `json:"has_shared_state"`
	// Forced reports an operator's open (or close) in force.
	Forced bool `json:"forced"`
	// OpenWindowSeconds is the open window of the last trip, in seconds.
	OpenWindowSeconds float64 `json:"open_window_seconds"`
	// OpenUntil is when the open window ends; "" unless open and not
	// forced.
	OpenUntil string `json:"open_until"`
	// Epoch counts the fleet's published transitions.
	Epoch uint64 `json:"epoch"`
	// ConsecutiveTrips counts the trips since the last clean close (the
	// backoff ladder); ConsecutiveSuccesses the fleet's good probes of the
	// current half-open period.
	ConsecutiveTrips     int `json:"consecutive_trips"`
	ConsecutiveSuccesses int `json:"consecutive_successes"`
	// Probes are the probe slots held now.
	Probes []probeStatus `json:"probes"`
	// UpdatedBy (a replica, or "floodgate-cli"), Reason and UpdatedAt
	// describe the last write; "" without a shared state. Every field is
	// always present, so the schema does not depend on the state.
	UpdatedBy string `json:"updated_by"`
	Reason    string `json:"reason"`
	UpdatedAt string `json:"updated_at"`
	// Backlog and DeadLetters count the messages stored under the route's
	// subject in the retry and dead-letter streams.
	Backlog     uint64 `json:"backlog"`
	DeadLetters uint64 `json:"dead_letters"`
}

// probeStatus is a probe slot held by a replica.
type probeStatus struct {
	Slot   int    `json:"slot"`
	Holder string `json:"holder"`
}

// rfc3339 formats t in UTC, "" for the zero time.
func rfc3339(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// fleetFlags are the flags of status, open, close and reset.
type fleetFlags struct {
	conn       natsconn.Options
	bucket     string
	name       string
	route      routeFlags
	retryTopic string
	deadTopic  string
	reason     string
	create     bool
	format     string
	timeout    time.Duration
}

// target is the breaker name the flags select: -breaker, or the fleet
// name of -service and -partner (partner.FleetName).
func (f *fleetFlags) target() string {
	if f.name != "" {
		return f.name
	}
	if f.route.service != "" && f.route.partner != "" {
		return fgpartner.FleetName(f.route.service, f.route.partner)
	}
	return ""
}

func (f *fleetFlags) register(fs *flag.FlagSet, write bool) {
	f.conn.Register(fs)
	fs.StringVar(&f.bucket, "bucket", natskv.DefaultBucket, "KV `bucket` of the fleet's breakers (natskv.Config.Bucket)")
	if write {
		fs.StringVar(&f.name, "breaker", "", "breaker `name` in the store (breaker.FleetConfig.Name, else breaker.Config.Name); or -service and -partner")
		fs.StringVar(&f.reason, "reason", "", "reason recorded in the shared state (default: the command)")
		fs.StringVar(&f.route.service, "service", "", "the partner's `service` (partner.FleetConfig.Service = retryqueue.Config.Service); with -partner")
		fs.StringVar(&f.route.partner, "partner", "", "the partner `key` (its breaker is partner.FleetName(service, key)); with -service")
		fs.BoolVar(&f.create, "create", false, "write the state even when the breaker has no shared state and its route holds no messages (a misspelt name looks the same; refused without it)")
	} else {
		fs.StringVar(&f.name, "breaker", "", "breaker `name` in the store; default: every breaker in the bucket")
		fs.StringVar(&f.route.service, "service", "", "only the partners of this `service` (partner.FleetConfig.Service); default: any")
		fs.StringVar(&f.route.partner, "partner", "", "only this partner `key`; default: any")
	}
	fs.StringVar(&f.retryTopic, "retry-topic", defaultRetryTopic, "retry stream, for the backlog (retryqueue.Config.RetryTopic)")
	fs.StringVar(&f.deadTopic, "dead-topic", defaultDeadTopic, "dead-letter stream (retryqueue.Config.DeadLetterTopic)")
	fs.StringVar(&f.format, "format", "table", "output `format`: table or json")
	fs.DurationVar(&f.timeout, "timeout", 10*time.Second, "give up after this long, in (0, 1h]")
}

func (f *fleetFlags) check(write bool) string {
	switch {
	case f.name != "" && (f.route.service != "" || f.route.partner != ""):
		return "-breaker and -service/-partner are exclusive"
	case write && f.name == "" && (f.route.service == "" || f.route.partner == ""):
		return "-breaker, or -service and -partner, are required"
	case f.format != "table" && f.format != "json":
		return fmt.Sprintf("-format: unknown format %q, allowed table or json", f.format)
	case f.timeout <= 0 || f.timeout > time.Hour:
		return fmt.Sprintf("-timeout must be in (0, 1h], got %v", f.timeout)
	case f.name != "" && natskv.ValidateName(f.name) != nil:
		return fmt.Sprintf("-breaker: %q is not a valid name, allowed one or two tokens of [-_=A-Za-z0-9]+ joined by '.'", f.name)
	}
	if msg := checkTopics(f.retryTopic, f.deadTopic); msg != "" {
		return msg
	}
	if err := (&natskv.Config{Bucket: f.bucket}).Validate(); err != nil {
		return fmt.Sprintf("-bucket: %v", err)
	}
	return ""
}

// errNoState marks a breaker with no shared state. A fleet breaker writes
// its shared state at its first trip (or an operator does), so this is a
// breaker that joined and never tripped, one outside any fleet, or a
// misspelt name: the store cannot tell them apart.
var errNoState = errors.New("no shared state: it never tripped and no operator wrote it (a fleet breaker writes its state at its first trip; a breaker outside a fleet never does), or the name is misspelt")

const statusUsage = `Usage: floodgate status [-s URL | -context NAME] [auth flags] [-service S] [-partner KEY | -breaker NAME] [flags]

Lists the partners (and other fleet-wide breakers) with their shared state
(breaker.JoinFleet with a natskv store; partner.Config.Fleet names a
partner's breaker <service token>.<partner token>): service, partner, state,
open window and its end, whether an operator forced it, epoch, consecutive
trips, the fleet's consecutive good probes, the probe slots held (by
replica), who wrote it and why, and the route's backlog (messages under
<retry>.<service token>.<partner token>) and dead letters. -service and
-partner select partners. A partner is listed once its breaker has a
shared state (it tripped once, or an operator wrote it) or its route holds
messages; a route with messages and no shared state shows state "-" (its
breaker never tripped, or is not a fleet breaker). Without the bucket (no
fleet: floodgate.Config.Fleet unset) only the routes with messages are
listed, with state "-". A breaker selected by name, or by -service and
-partner, with no shared state (it never tripped and no operator wrote
it, or a misspelt name), and a missing bucket with no route holding messages, are
errors: exit status 1.

Flags:
`

const fleetWriteUsage = `Usage: floodgate %s [-s URL | -context NAME] [auth flags] (-service S -partner KEY | -breaker NAME) [flags]

%s
Every replica of the fleet applies it within its watch delay (at most its
FleetConfig.ResyncInterval). The write is a compare-and-swap on the shared
state's revision, retried on a concurrent change.

A breaker with no shared state (it never tripped, no replica joined it, or
the name is misspelt: the store cannot tell them apart) whose route holds
no messages (in -retry-topic or -dead-topic) is refused, exit status 1,
and nothing is written; -create writes it anyway (to isolate a partner
before its first trip or deploy: replicas that join it start from this
state). A breaker with no shared state whose route holds messages is
written, with a note on standard error. Only fleet breakers read it: a breaker that never called
breaker.JoinFleet (floodgate.Config.Fleet or partner.Config.Fleet unset)
lives in its process alone and is changed there (Breaker.ForceOpen,
ForceClose, Reset). A missing bucket is created (only when the write
goes ahead) as natskv.New creates it, with its defaults (1 replica, file
storage). With -format json it prints the object of "floodgate status",
backlog and dead letters included.

Flags:
`

// runStatus is "floodgate status".
func runStatus(args []string, stdout, stderr io.Writer) int {
	var f fleetFlags
	fs := flag.NewFlagSet("floodgate status", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(fs.Output(), statusUsage); fs.PrintDefaults() }
	f.register(fs, false)
	if code, done := parseFleetFlags(fs, args, &f, false, stderr); done {
		return code
	}
	ctx, cancel := context.WithTimeout(context.Background(), f.timeout)
	defer cancel()
	nc, s, err := f.open(ctx)
	noBucket := errors.Is(err, jetstream.ErrBucketNotFound)
	if noBucket && f.target() == "" {
		// No fleet: list the routes that hold messages, without shared state.
		nc, _, err = connect(f.conn)
	} else if noBucket {
		fmt.Fprintf(stderr, "floodgate status: %s: %v; bucket %s does not exist\n", f.target(), errNoState, f.bucket)
		return exitError
	}
	if err != nil {
		fmt.Fprintln(stderr, "floodgate status:", err)
		return exitError
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		fmt.Fprintln(stderr, "floodgate status:", err)
		return exitError
	}
	var counts [2]map[string]uint64 // retry, dead
	for i, stream := range []string{f.retryTopic, f.deadTopic} {
		if counts[i], err = routeCounts(ctx, js, stream); err != nil {
			fmt.Fprintln(stderr, "floodgate status:", err)
			return exitError
		}
	}
	name := f.target()
	names := []string{name}
	if name == "" {
		names = nil
		if s != nil {
			if names, err = s.Names(ctx); err != nil {
				fmt.Fprintln(stderr, "floodgate status:", err)
				return exitError
			}
		}
		for _, c := range counts { // routes with messages, and no shared state
			for n := range c {
				names = append(names, n)
			}
		}
		names = f.route.filter(names)
		sort.Strings(names)
		names = slices.Compact(names)
	}
	if s == nil && len(names) == 0 {
		fmt.Fprintf(stderr, "floodgate status: bucket %s does not exist (no fleet breaker has tripped and no operator wrote one: floodgate.Config.Fleet unset, or -bucket misspelt) and no route holds messages\n", f.bucket)
		return exitError
	}
	if s == nil {
		fmt.Fprintf(stderr, "floodgate status: bucket %s does not exist: breakers are not shared, so only routes with messages are listed, without state\n", f.bucket)
	}
	out := []breakerStatus{}
	for _, n := range names {
		st, err := readStatus(ctx, s, n)
		st.Backlog, st.DeadLetters = counts[0][n], counts[1][n]
		if errors.Is(err, errNoState) && st.Backlog+st.DeadLetters > 0 {
			err = nil // a route with messages, whose breaker never wrote a shared state
		}
		if errors.Is(err, errNoState) {
			fmt.Fprintf(stderr, "floodgate status: %s: %v\n", n, err)
			return exitError
		}
		if err != nil {
			fmt.Fprintln(stderr, "floodgate status:", err)
			return exitError
		}
		out = append(out, st)
	}
	return writeStatus(stdout, stderr, f.format, out)
}

// readStatus reads name's shared state and probe leases. It returns an
// error wrapping errNoState when name has no shared state (or s is nil:
// there is no bucket).
func readStatus(ctx context.Context, s *natskv.Store, name string) (breakerStatus, error) {
	out := breakerStatus{Breaker: name, State: "unknown", Probes: []probeStatus{}}
	if svc, p, ok := strings.Cut(name, "."); ok {
		out.Service, out.Partner = decodeToken(svc), decodeToken(p)
	}
	if s == nil { // no bucket: no shared state
		return out, errNoState
	}
	st, rev, err := s.Load(ctx, name)
	if err != nil {
		return breakerStatus{}, err
	}
	if rev == 0 {
		return out, errNoState
	}
	ls, err := s.Leases(ctx, name)
	if err != nil {
		return breakerStatus{}, err
	}
	out.State, out.HasSharedState, out.Forced = st.State.String(), true, st.Forced
	out.OpenWindowSeconds, out.OpenUntil, out.Epoch = st.Window.Seconds(), rfc3339(st.OpenUntil), st.Epoch
	out.ConsecutiveTrips, out.ConsecutiveSuccesses = st.Trips, st.Successes
	out.UpdatedBy, out.Reason, out.UpdatedAt = st.By, st.Reason, rfc3339(st.UpdatedAt)
	for _, l := range ls {
		out.Probes = append(out.Probes, probeStatus{Slot: l.Slot, Holder: l.Holder})
	}
	return out, nil
}

func writeStatus(stdout, stderr io.Writer, format string, out []breakerStatus) int {
	if format == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(out); err != nil {
			fmt.Fprintln(stderr, "floodgate:", err)
			return exitError
		}
		return exitOK
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SERVICE\tPARTNER\tSTATE\tWINDOW\tOPEN UNTIL\tFORCED\tBACKLOG\tDEAD\tEPOCH\tTRIPS\tSUCCESSES\tPROBES\tBY\tREASON\tBREAKER")
	for _, b := range out {
		var probes []string
		for _, l := range b.Probes {
			probes = append(probes, fmt.Sprintf("%d:%s", l.Slot, l.Holder))
		}
		state := b.State
		if !b.HasSharedState {
			state = "-"
		}
		window := time.Duration(b.OpenWindowSeconds * float64(time.Second)).Round(time.Millisecond)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%v\t%s\t%v\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t%s\n", orDash(quoted(b.Service)), orDash(quoted(b.Partner)),
			state, window, orDash(b.OpenUntil), b.Forced, b.Backlog, b.DeadLetters, b.Epoch, b.ConsecutiveTrips,
			b.ConsecutiveSuccesses, orDash(strings.Join(probes, ",")), orDash(b.UpdatedBy), orDash(b.Reason), b.Breaker)
	}
	if err := tw.Flush(); err != nil {
		fmt.Fprintln(stderr, "floodgate:", err)
		return exitError
	}
	return exitOK
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func parseFleetFlags(fs *flag.FlagSet, args []string, f *fleetFlags, write bool, stderr io.Writer) (int, bool) {
	if err := parseFlags(fs, args, stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK, true
		}
		return exitUsage, true
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "%s: unexpected argument %q\n", fs.Name(), fs.Arg(0))
		return exitUsage, true
	}
	if msg := f.check(write); msg != "" {
		fmt.Fprintf(stderr, "%s: %s\n", fs.Name(), msg)
		return exitUsage, true
	}
	return 0, false
}

// open connects and returns a Store bound to the existing bucket; a
// missing one is an error wrapping jetstream.ErrBucketNotFound.
func (f *fleetFlags) open(ctx context.Context) (*nats.Conn, *natskv.Store, error) {
	nc, js, err := connect(f.conn)
	if err != nil {
		return nil, nil, err
	}
	s, err := natskv.New(ctx, js, natskv.Config{Bucket: f.bucket, Bind: true})
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return nc, s, nil
}

// fleetWrite is one of open, close and reset: it computes the new shared
// state from the current one.
type fleetWrite struct {
	name, summary string
	apply         func(st breaker.SharedState) breaker.SharedState
}

var fleetWrites = map[string]fleetWrite{
	"open": {"open", "Forces the breaker open on every replica (isolates the partner) until\n\"floodgate close\" or \"floodgate reset\". It is not a trip: the backoff ladder\nis unchanged.\n", func(st breaker.SharedState) breaker.SharedState {
		st.State, st.Forced, st.OpenUntil, st.Window = breaker.StateOpen, true, time.Time{}, 0
		return st
	}},
	"close": {"close", "Closes the breaker on every replica (ending a forced open). Unlike a\nclean close it keeps the backoff ladder: the next trip opens with the next,\nlonger window.\n", func(st breaker.SharedState) breaker.SharedState {
		st.State, st.Forced, st.OpenUntil = breaker.StateClosed, false, time.Time{}
		return st
	}},
	"reset": {"reset", "Resets the breaker on every replica: closed, not forced, the backoff\nladder back at its base.\n", func(st breaker.SharedState) breaker.SharedState {
		st.State, st.Forced, st.OpenUntil, st.Trips, st.Window = breaker.StateClosed, false, time.Time{}, 0, 0
		return st
	}},
}

func runOpen(args []string, stdout, stderr io.Writer) int {
	return runFleetWrite(fleetWrites["open"], args, stdout, stderr)
}
func runClose(args []string, stdout, stderr io.Writer) int {
	return runFleetWrite(fleetWrites["close"], args, stdout, stderr)
}
func runReset(args []string, stdout, stderr io.Writer) int {
	return runFleetWrite(fleetWrites["reset"], args, stdout, stderr)
}

func runFleetWrite(w fleetWrite, args []string, stdout, stderr io.Writer) int {
	var f fleetFlags
	fs := flag.NewFlagSet("floodgate "+w.name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprintf(fs.Output(), fleetWriteUsage, w.name, w.summary); fs.PrintDefaults() }
	f.register(fs, true)
	if code, done := parseFleetFlags(fs, args, &f, true, stderr); done {
		return code
	}
	ctx, cancel := context.WithTimeout(context.Background(), f.timeout)
	defer cancel()
	var den denials // a denied request ends the command at once (a read-only user's)
	ctx, stop := den.guardAll(ctx)
	defer stop()
	fail := func(err error) int {
		fmt.Fprintf(stderr, "floodgate %s: %v\n", w.name, deniedCause(ctx, err))
		return exitError
	}
	name := f.target()
	// The route's messages, counted as status counts them: they show in
	// the output and tell a partner in use from a misspelt name.
	nc, js, err := connect(f.conn, den.option())
	if err != nil {
		return fail(err)
	}
	defer nc.Close()
	var counts [2]uint64 // retry, dead
	for i, stream := range []string{f.retryTopic, f.deadTopic} {
		c, err := routeCounts(ctx, js, stream)
		if err != nil {
			return fail(err)
		}
		counts[i] = c[name]
	}
	inUse := counts[0]+counts[1] > 0
	refuse := func() int {
		fmt.Fprintf(stderr, "floodgate %s: breaker %q has no shared state (it never tripped and no operator wrote it, or the name is misspelt) and its route holds no messages in %s or %s; nothing written. Check the name with \"floodgate status\", or pass -create to write it anyway (to isolate a partner before its first trip).\n",
			w.name, name, f.retryTopic, f.deadTopic)
		return exitError
	}
	s, err := natskv.New(ctx, js, natskv.Config{Bucket: f.bucket, Bind: true})
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		if !inUse && !f.create {
			return refuse()
		}
		if s, err = natskv.New(ctx, js, natskv.Config{Bucket: f.bucket}); err == nil {
			fmt.Fprintf(stderr, "floodgate %s: note: bucket %s did not exist; created it (no replica has joined a fleet-wide breaker on it yet)\n", w.name, f.bucket)
		}
	}
	if err != nil {
		return fail(err)
	}
	reason := f.reason
	joined := true
	if reason == "" {
		reason = "operator: floodgate " + w.name
	}
	for {
		cur, rev, err := s.Load(ctx, name)
		if err != nil {
			return fail(err)
		}
		joined = rev > 0
		if !joined && !inUse && !f.create {
			return refuse()
		}
		next := w.apply(cur)
		next.Epoch = cur.Epoch + 1
		next.Successes, next.RampStart = 0, time.Time{}
		next.By, next.Reason, next.UpdatedAt = "floodgate-cli", reason, time.Now()
		_, err = s.CompareAndSwap(ctx, name, next, rev)
		if errors.Is(err, breaker.ErrStaleRevision) {
			continue // a replica wrote meanwhile: apply on top of it
		}
		if err != nil {
			return fail(err)
		}
		break
	}
	if !joined {
		fmt.Fprintf(stderr, "floodgate %s: note: breaker %q had no shared state (it never tripped and no operator wrote it, or the name is misspelt); fleet replicas that joined it apply this state within their watch delay, replicas that join later start from it. A breaker outside a fleet never reads it.\n",
			w.name, name)
	}
	st, err := readStatus(ctx, s, name)
	if err != nil {
		return fail(err)
	}
	st.Backlog, st.DeadLetters = counts[0], counts[1]
	return writeStatus(stdout, stderr, f.format, []breakerStatus{st})
}

// quoted quotes s (a partner key is untrusted input) unless it is empty or
// plain.
func quoted(s string) string {
	if s == "" || fgpartner.Token(s) == s {
		return s
	}
	return strconv.Quote(s)
}

// decodeToken returns the key of a partner or service token, or the token
// itself when it is hashed or not a token.
func decodeToken(tok string) string {
	if k, err := fgpartner.Decode(tok); err == nil {
		return k
	}
	return tok
}

// filter keeps the names of the partners r selects: names of two tokens
// whose service token is Token(r.service) and partner token
// Token(r.partner), each when set. With neither set it keeps every name.
func (r routeFlags) filter(names []string) []string {
	if r.service == "" && r.partner == "" {
		return names
	}
	var out []string
	for _, n := range names {
		svc, p, ok := strings.Cut(n, ".")
		if ok && (r.service == "" || svc == fgpartner.Token(r.service)) && (r.partner == "" || p == fgpartner.Token(r.partner)) {
			out = append(out, n)
		}
	}
	return out
}

// routeCounts returns the number of messages stored under each route
// subject <stream>.<service token>.<partner token> of stream, by fleet
// name <service token>.<partner token>; a missing stream has none. It
// reads the stream's info with a subject filter (no consumer, no scan).
func routeCounts(ctx context.Context, js jetstream.JetStream, stream string) (map[string]uint64, error) {
	st, err := js.Stream(ctx, stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", stream, err)
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(stream+".*.*"))
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", stream, err)
	}
	out := make(map[string]uint64, len(info.State.Subjects))
	for subj, n := range info.State.Subjects {
		out[strings.TrimPrefix(subj, stream+".")] += n
	}
	return out, nil
}
