package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"time"

	"github.com/floodgate-go/floodgate/sim"
	"github.com/floodgate-go/floodgate/sim/simplot"
)

// simOptions are the settings of "floodgate sim" that are not scenario
// numbers.
type simOptions struct {
	preset     string
	strategies string
	format     string
	plot       string
	out        string
	series     bool
}

// scenarioFlags maps a scenario field (as named by sim.FieldError) to its
// flag.
var scenarioFlags = map[string]string{
	"Rate":             "rate",
	"Arrivals":         "arrivals",
	"Duration":         "duration",
	"RecoverAt":        "recover-at",
	"Outage":           "outage",
	"Fragile":          "fragile",
	"FragileCapacity":  "fragile-capacity",
	"Overflow":         "overflow",
	"Capacity":         "capacity",
	"DrainRate":        "drain-rate",
	"Healthy.Median":   "latency",
	"Healthy.P99":      "latency-p99",
	"Slow.Median":      "slow-median",
	"Slow.P99":         "slow-p99",
	"SlowCallDuration": "slow-call",
	"OpenWindow":       "open-window",
	"MaxOpenWindow":    "max-open-window",
	"TripWindow":       "trip-window",
	"TripMinCalls":     "trip-min-calls",
}

const simUsage = `Usage: floodgate sim [flags]

Simulates a dependency that fails and recovers, on a virtual clock, and the
real breaker in front of it with each half-open strategy, and compares them:
errors and re-trips after recovery, time to close and to full traffic, probes
in flight and during the outage, calls diverted. The same flags and seed give
the same output, byte for byte.

Presets (from the design notes):
  fragile      100 calls/s; down 10s-20s; then 30 calls/s for 10s (excess
               fails); the note's breaker: fixed 5s open window, trips over
               the last 1s (at least 80 calls)
  fragile-defaults
               the same dependency behind floodgate's default breaker: last
               20 calls (at least 10), open window doubling from 1s to 30s
  slow         100 calls/s; P99 900ms from 15s to 20s, then 5ms; the consumer
               serves 200 calls/s (excess slow); diverted calls wait in a
               backlog, drained at 50 calls/s once closed (eager releases it
               all at once); slow call > 50ms
  long-outage  10 calls/s; down for 4h; open window 30s, doubling to 10m

Strategies: eager (fixed window, no probe cap, close on first success),
single-probe, capped-probes (2 in flight, 5 successes), ramp (10/25/50/100 %%,
2s each), adaptive.

Every scenario flag defaults to the preset's value; the defaults shown are the
fragile preset's. When a flag changes the preset (other than -seed), the
scenario is labelled "PRESET (modified)". With -fixed-open-window (given or
the preset's) -max-open-window follows -open-window; -fixed-open-window=false
on a fixed preset doubles the window up to 30s (or -open-window if larger)
unless -max-open-window is given. Giving only -latency-p99 (or only
-latency) keeps the ratio of median to P99; likewise -slow-p99 and
-slow-median. Giving -rate without -trip-min-calls scales the preset's
-trip-min-calls with the rate. Without -duration the run goes on after the
fragile phase as long as the preset's does. An error about a flag you did
not give names the preset's value (or the value derived from the flags you
gave): set that flag too.

A run offers at most 2 million calls (-rate × -duration). An offered call
costs each strategy about 1-2 µs of CPU (up to about 5.5 µs with latencies of
seconds or a backlog), so the largest run takes about 17 s of CPU for all
five strategies, 45 s at most, spread over the available cores.

Flags:
`

