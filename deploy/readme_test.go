package deploy_test

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the generated sections of README.md")

// configSource names a Config struct whose fields the README documents.
type configSource struct {
	pkg, file, typ string
}

var configSources = []configSource{
	{"floodgate", "config.go", "Config"},
	{"breaker", "breaker/config.go", "Config"},
	{"partner", "partner/config.go", "Config"},
	{"partner", "partner/config.go", "PartnerConfig"},
	{"middleware", "middleware/config.go", "Config"},
	{"retryqueue", "retryqueue/config.go", "Config"},
	{"retryqueue", "retryqueue/drainer.go", "DrainerConfig"},
	{"retryqueue", "retryqueue/partnerdrainer.go", "PartnerDrainerConfig"},
	{"metrics", "metrics/options.go", "Options"},
	{"events", "events/notifier.go", "Config"},
}

// field is one documented option.
type field struct {
	name, typ, doc string
}

func structFields(t *testing.T, src configSource) []field {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, filepath.Join(root, src.file), nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	var out []field
	ast.Inspect(f, func(n ast.Node) bool {
		ts, ok := n.(*ast.TypeSpec)
		if !ok || ts.Name.Name != src.typ {
			return true
		}
		st, ok := ts.Type.(*ast.StructType)
		if !ok {
			t.Fatalf("%s.%s is not a struct", src.pkg, src.typ)
		}
		for _, fl := range st.Fields.List {
			typ := types(fset, fl.Type)
			doc := strings.Join(strings.Fields(fl.Doc.Text()), " ")
			for _, n := range fl.Names {
				if n.IsExported() {
					out = append(out, field{name: n.Name, typ: typ, doc: doc})
				}
			}
		}
		return false
	})
	if len(out) == 0 {
		t.Fatalf("%s.%s: no fields found in %s", src.pkg, src.typ, src.file)
	}
	return out
}

func types(fset *token.FileSet, e ast.Expr) string {
	var b strings.Builder
	_ = formatNode(&b, fset, e)
	return b.String()
}

var (
	reDefault  = regexp.MustCompile(`Default:?\s*(.*?)(?:;|\.(?:\s|$)|$)`)
	reRange    = regexp.MustCompile(`(?:[Vv]alid range|range|[Mm]ust be)\s*:?\s*(.*?)(?:;|\.(?:\s|$)|$)`)
	reSentence = regexp.MustCompile(`^(.*?)\.(?:\s+[A-Z(]|$)`)
	reLink     = regexp.MustCompile(`\[([A-Za-z_][\w.]*)\]`)
	reOptional = regexp.MustCompile(`^\w+ is optional(?: \([^)]*\))?(?::\s*|$)`)
)

// describe derives the columns from a field's doc comment: the first
// sentence, the default ("required" for required fields), the unit (from
// the type and the words of the comment) and the valid range.
func describe(f field) (what, def, unit, rng string) {
	doc := reLink.ReplaceAllString(f.doc, "$1")
	// The first sentence that says more than "X is optional".
	rest := doc
	for rest != "" {
		sentence := rest
		if m := reSentence.FindStringSubmatch(rest); m != nil {
			sentence = m[1]
		}
		rest = strings.TrimSpace(strings.TrimPrefix(rest[len(sentence):], "."))
		sentence = strings.TrimSpace(reOptional.ReplaceAllString(sentence, ""))
		if sentence != "" && sentence != "Optional" && sentence != "Required" && !strings.HasPrefix(sentence, "Default") {
			what = strings.ToUpper(sentence[:1]) + sentence[1:]
			break
		}
	}
	switch {
	case strings.Contains(doc, "Required"):
		def = "required"
	default:
		if m := reDefault.FindStringSubmatch(doc); m != nil {
			def = strings.TrimSpace(m[1])
		}
	}
	if m := reRange.FindStringSubmatch(doc); m != nil {
		rng = strings.TrimSpace(m[1])
	}
	switch {
	case f.typ == "time.Duration":
		unit = "duration"
	case strings.Contains(doc, "per second") || strings.Contains(doc, "messages/s"):
		unit = "messages/s"
	case strings.HasPrefix(f.typ, "func"), strings.Contains(f.typ, "."), strings.HasPrefix(f.typ, "*"):
		unit = "—"
	case f.typ == "float64" && regexp.MustCompile(`Threshold|FailureRate|Share|Jitter|Tolerance|Increase`).MatchString(f.name):
		unit = "fraction"
	case f.typ == "float64" && regexp.MustCompile(`Factor|Backoff|Decrease|Aggression|Ratio`).MatchString(f.name):
		unit = "factor"
	case f.typ == "float64" && strings.HasSuffix(f.name, "Rate"):
		unit = "messages/s"
	case f.typ == "[]float64" && strings.Contains(f.name, "Buckets"):
		unit = "seconds"
	case f.typ == "[]float64":
		unit = "fractions"
	case strings.HasPrefix(f.typ, "int") && strings.Contains(doc, "in bytes"):
		unit = "bytes"
	case f.typ == "int" || f.typ == "uint64":
		unit = "count"
	case f.typ == "float64":
		unit = "number"
	default:
		unit = "—"
	}
	return what, def, unit, rng
}

