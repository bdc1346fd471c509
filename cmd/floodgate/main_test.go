package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/sim"
)

func runCmd(args ...string) (code int, stdout, stderr string) {
	var o, e bytes.Buffer
	code = run(args, &o, &e)
	return code, o.String(), e.String()
}

func TestUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		out  bool // usage on stdout (else stderr)
	}{
		{nil, exitUsage, false},
		{[]string{"-h"}, exitOK, true},
		{[]string{"help"}, exitOK, true},
		{[]string{"nope"}, exitUsage, false},
	} {
		code, out, errOut := runCmd(tc.args...)
		text := errOut
		if tc.out {
			text = out
		}
		if code != tc.code || !strings.Contains(text, "Usage: floodgate <command> [flags]") || !strings.Contains(text, "sim ") {
			t.Errorf("%v: code %d, stdout %q, stderr %q", tc.args, code, out, errOut)
		}
	}
	if _, _, e := runCmd("nope"); !strings.Contains(e, `unknown command "nope"`) {
		t.Errorf("unknown command: %q", e)
	}
	for _, args := range [][]string{{"sim", "-h"}, {"help", "sim"}} {
		code, _, e := runCmd(args...)
		if code != exitOK || !strings.Contains(e, "Usage: floodgate sim [flags]") || !strings.Contains(e, "-fragile-capacity") {
			t.Errorf("%v: code %d, %q", args, code, e)
		}
		for _, s := range []string{"slower than -slow-call", "table, JSON or Markdown", "at most 2 million calls", "(any case)"} {
			if !strings.Contains(e, s) {
				t.Errorf("%v: help lacks %q", args, s)
			}
		}
	}
}

// TestSimBadFlags: every bad command line exits 2 with a message naming
// the flag.
func TestSimBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		flag string
	}{
		{[]string{"-rate", "-5"}, "-rate"},
		{[]string{"-rate", "fast"}, "-rate"},
		{[]string{"-bogus"}, "-bogus"},
		{[]string{"-format", "xml"}, "-format"},
		{[]string{"-strategies", "ramp,fast"}, "-strategies"},
		{[]string{"-preset", "medium"}, "-preset"},
		{[]string{"-plot", "out.pdf"}, "-plot"},
		{[]string{"-arrivals", "bursty"}, "-arrivals"},
		{[]string{"-overflow", "drop"}, "-overflow"},
		{[]string{"-outage", "30s"}, "-outage"},
		{[]string{"-recover-at", "2m", "-duration", "1m"}, "-recover-at"},
		{[]string{"-fragile-capacity", "0"}, "-fragile-capacity"},
		{[]string{"-capacity", "-1"}, "-capacity"},
		{[]string{"-drain-rate", "-5"}, "-drain-rate"},
		{[]string{"-latency", "1s", "-latency-p99", "10ms"}, "-latency-p99"},
		{[]string{"-max-open-window", "100ms"}, "-max-open-window"},
		{[]string{"-open-window", "0"}, "-open-window"},
		{[]string{"-trip-window", "5ms"}, "-trip-window"},
		{[]string{"-trip-min-calls", "-1"}, "-trip-min-calls"},
		{[]string{"-drain-rate", "0"}, "-drain-rate"},
		{[]string{"-duration", "49h"}, "-duration"},
		{[]string{"extra"}, "extra"},
		// Regression: a zero latency was replaced by the default.
		// Regression: the message gave no range.
		{[]string{"-latency", "0"}, "-latency: 0s is out of range, allowed (0, 1h]"},
		{[]string{"-latency-p99", "0"}, "-latency-p99: 0s is out of range, allowed [-latency (20ms), 1h]"},
		{[]string{"-slow-median", "0"}, "-slow-median: 0s is out of range, allowed (0, 1h]"},
		{[]string{"-slow-p99", "0"}, "-slow-p99: 0s is out of range, allowed [-slow-median (300ms), 1h]"},
		{[]string{"-slow-call", "0"}, "-slow-call: 0s is out of range, allowed > 0"},
		{[]string{"-slow-call", "-1s"}, "-slow-call: -1s is out of range, allowed > 0"},
		{[]string{"-drain-rate", "0"}, "-drain-rate: 0 is out of range, allowed (0, 100000] calls/s"},
		{[]string{"-open-window", "0"}, "-open-window: 0s is out of range, allowed (0, 48h0m0s]"},
		{[]string{"-max-open-window", "0"}, "-max-open-window: 0s is out of range, allowed [-open-window (5s), 48h0m0s]"},
		// Regression: a million-hour open window was accepted.
		{[]string{"-open-window", "1000000h"}, "-open-window: 1000000h0m0s is out of range, allowed (0, 48h0m0s]"},
		{[]string{"-fixed-open-window=false", "-max-open-window", "49h"}, "-max-open-window: 49h0m0s is out of range, allowed [-open-window (5s), 48h0m0s]"},
		// Regression: a bad output path failed only after the run.
		{[]string{"-plot", "/nonexistent/dir/x.svg"}, "-plot: cannot write the output file"},
		{[]string{"-o", "/nonexistent/dir/x.txt"}, "-o: cannot write the output file"},
		// Regression: the largest run took 14 minutes.
		{[]string{"-rate", "100000", "-duration", "60s"}, "-duration: 1m0s is out of range, allowed at most 2000000 offered calls (-rate × -duration)"},
		// Regression: breakers that can never trip.
		{[]string{"-trip-window", "10ms"}, "-trip-min-calls: the preset's 80 is out of range, allowed [1, 1] calls with -trip-window 10ms"},
		{[]string{"-trip-min-calls", "1000000"}, "-trip-min-calls: 1000000 is out of range, allowed [0, 100] calls"},
		// Regression: a cap on a fixed window was silently ignored.
		{[]string{"-fixed-open-window", "-max-open-window", "1m"}, "-max-open-window: 1m0s is out of range, allowed -open-window (5s) with -fixed-open-window"},
		{[]string{"-max-open-window", "1m"}, "-max-open-window"},
		// Regression: errors named flags that were not given as if they
		// were.
		{[]string{"-duration", "25s"}, "-fragile: the preset's 10s is out of range, allowed [0, -duration minus -recover-at (5s)]; set -fragile too"},
		{[]string{"-recover-at", "5s"}, "-outage: the preset's 10s is out of range, allowed [0, -recover-at (5s)]; set -outage too"},
		{[]string{"-duration", "10s"}, "-recover-at: the preset's 20s is out of range"},
		{[]string{"-preset", "long-outage", "-rate", "100000"}, "-duration: the preset's 4h16m0s is out of range, allowed at most 2000000 offered calls (-rate × -duration); set -duration too"},
		{[]string{"-latency", "30m"}, "-latency-p99: 2h30m0s, derived from the preset's value and the flags given, is out of range"},
	} {
		code, out, e := runCmd(append([]string{"sim"}, tc.args...)...)
		if code != exitUsage || out != "" || !strings.Contains(e, tc.flag) {
			t.Errorf("%v: code %d, stdout %q, stderr %q", tc.args, code, out, e)
		}
	}
}

