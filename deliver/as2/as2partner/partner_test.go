package as2partner_test

import (
	"errors"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/deliver/as2"
	"github.com/floodgate-go/floodgate/deliver/as2/as2partner"
	"github.com/floodgate-go/floodgate/internal/configtest"
)

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

var t0 = time.Date(2025, 3, 14, 9, 30, 0, 0, time.UTC)

func script() []as2partner.Phase {
	return []as2partner.Phase{
		{Name: "healthy", Duration: 5 * time.Second},
		{Name: "outage", Duration: 10 * time.Second, Mode: as2partner.Down},
		{Name: "fragile recovery", Duration: 8 * time.Second, Mode: as2partner.Fragile, Capacity: 5},
		{Name: "recovered"},
	}
}

func TestPhaseAt(t *testing.T) {
	clock := &fakeClock{t: t0}
	p, err := as2partner.New(as2partner.Config{Script: script(), Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	// Not started: the first phase.
	if got := p.PhaseAt(t0.Add(time.Hour)).Name; got != "healthy" {
		t.Errorf("before Start: %q", got)
	}
	p.Start()
	for _, tt := range []struct {
		at   time.Duration
		want string
	}{
		{-time.Second, "healthy"},
		{0, "healthy"},
		{5*time.Second - 1, "healthy"},
		{5 * time.Second, "outage"},
		{15*time.Second - 1, "outage"},
		{15 * time.Second, "fragile recovery"},
		{23*time.Second - 1, "fragile recovery"},
		{23 * time.Second, "recovered"},
		{24 * time.Hour, "recovered"},
	} {
		if got := p.PhaseAt(t0.Add(tt.at)).Name; got != tt.want {
			t.Errorf("PhaseAt(t0+%v) = %q, want %q", tt.at, got, tt.want)
		}
	}
	// Start again restarts the script.
	clock.Set(t0.Add(time.Minute))
	p.Start()
	if got := p.PhaseAt(t0.Add(time.Minute + 6*time.Second)).Name; got != "outage" {
		t.Errorf("after restart: %q", got)
	}
	// Defaults: burst of a fragile phase, and names.
	sc := p.Script()
	if sc[2].Burst != 1 || sc[3].Mode != as2partner.Healthy {
		t.Errorf("Script() = %+v", sc)
	}
}

func TestScriptStartsAtFirstRequest(t *testing.T) {
	clock := &fakeClock{t: t0}
	p, err := as2partner.New(as2partner.Config{Script: script(), Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(p)
	defer srv.Close()
	clock.Set(t0.Add(time.Hour)) // long after New: the script has not started
	if code, _ := post(t, srv.URL, validHeaders(), "ISA"); code != http.StatusOK {
		t.Fatalf("first request: HTTP %d, want 200 (healthy)", code)
	}
	clock.Set(t0.Add(time.Hour + 6*time.Second))
	if code, _ := post(t, srv.URL, validHeaders(), "ISA"); code != http.StatusServiceUnavailable {
		t.Fatalf("6s later: HTTP %d, want 503 (outage)", code)
	}
	if st := p.Stats(); st.Requests != 2 || st.Processed != 1 || st.Errors != 1 {
		t.Errorf("Stats = %+v", st)
	}
}

func validHeaders() http.Header {
	return http.Header{
		"As2-From":                    {"NORTHWINDRTL"},
		"As2-To":                      {"BLUEWATERHG"},
		"Message-Id":                  {"<m1@floodgate>"},
		"Content-Type":                {"application/EDI-X12"},
		"Disposition-Notification-To": {"NORTHWINDRTL"},
	}
}

func post(t *testing.T, url string, h http.Header, body string) (int, *http.Response) {
	t.Helper()
	// t.Error, not t.Fatal: post also runs on other goroutines.
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Error(err)
		return 0, nil
	}
	req.Header = h
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err)
		return 0, nil
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	resp.Body = io.NopCloser(strings.NewReader(string(b)))
	return resp.StatusCode, resp
}

func TestBadRequests(t *testing.T) {
	p, err := as2partner.New(as2partner.Config{AS2ID: "BLUEWATERHG", MaxBodySize: 64})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(p)
	defer srv.Close()

	without := func(name string) http.Header {
		h := validHeaders()
		h.Del(name)
		return h
	}
	for _, tt := range []struct {
		name string
		h    http.Header
		body string
		want int
	}{
		{"no AS2-From", without("AS2-From"), "x", http.StatusBadRequest},
		{"no AS2-To", without("AS2-To"), "x", http.StatusBadRequest},
		{"AS2-To longer than 128", func() http.Header { h := validHeaders(); h.Set("AS2-To", strings.Repeat("B", 129)); return h }(), "x", http.StatusBadRequest},
		{"no Message-ID", without("Message-ID"), "x", http.StatusBadRequest},
		{"empty body", validHeaders(), "", http.StatusBadRequest},
		{"too large", validHeaders(), strings.Repeat("x", 65), http.StatusRequestEntityTooLarge},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if code, _ := post(t, srv.URL, tt.h, tt.body); code != tt.want {
				t.Errorf("HTTP %d, want %d", code, tt.want)
			}
		})
	}
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET: HTTP %d", resp.StatusCode)
	}
	if st := p.Stats(); st.BadRequests != 7 || st.Processed != 0 || len(p.Received()) != 0 {
		t.Errorf("Stats = %+v", st)
	}
}