// runSim is "floodgate sim".
func runSim(args []string, stdout, stderr io.Writer) int {
	base, err := sim.Preset("fragile")
	if err != nil {
		fmt.Fprintf(stderr, "floodgate sim: %v\n", err)
		return exitError
	}
	var o simOptions
	f := base // flag values; only the flags given override the preset
	var seed uint64
	var arrivals, overflow string
	fs := flag.NewFlagSet("floodgate sim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), strings.ReplaceAll(simUsage, "%%", "%"))
		fs.PrintDefaults()
	}
	fs.StringVar(&o.preset, "preset", "fragile", "scenario `name`: "+strings.Join(sim.PresetNames(), ", "))
	fs.StringVar(&o.strategies, "strategies", "all", "`list` of strategies, comma-separated, or all (any case): "+strings.Join(sim.StrategyNames(), ", "))
	fs.StringVar(&o.format, "format", "table", "output `format`: table, json or markdown")
	fs.StringVar(&o.plot, "plot", "", "also draw the comparison to `file`.svg or file.png")
	fs.StringVar(&o.out, "o", "", "write the table, JSON or Markdown to `file` instead of standard output")
	fs.BoolVar(&o.series, "series", true, "JSON: include each strategy's per-100ms series")
	fs.Float64Var(&f.Rate, "rate", f.Rate, "offered `calls` per second, in (0, 100000]; -rate × -duration at most 2000000 calls")
	fs.StringVar(&arrivals, "arrivals", f.Arrivals.String(), "arrival `process`: poisson or uniform")
	fs.DurationVar(&f.Duration, "duration", f.Duration, "length of the run, in (0, 48h]; -rate × -duration at most 2000000 calls (about 17 s of CPU for all strategies)")
	fs.DurationVar(&f.RecoverAt, "recover-at", f.RecoverAt, "when the outage ends (the recovery), in (0, -duration]")
	fs.DurationVar(&f.Outage, "outage", f.Outage, "how long the outage lasts before -recover-at, in [0, -recover-at]")
	fs.BoolVar(&f.SlowOutage, "slow-outage", f.SlowOutage, "the outage is slow (latency -slow-median/-slow-p99) rather than down")
	fs.DurationVar(&f.Fragile, "fragile", f.Fragile, "how long after the recovery the dependency has only -fragile-capacity")
	fs.Float64Var(&f.FragileCapacity, "fragile-capacity", f.FragileCapacity, "`calls` per second served normally while fragile")
	fs.StringVar(&overflow, "overflow", f.Overflow.String(), "what happens to calls beyond -fragile-capacity or -capacity: `fail` or slow (latency -slow-median/-slow-p99; a slow call counts as an error or trips only when slower than -slow-call, so with the default -slow-p99 900ms and -slow-call 1s it is almost invisible)")
	fs.Float64Var(&f.Capacity, "capacity", f.Capacity, "`calls` per second the healthy dependency serves normally; 0 is unlimited")
	fs.BoolVar(&f.Backlog, "backlog", f.Backlog, "diverted and failed calls wait in a retry backlog, drained at -drain-rate once closed (eager: all at once)")
	fs.Float64Var(&f.DrainRate, "drain-rate", f.DrainRate, "`calls` per second at which the backlog is drained while closed, in (0, 100000]")
	fs.DurationVar(&f.Healthy.Median, "latency", f.Healthy.Median, "median latency of a normal call, in (0, 1h]")
	fs.DurationVar(&f.Healthy.P99, "latency-p99", f.Healthy.P99, "P99 latency of a normal call, in [-latency, 1h]")
	fs.DurationVar(&f.Slow.Median, "slow-median", f.Slow.Median, "median latency of a slow call, in (0, 1h]")
	fs.DurationVar(&f.Slow.P99, "slow-p99", f.Slow.P99, "P99 latency of a slow call (a slow outage, or -overflow slow), in [-slow-median, 1h]")
	fs.DurationVar(&f.SlowCallDuration, "slow-call", f.SlowCallDuration, "a call slower than this is slow: it trips the breaker at a 50% rate and fails a probe; > 0")
	fs.DurationVar(&f.OpenWindow, "open-window", f.OpenWindow, "first open window (eager's fixed window), in (0, 48h]")
	fs.DurationVar(&f.MaxOpenWindow, "max-open-window", f.MaxOpenWindow, "cap of the doubling, jittered open window, in [-open-window, 48h]")
	fs.BoolVar(&f.FixedOpenWindow, "fixed-open-window", f.FixedOpenWindow, "every strategy opens for exactly -open-window, unjittered (false: doubling up to -max-open-window, jittered)")
	fs.DurationVar(&f.TripWindow, "trip-window", f.TripWindow, "judge failure rates over the last `duration` (0: over the last 20 calls), 0 or [10ms, 1h]")
	fs.IntVar(&f.TripMinCalls, "trip-min-calls", f.TripMinCalls, "`calls` the window must hold before it can trip, [0, 1000000] (0: 10); with -trip-window, at most -rate × -trip-window")
	fs.BoolVar(&f.HealthCheck, "health-check", f.HealthCheck, "give every strategy but eager a health check, polled every 1s while open, that passes unless the dependency is down")
	fs.Uint64Var(&seed, "seed", base.Seed, "random seed of arrivals, latencies and jitter")
	if err := parseFlags(fs, args, stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage // the flag package printed the message and usage
	}
	if fs.NArg() > 0 {
		return usageError(stderr, "unexpected argument %q (flags only; see -h)", fs.Arg(0))
	}
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })

	sc, err := sim.Preset(o.preset)
	if err != nil {
		return usageError(stderr, "-preset: unknown preset %q, allowed %s", o.preset, strings.Join(sim.PresetNames(), ", "))
	}
	names, err := sim.ParseStrategies(o.strategies)
	if err != nil {
		return usageError(stderr, "-strategies: %v", strings.TrimPrefix(err.Error(), "sim: "))
	}
	switch o.format {
	case "table", "json", "markdown":
	default:
		return usageError(stderr, "-format: unknown format %q, allowed table, json or markdown", o.format)
	}
	if o.plot != "" {
		if ext := strings.ToLower(filepath.Ext(o.plot)); ext != ".svg" && ext != ".png" {
			return usageError(stderr, "-plot: file %q must end in .svg or .png", o.plot)
		}
	}
	if set["arrivals"] {
		if f.Arrivals, err = sim.ParseArrivals(arrivals); err != nil {
			return usageError(stderr, "-arrivals: unknown process %q, allowed poisson or uniform", arrivals)
		}
	}
	if set["overflow"] {
		if f.Overflow, err = sim.ParseOverflow(overflow); err != nil {
			return usageError(stderr, "-overflow: unknown value %q, allowed fail or slow", overflow)
		}
	}
	f.Seed = seed
	preset := sc
	sc = applyFlags(sc, f, set)
	// A zero in the scenario means "the default"; given on the command
	// line it is out of range.
	for _, fl := range []struct {
		name string
		v    float64
	}{
		{"latency", float64(f.Healthy.Median)}, {"latency-p99", float64(f.Healthy.P99)},
		{"slow-median", float64(f.Slow.Median)}, {"slow-p99", float64(f.Slow.P99)},
		{"drain-rate", f.DrainRate}, {"slow-call", float64(f.SlowCallDuration)},
		{"open-window", float64(f.OpenWindow)}, {"max-open-window", float64(f.MaxOpenWindow)},
	} {
		if set[fl.name] && fl.v <= 0 {
			return zeroFlagError(stderr, sc, preset, set, fl.name, fl.v)
		}
	}
	if err := sc.Validate(); err != nil {
		return scenarioError(stderr, err, preset, set)
	}
	if modified(preset, sc) {
		sc.Name = preset.Name + " (modified)"
	}

	// Check the output files before the run, which can take seconds.
	for _, out := range []struct{ flag, path string }{{"o", o.out}, {"plot", o.plot}} {
		if err := checkWritable(out.path); err != nil {
			return usageError(stderr, "-%s: %v", out.flag, err)
		}
	}

	results, err := sim.Run(sc, names)
	if err != nil {
		fmt.Fprintf(stderr, "floodgate sim: %v\n", err)
		return exitError
	}
	var buf bytes.Buffer
	switch o.format {
	case "table":
		err = sim.WriteTable(&buf, sc, results)
	case "json":
		err = sim.WriteJSON(&buf, sc, results, o.series)
	case "markdown":
		err = sim.WriteMarkdown(&buf, sc, results)
	}
	if err == nil {
		if o.out != "" {
			err = os.WriteFile(o.out, buf.Bytes(), 0o644)
		} else {
			_, err = stdout.Write(buf.Bytes())
		}
	}
	if err == nil && o.plot != "" {
		err = simplot.WriteFile(o.plot, sc, results)
	}
	if err != nil {
		fmt.Fprintf(stderr, "floodgate sim: %v\n", err)
		return exitError
	}
	return exitOK
}