// simScenario runs "floodgate sim -format json" with args and returns its
// scenario object.
func simScenario(t *testing.T, args ...string) map[string]any {
	t.Helper()
	code, out, e := runCmd(append([]string{"sim", "-format", "json", "-series=false", "-strategies", "eager"}, args...)...)
	if code != exitOK {
		t.Fatalf("%v: code %d: %s", args, code, e)
	}
	var rep struct {
		Scenario map[string]any `json:"scenario"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	return rep.Scenario
}

// TestSimOpenWindowFlags: a fixed window's cap follows -open-window; a
// fixed preset made doubling doubles up to the default cap.
func TestSimOpenWindowFlags(t *testing.T) {
	for _, tc := range []struct {
		args      []string
		open, max float64
		fixed     bool
	}{
		{nil, 5, 5, true},
		{[]string{"-open-window", "2s"}, 2, 2, true},
		{[]string{"-open-window", "10s"}, 10, 10, true},
		{[]string{"-fixed-open-window=false"}, 5, 30, false},
		{[]string{"-fixed-open-window=false", "-open-window", "1m"}, 60, 60, false},
		{[]string{"-fixed-open-window=false", "-max-open-window", "10s"}, 5, 10, false},
		{[]string{"-preset", "fragile-defaults"}, 1, 30, false},
		{[]string{"-preset", "fragile-defaults", "-fixed-open-window"}, 1, 1, true},
		{[]string{"-preset", "fragile-defaults", "-open-window", "2s"}, 2, 30, false},
		{[]string{"-preset", "fragile-defaults", "-open-window", "1m"}, 60, 60, false},
	} {
		sc := simScenario(t, tc.args...)
		if sc["open_window_s"] != tc.open || sc["max_open_window_s"] != tc.max || sc["fixed_open_window"] != tc.fixed {
			t.Errorf("%v: open window %v, max %v, fixed %v; want %v, %v, %v", tc.args,
				sc["open_window_s"], sc["max_open_window_s"], sc["fixed_open_window"], tc.open, tc.max, tc.fixed)
		}
	}
}

// TestSimModified: a scenario flag that changes the preset labels the
// scenario "PRESET (modified)"; the seed, or a flag at the preset's value,
// does not.
func TestSimModified(t *testing.T) {
	for _, tc := range []struct {
		args []string
		name string
	}{
		{nil, "fragile"},
		{[]string{"-seed", "7"}, "fragile"},
		{[]string{"-rate", "100", "-fixed-open-window"}, "fragile"},
		{[]string{"-rate", "50"}, "fragile (modified)"},
		{[]string{"-health-check"}, "fragile (modified)"},
		{[]string{"-preset", "slow", "-slow-call", "100ms"}, "slow (modified)"},
	} {
		if got := simScenario(t, tc.args...)["name"]; got != tc.name {
			t.Errorf("%v: name %v, want %q", tc.args, got, tc.name)
		}
	}
	code, out, e := runCmd("sim", "-strategies", "eager", "-rate", "50")
	if code != exitOK || !strings.HasPrefix(out, "scenario fragile (modified): 50 calls/s") {
		t.Errorf("table: code %d %q %q", code, out, e)
	}
}

// TestSimStrategiesCase: -strategies takes any case.
func TestSimStrategiesCase(t *testing.T) {
	code, out, e := runCmd("sim", "-strategies", "ALL")
	if code != exitOK || len(strings.Split(strings.TrimSpace(out), "\n")) != 9 {
		t.Errorf("-strategies ALL: code %d, %q, %q", code, out, e)
	}
	if code, _, e := runCmd("sim", "-strategies", "Ramp,EAGER"); code != exitOK {
		t.Errorf("-strategies Ramp,EAGER: code %d %q", code, e)
	}
}

func TestSimTable(t *testing.T) {
	code, out, e := runCmd("sim", "-strategies", "ramp,single-probe")
	if code != exitOK || e != "" {
		t.Fatalf("code %d: %s", code, e)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if !strings.HasPrefix(lines[0], "scenario fragile: 100 calls/s") || len(lines) != 6 ||
		!strings.HasPrefix(lines[4], "ramp ") || !strings.HasPrefix(lines[5], "single-probe ") {
		t.Errorf("table:\n%s", out)
	}
	// The same command gives the same bytes.
	if _, again, _ := runCmd("sim", "-strategies", "ramp,single-probe"); again != out {
		t.Error("two runs differ")
	}
}

func TestSimJSON(t *testing.T) {
	code, out, e := runCmd("sim", "-format", "json", "-strategies", "all", "-rate", "50",
		"-fragile", "5s", "-fragile-capacity", "20", "-seed", "7", "-arrivals", "uniform")
	if code != exitOK {
		t.Fatalf("code %d: %s", code, e)
	}
	var rep struct {
		Scenario map[string]any   `json:"scenario"`
		Results  []map[string]any `json:"results"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Scenario["rate"] != 50.0 || rep.Scenario["fragile_s"] != 5.0 || rep.Scenario["fragile_capacity"] != 20.0 ||
		rep.Scenario["seed"] != 7.0 || rep.Scenario["arrivals"] != "uniform" || rep.Scenario["name"] != "fragile (modified)" {
		t.Errorf("scenario %v", rep.Scenario)
	}
	// -fragile shortened the fragile phase; the run keeps the preset's 30s tail after it.
	if rep.Scenario["duration_s"] != 60.0 {
		t.Errorf("duration %v", rep.Scenario["duration_s"])
	}
	if len(rep.Results) != 5 {
		t.Fatalf("%d results", len(rep.Results))
	}
	for i, r := range rep.Results {
		if r["strategy"] != sim.StrategyNames()[i] {
			t.Errorf("result %d is %v", i, r["strategy"])
		}
		for _, k := range []string{"errors_after_recovery", "retrips_after_recovery", "time_to_close_s",
			"time_to_full_traffic_s", "max_probes_in_flight", "probes_during_outage", "diverted", "series"} {
			if _, ok := r[k]; !ok {
				t.Errorf("%v lacks %s", r["strategy"], k)
			}
		}
		s := r["series"].(map[string]any)
		if s["step_s"] != 0.1 || len(s["state"].([]any)) != 600 || len(s["admitted_share"].([]any)) != 600 || len(s["errors"].([]any)) != 600 {
			t.Errorf("%v series: step %v, %d points", r["strategy"], s["step_s"], len(s["state"].([]any)))
		}
	}
	_, noSeries, _ := runCmd("sim", "-format", "json", "-series=false", "-strategies", "eager")
	if strings.Contains(noSeries, `"series"`) {
		t.Error("-series=false still has a series")
	}
}

func TestSimFilesAndMarkdown(t *testing.T) {
	dir := t.TempDir()
	out, svg, png := filepath.Join(dir, "t.md"), filepath.Join(dir, "p.svg"), filepath.Join(dir, "p.png")
	code, stdout, e := runCmd("sim", "-preset", "slow", "-format", "markdown", "-o", out, "-plot", svg, "-strategies", "eager,capped-probes")
	if code != exitOK || stdout != "" {
		t.Fatalf("code %d, stdout %q, stderr %q", code, stdout, e)
	}
	md, err := os.ReadFile(out)
	if err != nil || !strings.Contains(string(md), "| capped-probes |") || !strings.HasPrefix(string(md), "Scenario slow:") {
		t.Errorf("markdown %q %v", md, err)
	}
	if b, err := os.ReadFile(svg); err != nil || !bytes.HasPrefix(b, []byte("<?xml")) {
		t.Errorf("svg: %v", err)
	}
	if code, _, e := runCmd("sim", "-plot", png, "-strategies", "ramp"); code != exitOK {
		t.Fatalf("png: %d %s", code, e)
	}
	if b, err := os.ReadFile(png); err != nil || !bytes.HasPrefix(b, []byte("\x89PNG")) {
		t.Errorf("png: %v", err)
	}
	// An unwritable output file is a bad flag, found before the run: no
	// table is printed.
	for _, fl := range []string{"-plot", "-o"} {
		code, out, e := runCmd("sim", fl, filepath.Join(dir, "missing", "p.svg"), "-strategies", "ramp")
		if code != exitUsage || out != "" || !strings.Contains(e, fl+": cannot write the output file") {
			t.Errorf("unwritable %s: code %d, stdout %q, stderr %q", fl, code, out, e)
		}
	}
	// An existing output file is overwritten, not appended to.
	if err := os.WriteFile(out, bytes.Repeat([]byte("old "), 10000), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, e := runCmd("sim", "-format", "markdown", "-o", out, "-strategies", "eager"); code != exitOK {
		t.Fatalf("rewrite: %d %s", code, e)
	}
	if md, err := os.ReadFile(out); err != nil || bytes.Contains(md, []byte("old ")) || !strings.HasPrefix(string(md), "Scenario fragile:") {
		t.Errorf("rewritten markdown %.80q %v", md, err)
	}
}

func TestApplyFlags(t *testing.T) {
	slow, _ := sim.Preset("slow")
	f := slow
	f.Slow.P99 = 1800 * time.Millisecond
	f.Healthy.Median = 4 * time.Millisecond
	f.RecoverAt = 40 * time.Second
	f.Seed = 9
	sc := applyFlags(slow, f, map[string]bool{"slow-p99": true, "latency": true, "recover-at": true})
	if sc.Slow.P99 != 1800*time.Millisecond || sc.Slow.Median != 600*time.Millisecond {
		t.Errorf("slow latency %+v, want the preset's median/P99 ratio kept", sc.Slow)
	}
	if sc.Healthy.Median != 4*time.Millisecond || sc.Healthy.P99 != 10*time.Millisecond {
		t.Errorf("healthy latency %+v", sc.Healthy)
	}
	if sc.RecoverAt != 40*time.Second || sc.Outage != slow.Outage || sc.Duration != 100*time.Second || sc.Seed != 9 {
		t.Errorf("recover-at moved: %+v", sc)
	}
	if sc.Rate != slow.Rate || sc.Fragile != slow.Fragile || !sc.SlowOutage || !sc.Backlog ||
		sc.Capacity != slow.Capacity || sc.DrainRate != slow.DrainRate {
		t.Errorf("flags not given changed the preset: %+v", sc)
	}
	f.Capacity, f.Backlog, f.DrainRate = 0, false, 10
	sc = applyFlags(slow, f, map[string]bool{"capacity": true, "backlog": true, "drain-rate": true})
	if sc.Capacity != 0 || sc.Backlog || sc.DrainRate != 10 {
		t.Errorf("-capacity, -backlog, -drain-rate not applied: %+v", sc)
	}
}
