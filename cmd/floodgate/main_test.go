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
	} {
		code, out, e := runCmd(append([]string{"sim"}, tc.args...)...)
		if code != exitUsage || out != "" || !strings.Contains(e, tc.flag) {
			t.Errorf("%v: code %d, stdout %q, stderr %q", tc.args, code, out, e)
		}
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
		rep.Scenario["seed"] != 7.0 || rep.Scenario["arrivals"] != "uniform" || rep.Scenario["name"] != "fragile" {
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
	if code, _, e := runCmd("sim", "-plot", filepath.Join(dir, "missing", "p.svg"), "-strategies", "ramp"); code != exitError || e == "" {
		t.Errorf("unwritable plot: code %d %q", code, e)
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
