package deploy_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/metrics"
	"github.com/floodgate-go/floodgate/middleware"
)

// metricRow is one row of the README's metrics table.
type metricRow struct {
	typ    string
	labels []string
}

// readmeMetrics parses the README's metrics table: | `name` | type | `l1`, `l2` | what |.
func readmeMetrics(t *testing.T) map[string]metricRow {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	i := strings.Index(doc, "| metric | type | labels | what |\n")
	if i < 0 {
		t.Fatal("README.md lacks the metrics table (| metric | type | labels | what |)")
	}
	table, _, _ := strings.Cut(doc[i:], "\n\n")
	lines := strings.Split(table, "\n")[2:]
	code := regexp.MustCompile("`([^`]+)`")
	rows := map[string]metricRow{}
	for _, line := range lines {
		cells := strings.SplitN(strings.TrimPrefix(line, "|"), "|", 4) // name, type, labels, what
		if len(cells) < 4 {
			t.Fatalf("README metrics table: bad row %q", line)
		}
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		name := strings.Trim(cells[0], "`")
		var labels []string
		for _, m := range code.FindAllStringSubmatch(cells[2], -1) {
			labels = append(labels, m[1])
		}
		if _, dup := rows[name]; dup {
			t.Errorf("README metrics table lists %s twice", name)
		}
		rows[name] = metricRow{typ: cells[1], labels: labels}
	}
	return rows
}

// codeMetrics returns each metric's type and variable labels as the
// metrics package exports them: labels from the descriptors, types from a
// gather of a Metrics watching a breaker and a drain (the one family that
// needs a JetStream queue, the publish errors, is a counter by its name).
func codeMetrics(t *testing.T) map[string]metricRow {
	t.Helper()
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg, metrics.Options{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := breaker.New(breaker.Config{Name: "p"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Stop)
	if err := m.WatchBreaker("p", b); err != nil {
		t.Fatal(err)
	}
	if err := m.WatchDrains(func(context.Context) []metrics.DrainSample {
		return []metrics.DrainSample{{Partner: "p", Rate: 1, HasBacklog: true}}
	}); err != nil {
		t.Fatal(err)
	}
	m.ObserveEvent(middleware.Event{Partner: "p", Action: middleware.Delivered, Admitted: true})
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	types := map[string]string{}
	for _, f := range fams {
		types[f.GetName()] = strings.ToLower(f.GetType().String())
	}
	out := map[string]metricRow{}
	ch := make(chan *prometheus.Desc, 64)
	go func() { m.Describe(ch); close(ch) }()
	vl := regexp.MustCompile(`variableLabels: \{([^}]*)\}`)
	for d := range ch {
		name := metrics.DescName(d)
		var labels []string
		if sm := vl.FindStringSubmatch(d.String()); sm != nil && sm[1] != "" {
			labels = strings.Split(sm[1], ",")
		}
		typ := types[name]
		if typ == "" && strings.HasSuffix(name, "_total") {
			typ = "counter"
		}
		out[name] = metricRow{typ: typ, labels: labels}
	}
	return out
}

// TestREADMEMetricsTable keeps the README's metrics table matching the
// code: every exported metric once, with its type and its labels in order,
// and nothing else.
func TestREADMEMetricsTable(t *testing.T) {
	readme, code := readmeMetrics(t), codeMetrics(t)
	if len(code) != len(metrics.Names()) {
		t.Fatalf("described %d metrics, Names() has %d", len(code), len(metrics.Names()))
	}
	for name, c := range code {
		r, ok := readme[name]
		switch {
		case !ok:
			t.Errorf("README metrics table lacks %s (%s, labels %v)", name, c.typ, c.labels)
		case r.typ != c.typ:
			t.Errorf("README: %s is a %s, the code exports a %s", name, r.typ, c.typ)
		case !slices.Equal(r.labels, c.labels):
			t.Errorf("README: %s has labels %v, the code %v", name, r.labels, c.labels)
		}
	}
	for name := range readme {
		if _, ok := code[name]; !ok {
			t.Errorf("README metrics table lists %s, which the code does not export", name)
		}
	}
}