func cell(s string) string {
	if s == "" {
		return "—"
	}
	return strings.ReplaceAll(s, "|", `\|`)
}

func configReference(t *testing.T) string {
	var b strings.Builder
	b.WriteString("<!-- Generated from the Config doc comments by `go generate ./deploy/...`; do not edit. -->\n")
	for _, src := range configSources {
		fmt.Fprintf(&b, "\n#### `%s.%s`\n\n", src.pkg, src.typ)
		b.WriteString("| option | type | unit | default | range or rule | what |\n| --- | --- | --- | --- | --- | --- |\n")
		for _, f := range structFields(t, src) {
			what, def, unit, rng := describe(f)
			fmt.Fprintf(&b, "| `%s` | `%s` | %s | %s | %s | %s |\n", f.name, f.typ, cell(unit), cell(def), cell(rng), cell(what))
		}
	}
	return b.String()
}

// section replaces the text between <!-- begin NAME --> and <!-- end NAME -->.
func section(doc, name, body string) (string, bool) {
	begin, end := "<!-- begin "+name+" -->\n", "<!-- end "+name+" -->"
	i := strings.Index(doc, begin)
	j := strings.Index(doc, end)
	if i < 0 || j < i {
		return doc, false
	}
	return doc[:i+len(begin)] + body + doc[j:], true
}

// TestREADMEGenerated checks that README.md holds the current configuration
// reference (from the Config doc comments) and the simulator's strategy
// table (sim/testdata/choosing-a-strategy.md, itself generated by
// go generate ./sim/...). With -update it rewrites them.
func TestREADMEGenerated(t *testing.T) {
	path := filepath.Join(root, "README.md")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	strategy, err := os.ReadFile(filepath.Join(root, "sim/testdata/choosing-a-strategy.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	for _, s := range []struct{ name, body string }{
		{"config-reference", configReference(t)},
		{"choosing-a-strategy", string(strategy)},
	} {
		next, ok := section(doc, s.name, s.body)
		if !ok {
			t.Fatalf("README.md lacks the markers <!-- begin %s --> ... <!-- end %s -->", s.name, s.name)
		}
		if next != doc && !*update {
			t.Errorf("README.md section %s is stale; run: go generate ./deploy/...", s.name)
		}
		doc = next
	}
	if *update && doc != string(data) {
		if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestREADMESetUp keeps the two set-up commands at the top of the README
// and the links it promises.
func TestREADMESetUp(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	setup := strings.Index(doc, "## Set up")
	if setup < 0 || setup > 3000 {
		t.Fatalf("no \"## Set up\" section near the top (at %d)", setup)
	}
	block := doc[setup:]
	block = block[:strings.Index(block, "```\n\n")]
	for _, cmd := range []string{"go run ./examples/edi-as2", "go test -race ./..."} {
		if !strings.Contains(block, cmd) {
			t.Errorf("set-up block lacks %q", cmd)
		}
	}
	for _, want := range []string{"### External NATS", "BENCHMARKS.md", "docs/sim-fragile.svg", "go generate ./sim/...", "docker compose up"} {
		if !strings.Contains(doc, want) {
			t.Errorf("README lacks %q", want)
		}
	}
}