func TestMDNAndNoMDN(t *testing.T) {
	p, err := as2partner.New(as2partner.Config{AS2ID: "BLUEWATERHG"})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(p)
	defer srv.Close()

	code, resp := post(t, srv.URL, validHeaders(), "payload")
	if code != http.StatusOK {
		t.Fatalf("HTTP %d", code)
	}
	if resp.Header.Get("AS2-From") != "BLUEWATERHG" || resp.Header.Get("AS2-To") != "NORTHWINDRTL" ||
		resp.Header.Get("Message-ID") == "" || resp.Header.Get("AS2-Version") != "1.2" {
		t.Errorf("MDN headers = %v", resp.Header)
	}
	body, _ := io.ReadAll(resp.Body)
	mdn, err := as2.ParseMDN(resp.Header.Get("Content-Type"), body)
	if err != nil {
		t.Fatal(err)
	}
	mic, _ := as2.ComputeMIC("sha-256", []byte("payload"))
	if !mdn.Processed() || mdn.OriginalMessageID != "<m1@floodgate>" || mdn.ReceivedContentMIC != mic ||
		mdn.ReportingUA != "floodgate-as2partner" {
		t.Errorf("MDN = %+v", mdn)
	}

	// No Disposition-Notification-To: processed, 200, no MDN.
	h := validHeaders()
	h.Del("Disposition-Notification-To")
	h.Set("Message-ID", "<m2@floodgate>")
	code, resp = post(t, srv.URL, h, "payload")
	if b, _ := io.ReadAll(resp.Body); code != http.StatusOK || len(b) != 0 {
		t.Errorf("no MDN requested: HTTP %d, %d bytes", code, len(b))
	}
	// A multipart/signed body that cannot be read: error MDN.
	h = validHeaders()
	h.Set("Message-ID", "<m3@floodgate>")
	h.Set("Content-Type", `multipart/signed; protocol="application/pkcs7-signature"; boundary=x`)
	_, resp = post(t, srv.URL, h, "--x--")
	body, _ = io.ReadAll(resp.Body)
	mdn, err = as2.ParseMDN(resp.Header.Get("Content-Type"), body)
	if err != nil || mdn.Modifier != "error: unexpected-processing-error" {
		t.Errorf("signed: %+v, %v", mdn, err)
	}
	if r := p.Received(); len(r) != 2 || r["<m1@floodgate>"] != 1 || r["<m2@floodgate>"] != 1 {
		t.Errorf("Received = %v", r)
	}
	if st := p.Stats(); st.Processed != 2 || st.ErrorMDNs != 1 {
		t.Errorf("Stats = %+v", st)
	}
}

