package deploy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/floodgate-go/floodgate"
	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/internal/natstest"
	"github.com/floodgate-go/floodgate/jsq"
	"github.com/floodgate-go/floodgate/metrics"
	"github.com/floodgate-go/floodgate/partner"
	"github.com/floodgate-go/floodgate/retryqueue"
)

// tool returns the path of a Prometheus program (Debian's prometheus
// package installs both, and .ci/run installs it). When it is missing the
// test is skipped, or fails under CI=true, where the check must run.
func tool(t *testing.T, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err == nil {
		return path
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s not found (CI=true: .ci/run installs Debian's prometheus package): %v", name, err)
	}
	t.Skipf("%s not installed (Debian package prometheus); CI runs this test", name)
	return ""
}

// promtool runs promtool with args (stdin from in, if not nil) and fails
// the test with its output if it exits non-zero.
func promtool(t *testing.T, in []byte, args ...string) {
	t.Helper()
	cmd := exec.Command(tool(t, "promtool"), args...)
	if in != nil {
		cmd.Stdin = bytes.NewReader(in)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// TestPromtoolChecksDeployFiles: the Prometheus configuration and the
// example alerting rules are valid, and the rules' unit tests pass.
func TestPromtoolChecksDeployFiles(t *testing.T) {
	dir := filepath.Join(root, "deploy", "prometheus")
	promtool(t, nil, "check", "config", filepath.Join(dir, "prometheus.yml"))
	promtool(t, nil, "check", "rules", filepath.Join(dir, "alerts.yml"))
	promtool(t, nil, "test", "rules", filepath.Join(dir, "alerts_test.yml"))
}

// flaky delivers every message but those of the partners marked down.
type flaky struct {
	mu        sync.Mutex
	down      map[string]bool
	delivered map[string]map[string]bool // partner -> UUIDs
}

func (f *flaky) deliver(msg *message.Message) error {
	key := msg.Metadata.Get("partner")
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down[key] {
		return errors.New("partner down: 503")
	}
	f.delivered[key][msg.UUID] = true
	return nil
}

func (f *flaky) set(key string, down bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.down[key] = down
}

func (f *flaky) count(key string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.delivered[key])
}

// pipeline runs a floodgate pipeline on an embedded JetStream (or
// NATS_URL) with its metrics served on a loopback port, and returns that
// address. Partner "globex" is down, "acme" healthy; deliver recovers a
// partner.
func pipeline(t *testing.T) (addr string, f *flaky, publish func(key string, n int)) {
	t.Helper()
	nurl := natstest.URL(t)
	nc := natstest.Conn(t, nurl)
	js := natstest.JetStream(t, nc)
	topic := natstest.Name(t, "orders")
	retry, dead := natstest.Name(t, "retry"), natstest.Name(t, "dead")
	natstest.DeleteStreams(t, js, jsq.StreamName(topic), retry, dead)
	sub, err := jsq.NewSubscriber(jsq.SubscriberConfig{URL: nurl, Concurrency: 4})
	if err != nil {
		t.Fatal(err)
	}
	router, err := message.NewRouter(message.RouterConfig{CloseTimeout: 10 * time.Second}, watermill.NopLogger{})
	if err != nil {
		t.Fatal(err)
	}
	f = &flaky{down: map[string]bool{"globex": true}, delivered: map[string]map[string]bool{"acme": {}, "globex": {}}}
	reg := prometheus.NewRegistry()
	fg, err := floodgate.New(context.Background(), router, floodgate.Config{
		Name: "as2", Topic: topic, Subscriber: sub, JetStream: js,
		Deliver:    f.deliver,
		Metrics:    reg,
		PartnerKey: func(m *message.Message) string { return m.Metadata.Get("partner") },
		Partner: partner.PartnerConfig{Breaker: breaker.Config{
			WindowSize: 10, MinimumCalls: 5, ConsecutiveFailures: 3,
			BaseOpenWindow: 100 * time.Millisecond, MaxOpenWindow: 200 * time.Millisecond,
			SuccessesToClose: 2, ProbeConcurrency: 1,
		}},
		Queue: retryqueue.Config{RetryTopic: retry, DeadLetterTopic: dead, Backoff: func(int) time.Duration { return 10 * time.Millisecond }},
		Drain: retryqueue.PartnerDrainerConfig{DiscoverInterval: 100 * time.Millisecond, Drainer: retryqueue.DrainerConfig{PollInterval: 20 * time.Millisecond}},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	runDone := make(chan error, 1)
	go func() { runDone <- router.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		natstest.Finishes(t, 30*time.Second, func() { <-runDone }, "router stops")
		_ = fg.Close()
		_ = sub.Close()
	})
	<-router.Running()
	a, err := metrics.Start(ctx, "127.0.0.1:0", reg)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := jsq.NewPublisher(jsq.PublisherConfig{Conn: nc})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pub.Close() })
	publish = func(key string, n int) {
		t.Helper()
		for i := range n {
			m := message.NewMessage(fmt.Sprintf("%s-%d", key, i), []byte("850"))
			m.Metadata.Set("partner", key)
			if err := pub.Publish(topic, m); err != nil {
				t.Fatal(err)
			}
		}
	}
	return a.String(), f, publish
}

// startPrometheus runs a real Prometheus server scraping target every
// second and evaluating the example alerting rules, on a free loopback
// port with its store in a temporary directory, stopped when the test
// ends. It returns the server's base URL once it is ready.
func startPrometheus(t *testing.T, target string) string {
	t.Helper()
	bin := tool(t, "prometheus")
	dir := t.TempDir()
	rules, err := filepath.Abs(filepath.Join(root, "deploy", "prometheus", "alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
rule_files: [%q]
scrape_configs:
  - job_name: floodgate
    metrics_path: %s
    static_configs:
      - targets: [%q]
`, rules, metrics.Path, target)
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	listen := ln.Addr().String()
	_ = ln.Close() // a small window for another process to take the port: then the server fails and the test says so
	var logs bytes.Buffer
	cmd := exec.Command(bin,
		"--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+listen,
		"--log.level=warn")
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("prometheus output:\n%s", logs.String())
		}
	})
	base := "http://" + listen
	natstest.Eventually(t, 30*time.Second, func() bool {
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("prometheus exited: %v\n%s", err, logs.String())
		default:
		}
		resp, err := http.Get(base + "/-/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, "prometheus ready at %s", base)
	return base
}

// apiGet calls Prometheus's HTTP API and decodes data.
func apiGet(base, path string, params url.Values, data any) error {
	resp, err := http.Get(base + path + "?" + params.Encode())
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	var r struct {
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return fmt.Errorf("%s: %s: %w", resp.Status, body, err)
	}
	if r.Status != "success" {
		return fmt.Errorf("%s: %s", resp.Status, r.Error)
	}
	return json.Unmarshal(r.Data, data)
}

// series evaluates a query (an instant PromQL query, or Grafana's
// label_values(metric, label)) and returns how many series or values it
// returned.
func series(base, q string) (int, error) {
	if m := labelValues.FindStringSubmatch(q); m != nil {
		var values []string
		err := apiGet(base, "/api/v1/label/"+m[2]+"/values", url.Values{"match[]": {m[1]}}, &values)
		return len(values), err
	}
	var data struct {
		ResultType string            `json:"resultType"`
		Result     []json.RawMessage `json:"result"`
	}
	err := apiGet(base, "/api/v1/query", url.Values{"query": {q}}, &data)
	return len(data.Result), err
}

var (
	labelValues = regexp.MustCompile(`^label_values\(\s*([^,]+?)\s*,\s*(\w+)\s*\)$`)
	grafanaVar  = regexp.MustCompile(`\$\w+`)
)

// dashboardQueries returns every query of the dashboard (panels and
// template variables) as Prometheus evaluates it: the partner variable at
// its "All" value, $__rate_interval at 4 scrape intervals and more.
func dashboardQueries(t *testing.T) map[string]string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "deploy/grafana/dashboards/floodgate.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatal(err)
	}
	qs := map[string]string{}
	add := func(where, expr string) {
		expr = strings.NewReplacer(`$__rate_interval`, "10s", `$partner`, ".*").Replace(expr)
		if v := grafanaVar.FindString(expr); v != "" {
			t.Fatalf("%s: query uses %s, which this test does not substitute: %s", where, v, expr)
		}
		qs[where+": "+expr] = expr
	}
	for _, v := range d.Templating.List {
		add("variable "+v.Name, v.Definition)
	}
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			walk(p.Panels)
			for _, tg := range p.Targets {
				add("panel "+p.Title, tg.Expr)
			}
		}
	}
	walk(d.Panels)
	return qs
}

// Issue 15: a real Prometheus scrapes a floodgate pipeline every second
// while one partner's breaker trips, its messages are diverted and then
// drained; every query of the Grafana dashboard returns series, the
// example alerting rules load and evaluate, and promtool check metrics
// passes on the exposition.
func TestDashboardAgainstPrometheus(t *testing.T) {
	tool(t, "promtool")
	tool(t, "prometheus")
	addr, f, publish := pipeline(t)
	base := startPrometheus(t, addr)
	queries := dashboardQueries(t)

	const per = 20
	publish("acme", per)
	publish("globex", per)
	natstest.Eventually(t, 30*time.Second, func() bool { return f.count("acme") == per }, "acme's messages delivered (%d of %d)", natstest.Now(func() any { return f.count("acme") }), per)
	// Prometheus saw the trip and the diversions.
	seen := func(q string) func() bool {
		return func() bool { n, err := series(base, q); return err == nil && n > 0 }
	}
	natstest.Eventually(t, 30*time.Second, seen(`floodgate_breaker_transitions_total{partner="globex",to="open"} > 0`), "Prometheus sees globex trip")
	natstest.Eventually(t, 30*time.Second, seen(`floodgate_diverted_total{partner="globex"} > 0`), "Prometheus sees globex's diversions")
	f.set("globex", false)
	natstest.Eventually(t, 30*time.Second, func() bool { return f.count("globex") == per }, "globex's messages drained after it recovered (%d of %d)", natstest.Now(func() any { return f.count("globex") }), per)
	natstest.Eventually(t, 30*time.Second, seen(`floodgate_drained_total{partner="globex",result="drained"} > 0`), "Prometheus sees globex's drain")
	natstest.Eventually(t, 30*time.Second, seen(`floodgate_breaker_failure_ratio{partner="acme"} == 0`), "Prometheus sees acme's judged failure ratio 0")

	// Every dashboard query returns series (polled: rate() needs two
	// scrapes in its range).
	pending := queries
	last := map[string]string{}
	deadline := time.Now().Add(30 * time.Second)
	for len(pending) > 0 && time.Now().Before(deadline) {
		next := map[string]string{}
		for where, q := range pending {
			n, err := series(base, q)
			switch {
			case err != nil:
				last[where] = err.Error()
				next[where] = q
			case n == 0:
				last[where] = "no series"
				next[where] = q
			}
		}
		pending = next
		if len(pending) > 0 {
			time.Sleep(250 * time.Millisecond)
		}
	}
	for where := range pending {
		t.Errorf("%s: %s", where, last[where])
	}
	t.Logf("%d of %d dashboard queries returned series from Prometheus", len(queries)-len(pending), len(queries))

	// The alerting rules loaded and evaluated without error.
	natstest.Eventually(t, 30*time.Second, func() bool {
		var data struct {
			Groups []struct {
				Rules []struct {
					Name, Health, LastError string
				} `json:"rules"`
			} `json:"groups"`
		}
		if err := apiGet(base, "/api/v1/rules", nil, &data); err != nil {
			return false
		}
		n := 0
		for _, g := range data.Groups {
			for _, r := range g.Rules {
				if r.Health != "ok" {
					return false
				}
				n++
			}
		}
		return n >= 4
	}, "the 4 alerting rules of alerts.yml load and evaluate with health ok")

	// promtool check metrics passes on the exposition (the text format,
	// every series present after the run).
	resp, err := http.Get("http://" + addr + metrics.Path)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range metrics.Names() {
		if !bytes.Contains(body, []byte("\n"+name)) {
			t.Errorf("exposition lacks %s", name)
		}
	}
	promtool(t, body, "check", "metrics")
}