// applyFlags returns preset sc with the scenario flags that were given (set)
// taken from f.
func applyFlags(sc, f sim.Scenario, set map[string]bool) sim.Scenario {
	preset := sc
	if set["rate"] {
		sc.Rate = f.Rate
	}
	if set["arrivals"] {
		sc.Arrivals = f.Arrivals
	}
	if set["recover-at"] {
		sc.RecoverAt = f.RecoverAt
	}
	if set["outage"] {
		sc.Outage = f.Outage
	}
	if set["slow-outage"] {
		sc.SlowOutage = f.SlowOutage
	}
	if set["fragile"] {
		sc.Fragile = f.Fragile
	}
	if set["fragile-capacity"] {
		sc.FragileCapacity = f.FragileCapacity
	}
	if set["overflow"] {
		sc.Overflow = f.Overflow
	}
	if set["capacity"] {
		sc.Capacity = f.Capacity
	}
	if set["backlog"] {
		sc.Backlog = f.Backlog
	}
	if set["drain-rate"] {
		sc.DrainRate = f.DrainRate
	}
	sc.Healthy = latency(sc.Healthy, f.Healthy, set["latency"], set["latency-p99"])
	sc.Slow = latency(sc.Slow, f.Slow, set["slow-median"], set["slow-p99"])
	if set["slow-call"] {
		sc.SlowCallDuration = f.SlowCallDuration
	}
	if set["open-window"] {
		sc.OpenWindow = f.OpenWindow
	}
	if set["fixed-open-window"] {
		sc.FixedOpenWindow = f.FixedOpenWindow
	}
	switch {
	case set["max-open-window"]:
		sc.MaxOpenWindow = f.MaxOpenWindow
	case sc.FixedOpenWindow, preset.FixedOpenWindow:
		// A fixed window does not double: its cap follows -open-window.
		// A fixed preset made doubling (-fixed-open-window=false) doubles
		// up to the default cap, not to its fixed window.
		sc.MaxOpenWindow = 0 // the default, set below
	case sc.MaxOpenWindow < sc.OpenWindow:
		sc.MaxOpenWindow = sc.OpenWindow
	}
	if set["trip-window"] {
		sc.TripWindow = f.TripWindow
	}
	if set["trip-min-calls"] {
		sc.TripMinCalls = f.TripMinCalls
	} else if set["rate"] && sc.TripMinCalls > 0 {
		// the preset's minimum is a share of a second's load
		sc.TripMinCalls = max(1, int(math.Round(float64(preset.TripMinCalls)*sc.Rate/preset.Rate)))
	}
	if set["health-check"] {
		sc.HealthCheck = f.HealthCheck
	}
	sc.Seed = f.Seed
	if set["duration"] {
		sc.Duration = f.Duration
	} else {
		tail := preset.Duration - preset.RecoverAt - preset.Fragile
		sc.Duration = max(preset.Duration, sc.RecoverAt+sc.Fragile+tail)
	}
	return sc.WithDefaults()
}

