// Package deploy_test checks the deployment files that cannot run here (no
// Docker): docker-compose.yml, the Dockerfile, the Prometheus configuration
// and the Grafana provisioning and dashboard. It parses them and checks the
// services, ports, volumes, the wiring between them, and that every PromQL
// query of the dashboard references metrics the metrics package registers.
package deploy_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.yaml.in/yaml/v3"

	"github.com/floodgate-go/floodgate/metrics"
)

const root = ".."

type compose struct {
	Services map[string]service `yaml:"services"`
	Volumes  map[string]any     `yaml:"volumes"`
}

type service struct {
	Image string `yaml:"image"`
	Build *struct {
		Context    string            `yaml:"context"`
		Dockerfile string            `yaml:"dockerfile"`
		Args       map[string]string `yaml:"args"`
	} `yaml:"build"`
	Command     []string          `yaml:"command"`
	Ports       []string          `yaml:"ports"`
	Volumes     []string          `yaml:"volumes"`
	Environment map[string]string `yaml:"environment"`
	DependsOn   yaml.Node         `yaml:"depends_on"`
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, path))
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(strings.NewReader(string(data)))
	dec.KnownFields(false)
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func loadCompose(t *testing.T) compose {
	var c compose
	readYAML(t, "docker-compose.yml", &c)
	return c
}

// flagValue returns the value after flag in cmd.
func flagValue(cmd []string, flag string) (string, bool) {
	i := slices.Index(cmd, flag)
	if i < 0 || i+1 >= len(cmd) {
		return "", false
	}
	return cmd[i+1], true
}

// mount returns the host side of the volume mounted at target.
func mount(s service, target string) (string, bool) {
	for _, v := range s.Volumes {
		parts := strings.Split(v, ":")
		if len(parts) >= 2 && parts[1] == target {
			return parts[0], true
		}
	}
	return "", false
}

var examples = []string{"edi-as2", "geofence"}

func TestComposeServices(t *testing.T) {
	c := loadCompose(t)
	for _, name := range []string{"nats", "edi-as2", "geofence", "prometheus", "grafana"} {
		if _, ok := c.Services[name]; !ok {
			t.Errorf("service %s missing", name)
		}
	}

	// NATS with JetStream, its store on a named volume.
	nats := c.Services["nats"]
	if !slices.Contains(nats.Command, "-js") {
		t.Errorf("nats command %v: JetStream (-js) not enabled", nats.Command)
	}
	sd, ok := flagValue(nats.Command, "-sd")
	if !ok {
		t.Fatalf("nats command %v: no store directory (-sd)", nats.Command)
	}
	if vol, ok := mount(nats, sd); !ok || c.Volumes == nil || !hasKey(c.Volumes, vol) {
		t.Errorf("nats store %s is not on a named volume (mount %q, volumes %v)", sd, vol, c.Volumes)
	}

	// Host ports are distinct; the published container ports are the
	// services' own.
	hostPorts := map[string]string{}
	for name, s := range c.Services {
		for _, p := range s.Ports {
			host, _, ok := strings.Cut(p, ":")
			if !ok {
				t.Errorf("%s: port %q without a host port", name, p)
			}
			if other, dup := hostPorts[host]; dup {
				t.Errorf("host port %s published by %s and %s", host, other, name)
			}
			hostPorts[host] = name
		}
	}
	for name, port := range map[string]string{"nats": "4222", "prometheus": "9090", "grafana": "3000"} {
		if !publishes(c.Services[name], port) {
			t.Errorf("%s does not publish container port %s: %v", name, port, c.Services[name].Ports)
		}
	}

	// The examples: built from the repository's Dockerfile, one build arg
	// per example naming a directory of examples/, on the compose NATS, with
	// /metrics on the port Prometheus scrapes.
	for _, name := range examples {
		s := c.Services[name]
		if s.Build == nil || s.Build.Dockerfile != "Dockerfile" || s.Build.Context != "." {
			t.Errorf("%s: not built from ./Dockerfile: %+v", name, s.Build)
			continue
		}
		if got := s.Build.Args["EXAMPLE"]; got != name {
			t.Errorf("%s: build arg EXAMPLE = %q", name, got)
		}
		if fi, err := os.Stat(filepath.Join(root, "examples", name)); err != nil || !fi.IsDir() {
			t.Errorf("%s: examples/%s is not a directory", name, name)
		}
		if v, _ := flagValue(s.Command, "-nats-url"); v != "nats://nats:4222" {
			t.Errorf("%s: -nats-url %q, want nats://nats:4222", name, v)
		}
		if v, _ := flagValue(s.Command, "-metrics-addr"); v != ":9090" {
			t.Errorf("%s: -metrics-addr %q, want :9090", name, v)
		}
		if !publishes(s, "9090") {
			t.Errorf("%s: metrics port 9090 not published: %v", name, s.Ports)
		}
		var deps map[string]any
		if err := s.DependsOn.Decode(&deps); err != nil || deps["nats"] == nil {
			t.Errorf("%s: does not depend on nats: %v", name, err)
		}
	}

	// Every named volume used is declared.
	for name, s := range c.Services {
		for _, v := range s.Volumes {
			src, _, _ := strings.Cut(v, ":")
			switch {
			case strings.HasPrefix(src, "./"):
				if _, err := os.Stat(filepath.Join(root, src)); err != nil {
					t.Errorf("%s mounts %s, which does not exist", name, src)
				}
			case !hasKey(c.Volumes, src):
				t.Errorf("%s uses volume %s, not declared", name, src)
			}
		}
	}
}

