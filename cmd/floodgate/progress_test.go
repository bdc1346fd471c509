package main

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestProgressBar: drawn when forced, never on a writer that is not a
// terminal otherwise (the path every test and pipe takes).
func TestProgressBar(t *testing.T) {
	var b bytes.Buffer
	p := newProgress(&b, true, "scanning s", 4)
	p.add(1) // the first add draws
	if !strings.Contains(b.String(), "\rscanning s [#######.......................] 1/4") {
		t.Errorf("first draw: %q", b.String())
	}
	p.add(3)
	p.done()
	if !strings.HasSuffix(b.String(), "[##############################] 4/4\n") {
		t.Errorf("done: %q", b.String())
	}

	var quiet bytes.Buffer
	p = newProgress(&quiet, false, "scanning s", 4)
	p.add(4)
	p.done()
	if quiet.Len() != 0 || isTerminal(&quiet) {
		t.Errorf("not a terminal: drew %q", quiet.String())
	}
}

// TestReplayProgress: replay draws its progress with -progress, and
// nothing on a non-terminal without it.
func TestReplayProgress(t *testing.T) {
	s := newStreams(t, nil, []string{"edi_orders", "edi_orders", "invoices"})
	code, _, errOut := runCmd(append([]string{"replay"}, s.flags("-dry-run", "-progress")...)...)
	if code != exitOK || !strings.Contains(errOut, "replaying "+s.dead) || !strings.Contains(errOut, "3/3") {
		t.Errorf("replay -progress: exit %d, stderr %q", code, errOut)
	}
	code, _, errOut = runCmd(append([]string{"replay"}, s.flags("-dry-run")...)...)
	if code != exitOK || errOut != "" {
		t.Errorf("replay on a non-terminal: exit %d, stderr %q; want nothing", code, errOut)
	}
}

// TestStatusJSONSchema: status -format json has exactly the documented
// fields, the state as a name and durations in seconds (issue 15: it had
// a numeric state, nanoseconds and the KV revision).
func TestStatusJSONSchema(t *testing.T) {
	st := breakerStatus{Breaker: "svc.p", Service: "svc", Partner: "p", State: "open", HasSharedState: true,
		OpenWindowSeconds: 1.5, OpenUntil: rfc3339(time.Unix(10, 0)), Probes: []probeStatus{{Slot: 0, Holder: "r1"}},
		UpdatedBy: "r1", Reason: "trip", UpdatedAt: rfc3339(time.Unix(9, 0))}
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"breaker": "string", "service": "string", "partner": "string", "state": "string", "has_shared_state": "bool",
		"forced": "bool", "open_window_seconds": "float64", "open_until": "string", "epoch": "float64",
		"consecutive_trips": "float64", "consecutive_successes": "float64", "probes": "[]interface {}",
		"updated_by": "string", "reason": "string", "updated_at": "string", "backlog": "float64", "dead_letters": "float64",
	}
	var keys []string
	for k, v := range got {
		keys = append(keys, k)
		if w, ok := want[k]; !ok {
			t.Errorf("undocumented field %q", k)
		} else if typ := reflect.TypeOf(v).String(); typ != w {
			t.Errorf("%s: %s, want %s", k, typ, w)
		}
	}
	slices.Sort(keys)
	if len(keys) != len(want) {
		t.Errorf("fields %v, want %d documented ones", keys, len(want))
	}
	if got["open_window_seconds"] != 1.5 || got["open_until"] != "1970-01-01T00:00:10Z" {
		t.Errorf("units: %s", b)
	}
	// A breaker with no shared state, and one with a one-token name, have
	// the same fields: "" for the strings they lack (issue: omitempty
	// dropped reason, updated_by, updated_at).
	for _, st := range []breakerStatus{{Breaker: "svc.p", Service: "svc", Partner: "p", State: "unknown", Probes: []probeStatus{}},
		{Breaker: "lone", State: "closed", HasSharedState: true, Probes: []probeStatus{}}} {
		b, err := json.Marshal(st)
		if err != nil {
			t.Fatal(err)
		}
		var got map[string]any
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatal(err)
		}
		for k, w := range want {
			if v, ok := got[k]; !ok {
				t.Errorf("%s: field %q missing: %s", st.Breaker, k, b)
			} else if typ := reflect.TypeOf(v).String(); typ != w {
				t.Errorf("%s: %s: %s, want %s", st.Breaker, k, typ, w)
			}
		}
	}
}