// TestMaxConcurrent: four requests in progress at once count as
// MaxConcurrent 4. A gate in front of the partner lets them in together once
// all four arrived (30 s hang guard), so the 500 ms latency is not also the
// time a loaded machine has to start four clients.
func TestMaxConcurrent(t *testing.T) {
	p, err := as2partner.New(as2partner.Config{Script: []as2partner.Phase{{Latency: 500 * time.Millisecond}}})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	arrived, all := 0, make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		if arrived++; arrived == 4 {
			close(all)
		}
		mu.Unlock()
		select {
		case <-all:
		case <-time.After(30 * time.Second):
			t.Error("four requests did not arrive within 30 s")
		}
		p.ServeHTTP(w, r)
	}))
	defer srv.Close()
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			h := validHeaders()
			h.Set("Message-ID", "<c"+string(rune('0'+i))+"@floodgate>")
			post(t, srv.URL, h, "x")
		})
	}
	wg.Wait()
	if st := p.Stats(); st.MaxConcurrent != 4 || st.UniqueProcessed != 4 {
		t.Errorf("Stats = %+v, want MaxConcurrent 4", st)
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name  string
		cfg   as2partner.Config
		want  error
		field string
	}{
		{"forever phase not last", as2partner.Config{Script: []as2partner.Phase{{}, {}}}, as2partner.ErrPhaseDuration, "Config.Script[0].Duration"},
		{"negative duration", as2partner.Config{Script: []as2partner.Phase{{Duration: -1}}}, as2partner.ErrPhaseDuration, "Config.Script[0].Duration"},
		{"negative MinRequests", as2partner.Config{Script: []as2partner.Phase{{Duration: time.Second, MinRequests: -1}, {}}}, as2partner.ErrMinRequests, "Config.Script[0].MinRequests"},
		{"unknown mode", as2partner.Config{Script: []as2partner.Phase{{Mode: 7}}}, as2partner.ErrMode, "Config.Script[0].Mode"},
		{"fragile without capacity", as2partner.Config{Script: []as2partner.Phase{{Duration: time.Second}, {Mode: as2partner.Fragile}}}, as2partner.ErrCapacity, "Config.Script[1].Capacity"},
		{"fragile infinite capacity", as2partner.Config{Script: []as2partner.Phase{{Mode: as2partner.Fragile, Capacity: math.Inf(1)}}}, as2partner.ErrCapacity, "Config.Script[0].Capacity"},
		{"fragile NaN capacity", as2partner.Config{Script: []as2partner.Phase{{Mode: as2partner.Fragile, Capacity: math.NaN()}}}, as2partner.ErrCapacity, "Config.Script[0].Capacity"},
		{"negative burst", as2partner.Config{Script: []as2partner.Phase{{Mode: as2partner.Fragile, Capacity: 1, Burst: -1}}}, as2partner.ErrCapacity, "Config.Script[0].Burst"},
		{"unknown excess", as2partner.Config{Script: []as2partner.Phase{{Mode: as2partner.Fragile, Capacity: 1, Excess: 9}}}, as2partner.ErrMode, "Config.Script[0].Excess"},
		{"negative latency", as2partner.Config{Script: []as2partner.Phase{{Latency: -1}}}, as2partner.ErrLatency, "Config.Script[0].Latency"},
		{"negative slow latency", as2partner.Config{Script: []as2partner.Phase{{Mode: as2partner.Fragile, Capacity: 1, SlowLatency: -1}}}, as2partner.ErrLatency, "Config.Script[0].SlowLatency"},
		{"bad AS2ID", as2partner.Config{AS2ID: strings.Repeat("x", 200)}, as2partner.ErrAS2ID, "Config.AS2ID"},
		{"negative MaxBodySize", as2partner.Config{MaxBodySize: -1}, as2partner.ErrMaxBodySize, "Config.MaxBodySize"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := as2partner.New(tt.cfg)
			if p != nil || !errors.Is(err, tt.want) || !strings.HasPrefix(err.Error(), "invalid config: "+tt.field) {
				t.Errorf("New = %v, %v; want %v naming %s", p, err, tt.want, tt.field)
			}
		})
	}
	if _, err := as2partner.New(as2partner.Config{Script: script()}); err != nil {
		t.Errorf("valid script: %v", err)
	}
}

func TestModeStrings(t *testing.T) {
	if as2partner.Healthy.String() != "healthy" || as2partner.Down.String() != "down" || as2partner.Fragile.String() != "fragile" ||
		as2partner.Reject503.String() != "reject-503" || as2partner.Slow.String() != "slow" || as2partner.Mode(9).String() != "Mode(9)" {
		t.Error("String methods")
	}
}

// Config.Validate checks the config as [as2partner.New] uses it, defaults
// applied to its zero fields (phase names and bursts among them), and
// leaves it and its Script as they are.
func TestValidateAppliesDefaults(t *testing.T) {
	configtest.Run(t, nil, []configtest.Case[as2partner.Config]{
		{Name: "minimal", Cfg: as2partner.Config{}},
		{Name: "unnamed fragile phase", Cfg: as2partner.Config{Script: []as2partner.Phase{{Duration: time.Second, Mode: as2partner.Fragile, Capacity: 50}, {}}}},
		{Name: "negative MaxBodySize", Cfg: as2partner.Config{MaxBodySize: -1}, Err: as2partner.ErrMaxBodySize, Want: "Config.MaxBodySize"},
		{Name: "fragile negative burst", Cfg: as2partner.Config{Script: []as2partner.Phase{{Mode: as2partner.Fragile, Capacity: 50, Burst: -1}}}, Err: as2partner.ErrCapacity, Want: "Config.Script[0].Burst"},
	}, &configtest.Options[as2partner.Config]{
		Match: configtest.HasPrefix,
		Snapshot: func(c as2partner.Config) any {
			c.Script = slices.Clone(c.Script)
			return c
		},
	})
}