func hasKey(m map[string]any, k string) bool { _, ok := m[k]; return ok }

func publishes(s service, containerPort string) bool {
	for _, p := range s.Ports {
		if strings.HasSuffix(p, ":"+containerPort) {
			return true
		}
	}
	return false
}

func TestDockerfile(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(root, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	df := string(data)
	if strings.Count(df, "\nFROM ") < 2 {
		t.Error("Dockerfile is not multi-stage")
	}
	for _, want := range []string{"ARG EXAMPLE", "./examples/${EXAMPLE}", "./cmd/floodgate", "AS build", "COPY --from=build"} {
		if !strings.Contains(df, want) {
			t.Errorf("Dockerfile lacks %q", want)
		}
	}
	// The Go image matches go.mod's language version.
	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(gomod)
	if m == nil || !strings.Contains(df, "ARG GO_VERSION="+string(m[1])) {
		t.Errorf("Dockerfile GO_VERSION does not match go.mod's go %s", m[1])
	}
}

func TestPrometheusScrapesTheExamples(t *testing.T) {
	c := loadCompose(t)
	host, ok := mount(c.Services["prometheus"], "/etc/prometheus/prometheus.yml")
	if !ok {
		t.Fatal("prometheus: no configuration mounted at /etc/prometheus/prometheus.yml")
	}
	var cfg struct {
		RuleFiles     []string `yaml:"rule_files"`
		ScrapeConfigs []struct {
			JobName       string `yaml:"job_name"`
			MetricsPath   string `yaml:"metrics_path"`
			StaticConfigs []struct {
				Targets []string `yaml:"targets"`
			} `yaml:"static_configs"`
		} `yaml:"scrape_configs"`
	}
	readYAML(t, host, &cfg)
	targets := map[string]bool{}
	for _, sc := range cfg.ScrapeConfigs {
		if sc.MetricsPath != "" && sc.MetricsPath != metrics.Path {
			t.Errorf("job %s scrapes %s, the examples serve %s", sc.JobName, sc.MetricsPath, metrics.Path)
		}
		for _, st := range sc.StaticConfigs {
			for _, tg := range st.Targets {
				targets[tg] = true
				svc, _, _ := strings.Cut(tg, ":")
				if _, ok := c.Services[svc]; !ok {
					t.Errorf("job %s scrapes %s: no such service", sc.JobName, tg)
				}
			}
		}
	}
	// Rule files (relative to the configuration's directory) are mounted.
	for _, rf := range cfg.RuleFiles {
		if _, ok := mount(c.Services["prometheus"], "/etc/prometheus/"+rf); !ok {
			t.Errorf("prometheus: rule file %s is not mounted at /etc/prometheus/%s", rf, rf)
		}
	}
	if len(cfg.RuleFiles) == 0 {
		t.Error("prometheus: no rule_files (deploy/prometheus/alerts.yml)")
	}
	for _, name := range examples {
		if !targets[name+":9090"] {
			t.Errorf("Prometheus does not scrape %s:9090 (targets %v)", name, targets)
		}
	}
}

func TestGrafanaProvisioning(t *testing.T) {
	c := loadCompose(t)
	g := c.Services["grafana"]
	prov, ok := mount(g, "/etc/grafana/provisioning")
	if !ok {
		t.Fatal("grafana: provisioning not mounted at /etc/grafana/provisioning")
	}
	var ds struct {
		Datasources []struct {
			UID  string `yaml:"uid"`
			Type string `yaml:"type"`
			URL  string `yaml:"url"`
		} `yaml:"datasources"`
	}
	readYAML(t, filepath.Join(prov, "datasources", "prometheus.yml"), &ds)
	if len(ds.Datasources) != 1 || ds.Datasources[0].Type != "prometheus" || ds.Datasources[0].URL != "http://prometheus:9090" {
		t.Errorf("datasource %+v, want prometheus at http://prometheus:9090", ds.Datasources)
	}
	var dp struct {
		Providers []struct {
			Type    string `yaml:"type"`
			Options struct {
				Path string `yaml:"path"`
			} `yaml:"options"`
		} `yaml:"providers"`
	}
	readYAML(t, filepath.Join(prov, "dashboards", "floodgate.yml"), &dp)
	if len(dp.Providers) != 1 || dp.Providers[0].Type != "file" {
		t.Fatalf("dashboard providers %+v", dp.Providers)
	}
	hostDir, ok := mount(g, dp.Providers[0].Options.Path)
	if !ok {
		t.Fatalf("grafana: the provider's path %s is not mounted", dp.Providers[0].Options.Path)
	}
	if _, err := os.Stat(filepath.Join(root, hostDir, "floodgate.json")); err != nil {
		t.Errorf("dashboard JSON not in %s: %v", hostDir, err)
	}
	if home := g.Environment["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]; home != dp.Providers[0].Options.Path+"/floodgate.json" {
		t.Errorf("home dashboard %q", home)
	}
	if uid := ds.Datasources[0].UID; uid != "prometheus" {
		t.Errorf("datasource uid %q, the dashboard uses prometheus", uid)
	}
}

type dashboard struct {
	UID        string  `json:"uid"`
	Title      string  `json:"title"`
	Panels     []panel `json:"panels"`
	Templating struct {
		List []struct {
			Name       string `json:"name"`
			Definition string `json:"definition"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	Type       string `json:"type"`
	Title      string `json:"title"`
	Datasource *struct {
		UID string `json:"uid"`
	} `json:"datasource"`
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
	Panels []panel `json:"panels"`
}

// exported returns the metric names the metrics package registers, read
// from the descriptors of a registered collector, with the series names of
// histograms.
func exported(t *testing.T) map[string]bool {
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg, metrics.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan *prometheus.Desc, 64)
	go func() { m.Describe(ch); close(ch) }()
	names := map[string]bool{}
	for d := range ch {
		n := metrics.DescName(d)
		names[n] = true
		if strings.HasSuffix(n, "_seconds") { // histograms
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				names[n+s] = true
			}
		}
	}
	if len(names) < len(metrics.Names()) {
		t.Fatalf("descriptors %v", names)
	}
	return names
}

var metricRef = regexp.MustCompile(`\bfloodgate_[a-zA-Z0-9_]+`)

func TestDashboardQueriesUseExportedMetrics(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(root, "deploy/grafana/dashboards/floodgate.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("dashboard JSON: %v", err)
	}
	if d.UID == "" || d.Title == "" {
		t.Errorf("dashboard uid %q title %q", d.UID, d.Title)
	}
	names := exported(t)
	used := map[string]bool{}
	check := func(where, expr string) {
		refs := metricRef.FindAllString(expr, -1)
		if len(refs) == 0 {
			t.Errorf("%s: query references no floodgate metric: %s", where, expr)
		}
		for _, r := range refs {
			used[r] = true
			if !names[r] {
				t.Errorf("%s: query references %s, which the metrics package does not export: %s", where, r, expr)
			}
		}
		if strings.Count(expr, "(") != strings.Count(expr, ")") || strings.Count(expr, "{") != strings.Count(expr, "}") {
			t.Errorf("%s: unbalanced query: %s", where, expr)
		}
	}
	for _, v := range d.Templating.List {
		check("variable "+v.Name, v.Definition)
	}

	var onePanel *panel // breaker state, admitted share and partner errors together
	backlog, drain := false, false
	var walk func([]panel)
	walk = func(ps []panel) {
		for i := range ps {
			p := &ps[i]
			walk(p.Panels)
			if p.Type == "row" {
				continue
			}
			if p.Datasource == nil || p.Datasource.UID != "prometheus" {
				t.Errorf("panel %q: datasource %+v, want uid prometheus", p.Title, p.Datasource)
			}
			var all string
			for _, tg := range p.Targets {
				check("panel "+p.Title, tg.Expr)
				all += tg.Expr + "\n"
			}
			if strings.Contains(all, metrics.NameBreakerState) && strings.Contains(all, metrics.NameAdmittedRatio) &&
				strings.Contains(all, metrics.NameCalls) && strings.Contains(all, "failure") {
				onePanel = p
			}
			backlog = backlog || strings.Contains(all, metrics.NameRetryBacklog)
			drain = drain || strings.Contains(all, metrics.NameDrained) && strings.Contains(all, "rate(")
		}
	}
	walk(d.Panels)
	if onePanel == nil || onePanel.Type != "timeseries" {
		t.Error("no time-series panel shows breaker state, admitted share and partner errors together")
	}
	if !backlog || !drain {
		t.Errorf("backlog depth panel %v, drain rate panel %v", backlog, drain)
	}
	for _, n := range []string{metrics.NameBreakerState, metrics.NameAdmittedRatio, metrics.NameCalls, metrics.NameRetryBacklog, metrics.NameDrained} {
		if !used[n] {
			t.Errorf("dashboard does not use %s", n)
		}
	}
}