// modified reports whether the flags changed scenario sc from preset in
// any setting but its seed (which the scenario line shows anyway).
func modified(preset, sc sim.Scenario) bool {
	sc.Seed, sc.Name = preset.Seed, preset.Name
	return sc.WithDefaults() != preset.WithDefaults()
}

// fieldValue returns the value of scenario field ("Rate", "Healthy.P99"),
// as named by sim.FieldError, in sc, or nil if sc has no such field.
func fieldValue(sc sim.Scenario, field string) any {
	v := reflect.ValueOf(sc)
	for name := range strings.SplitSeq(field, ".") {
		if v = v.FieldByName(name); !v.IsValid() {
			return nil
		}
	}
	return v.Interface()
}

// latency applies a median and P99 given on the command line to l. When
// only one is given, the other keeps its ratio to it.
func latency(l, flags sim.Latency, median, p99 bool) sim.Latency {
	switch {
	case median && p99:
		return flags
	case median:
		if l.Median > 0 {
			l.P99 = time.Duration(float64(flags.Median) * float64(l.P99) / float64(l.Median))
		}
		l.Median = flags.Median
	case p99:
		if l.P99 > 0 {
			l.Median = time.Duration(float64(flags.P99) * float64(l.Median) / float64(l.P99))
		}
		l.P99 = flags.P99
	}
	return l
}

// flagRange rewrites the allowed range of scenario field ("(0, Duration
// (1m0s)]") in flag names.
func flagRange(field, allowed string) string {
	median := "-latency"
	if strings.HasPrefix(field, "Slow.") {
		median = "-slow-median"
	}
	r := strings.NewReplacer("Duration-RecoverAt", "-duration minus -recover-at", "RecoverAt", "-recover-at",
		"Duration", "-duration", "OpenWindow", "-open-window", "Median", median,
		"Rate × Duration", "-rate × -duration", "Fragile > 0", "-fragile > 0",
		"Rate × TripWindow", "-rate × -trip-window", "TripWindow", "-trip-window",
		"FixedOpenWindow", "-fixed-open-window")
	return r.Replace(allowed)
}

// scenarioError reports err, an invalid scenario, naming the flag at fault
// and its allowed range; it returns exitUsage.
func scenarioError(stderr io.Writer, err error, preset sim.Scenario, set map[string]bool) int {
	var fe *sim.FieldError
	if errors.As(err, &fe) {
		if name, ok := scenarioFlags[fe.Field]; ok {
			allowed := flagRange(fe.Field, fe.Allowed)
			switch {
			case set[name]:
				return usageError(stderr, "-%s: %v is out of range, allowed %s", name, fe.Value, allowed)
			case fe.Value == fieldValue(preset, fe.Field):
				return usageError(stderr, "-%s: the preset's %v is out of range, allowed %s; set -%[1]s too", name, fe.Value, allowed)
			default:
				return usageError(stderr, "-%s: %v, derived from the preset's value and the flags given, is out of range, allowed %s; set -%[1]s too",
					name, fe.Value, allowed)
			}
		}
	}
	return usageError(stderr, "%v", err)
}

// zeroFlagError reports flag -name given as v <= 0 where the scenario
// takes 0 as "the default" (so sim.Validate cannot see it), with the
// allowed range sim.Validate states for its field: it validates sc with
// that field set to -1. It returns exitUsage.
func zeroFlagError(stderr io.Writer, sc, preset sim.Scenario, set map[string]bool, name string, v float64) int {
	field := ""
	for fld, fl := range scenarioFlags {
		if fl == name {
			field = fld
		}
	}
	value := any(v)
	if fv := fieldRef(&sc, field); fv.IsValid() && fv.Type() == reflect.TypeFor[time.Duration]() {
		value = time.Duration(v)
	}
	if setField(&sc, field, -1) {
		var fe *sim.FieldError
		err := sc.Validate()
		if errors.As(err, &fe) && fe.Field == field {
			return usageError(stderr, "-%s: %v is out of range, allowed %s", name, value, flagRange(fe.Field, fe.Allowed))
		}
		if err != nil {
			return scenarioError(stderr, err, preset, set)
		}
	}
	return usageError(stderr, "-%s: %v is out of range, allowed > 0", name, value)
}

// setField sets scenario field ("DrainRate", "Healthy.P99"), as named by
// sim.FieldError, to v (in nanoseconds for a duration); it reports whether
// sc has such a numeric field.
func setField(sc *sim.Scenario, field string, v float64) bool {
	rv := fieldRef(sc, field)
	if !rv.IsValid() {
		return false
	}
	switch rv.Kind() {
	case reflect.Int64:
		rv.SetInt(int64(v))
	case reflect.Float64:
		rv.SetFloat(v)
	default:
		return false
	}
	return true
}

// fieldRef returns the settable scenario field ("Rate", "Healthy.P99"), as
// named by sim.FieldError, of *sc, or the zero Value if there is none.
func fieldRef(sc *sim.Scenario, field string) reflect.Value {
	rv := reflect.ValueOf(sc).Elem()
	for name := range strings.SplitSeq(field, ".") {
		if rv = rv.FieldByName(name); !rv.IsValid() {
			return reflect.Value{}
		}
	}
	return rv
}

// checkWritable reports whether file path ("" is none) can be written: it
// opens it for writing, creating it empty if missing, and leaves what it
// holds unchanged.
func checkWritable(path string) error {
	if path == "" {
		return nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("cannot write the output file: %w", err)
	}
	return f.Close()
}

// usageError prints a command-line error and returns exitUsage.
func usageError(stderr io.Writer, format string, args ...any) int {
	fmt.Fprintf(stderr, "floodgate sim: "+format+"\n", args...)
	fmt.Fprintln(stderr, `Run "floodgate sim -h" for the flags.`)
	return exitUsage
}
