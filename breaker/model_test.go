package breaker_test

import (
	"errors"
	"flag"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/breaker/breakertest"
	"pgregory.net/rapid"
)

type held struct {
	p        breaker.Permit
	gen      uint64
	probe    bool
	reported bool
	at       time.Time // admitted
}

// model drives one breaker with random interleavings and checks the
// invariants of issue 3 after every action.
type model struct {
	t    *rapid.T
	cfg  breaker.Config
	b    *breaker.Breaker
	clk  *breakertest.Clock
	need int // consecutive good probes to pass the probe stage
	cap  int // probes in flight in the probe stage

	mu    sync.Mutex
	trans []breaker.Transition // from the listener
	seen  int

	held     []held
	consec   int
	passed   bool
	unknown  bool // a concurrent burst ran in this half-open period
	since    time.Time
	evidence time.Time   // last failed or slow probe reported
	dropped  []time.Time // admissions of unreported probes dropped from held
	trips    int
	lastStep time.Duration
}

func newModel(t *rapid.T) *model {
	policy := rapid.SampledFrom([]breaker.HalfOpenPolicy{breaker.HalfOpenCappedProbes, breaker.HalfOpenSingleProbe,
		breaker.HalfOpenRamp, breaker.HalfOpenAdaptive}).Draw(t, "policy")
	ws := rapid.IntRange(2, 10).Draw(t, "window")
	clk := breakertest.NewClock(time.Time{})
	cfg := breaker.Config{
		Clock:            clk,
		Seed:             rapid.Uint64Range(1, 1<<62).Draw(t, "seed"),
		WindowSize:       ws,
		MinimumCalls:     rapid.IntRange(1, ws).Draw(t, "min"),
		ProbeConcurrency: rapid.IntRange(1, 3).Draw(t, "probes"),
		SuccessesToClose: rapid.IntRange(1, 4).Draw(t, "successes"),
		BaseOpenWindow:   time.Second,
		MaxOpenWindow:    8 * time.Second,
		SlowCallDuration: 100 * time.Millisecond,
		MaxProbeWait:     time.Duration(rapid.IntRange(1, 5).Draw(t, "maxwait")) * time.Second,
		HalfOpenPolicy:   policy,
		RampStepDuration: time.Second,
		RampMinCalls:     3,
		AdaptiveInterval: 500 * time.Millisecond,
	}
	b, err := breaker.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	m := &model{t: t, cfg: b.Config(), b: b, clk: clk, need: cfg.SuccessesToClose, cap: cfg.ProbeConcurrency}
	if policy == breaker.HalfOpenSingleProbe {
		m.need, m.cap = 1, 1
	}
	b.AddListener(func(tr breaker.Transition) {
		m.mu.Lock()
		m.trans = append(m.trans, tr)
		m.mu.Unlock()
	})
	return m
}

func (m *model) snap() breaker.Snapshot { return m.b.SnapshotAt(m.clk.Now()) }

func (m *model) Admit(t *rapid.T) {
	p, err := m.b.AllowAt(m.clk.Now())
	if err != nil {
		if !errors.Is(err, breaker.ErrOpen) && !errors.Is(err, breaker.ErrProbeLimit) {
			t.Fatalf("rejection %v", err)
		}
		return
	}
	m.held = append(m.held, held{p: p, gen: m.snap().Generation, probe: p.IsProbe(), at: m.clk.Now()})
}

func (m *model) Report(t *rapid.T) {
	if len(m.held) == 0 {
		t.Skip("nothing held")
	}
	m.reportAt(t, rapid.IntRange(0, len(m.held)-1).Draw(t, "permit"))
}

func (m *model) reportAt(t *rapid.T, i int) {
	h := &m.held[i]
	kind := rapid.SampledFrom([]string{"ok", "error", "slow", "neutral", "cancel"}).Draw(t, "outcome")
	before := m.snap()
	now := m.clk.Now()
	switch kind {
	case "ok":
		h.p.RecordAt(now, breaker.OutcomeSuccess, time.Millisecond)
	case "error":
		h.p.DoneAt(now, errors.New("boom"))
	case "slow":
		h.p.RecordAt(now, breaker.OutcomeSuccess, time.Second)
	case "neutral":
		h.p.RecordAt(now, breaker.OutcomeNeutral, time.Millisecond)
	case "cancel":
		h.p.Cancel()
	}
	after := m.snap()
	stale := h.gen != before.Generation
	if stale || h.reported {
		if after.Generation != before.Generation || after.State != before.State {
			t.Fatalf("stale or repeated report (%s, stale %v) changed the breaker: %+v -> %+v", kind, stale, before, after)
		}
	}
	if !stale && !h.reported && h.probe && (kind == "ok" || kind == "error" || kind == "slow") {
		if kind == "ok" {
			m.consec++
			if m.consec >= m.need {
				m.passed = true
			}
		} else {
			m.consec = 0
			m.evidence = now
		}
	}
	h.reported = true
	if len(m.held) > 64 {
		for _, d := range m.held[:len(m.held)-32] {
			if d.probe && !d.reported {
				m.dropped = append(m.dropped, d.at)
			}
		}
		m.held = m.held[len(m.held)-32:]
	}
}

// Call admits a call and reports it at once, to move the breaker along.
func (m *model) Call(t *rapid.T) {
	m.Admit(t)
	if n := len(m.held); n > 0 && !m.held[n-1].reported {
		m.reportAt(t, n-1)
	}
}

func (m *model) Advance(t *rapid.T) {
	d := time.Duration(rapid.IntRange(0, 3000).Draw(t, "ms")) * time.Millisecond
	m.clk.Advance(d)
}

func (m *model) Burst(t *rapid.T) {
	n := rapid.IntRange(2, 6).Draw(t, "goroutines")
	fail := rapid.Float64Range(0, 1).Draw(t, "failshare")
	var wg sync.WaitGroup
	for g := range n {
		wg.Go(func() {
			for i := range 20 {
				p, err := m.b.AllowAt(m.clk.Now())
				if err != nil {
					continue
				}
				if float64((g*20+i)%10)/10 < fail {
					p.DoneAt(m.clk.Now(), errors.New("boom"))
				} else {
					p.DoneAt(m.clk.Now(), nil)
				}
			}
		})
	}
	wg.Wait()
	m.unknown = true
}

func (m *model) Force(t *rapid.T) {
	switch rapid.IntRange(0, 9).Draw(t, "force") {
	case 0:
		m.b.ForceOpen()
	case 1:
		m.b.ForceClose()
	case 2:
		m.b.Reset()
		m.trips = 0 // even when closed, where Reset emits no transition
	}
}

func (m *model) Check(t *rapid.T) {
	m.mu.Lock()
	trans := append([]breaker.Transition(nil), m.trans[m.seen:]...)
	m.seen = len(m.trans)
	m.mu.Unlock()
	for _, tr := range trans {
		switch tr.To {
		case breaker.StateOpen:
			if tr.Reason == "forced open" {
				continue
			}
			if tr.From == breaker.StateHalfOpen && !m.unknown && !m.evidenceFor(tr) {
				t.Fatalf("reopened with no failed or expired probe since half-open at %v (%+v)", m.since, tr)
			}
			if tr.ConsecutiveTrips != m.trips+1 {
				t.Fatalf("trip %d after %d trips since the last clean close (%+v)", tr.ConsecutiveTrips, m.trips, tr)
			}
			m.trips = tr.ConsecutiveTrips
			step := m.cfg.OpenWindowStep(m.trips)
			if m.trips == 1 && step != m.cfg.BaseOpenWindow {
				t.Fatalf("first window step %v, want the base", step)
			}
			if step < m.lastStep && m.trips > 1 {
				t.Fatalf("window step shrank %v -> %v", m.lastStep, step)
			}
			m.lastStep = step
			if j := m.cfg.Jitter; math.Abs(float64(tr.Window-step)) > j*float64(step)+1 {
				t.Fatalf("window %v outside ±%v of its step %v", tr.Window, j, step)
			}
		case breaker.StateHalfOpen:
			m.consec, m.passed, m.unknown = 0, false, false
			m.since = tr.At
		case breaker.StateClosed:
			switch {
			case tr.Reason == "reset":
				m.trips = 0
			case tr.Reason == "forced closed":
			case tr.From == breaker.StateHalfOpen:
				if !m.passed && !m.unknown {
					t.Fatalf("closed after %d consecutive good probes, need %d (%+v)", m.consec, m.need, tr)
				}
				m.trips = 0
			default:
				t.Fatalf("unexpected transition %+v", tr)
			}
		}
	}
	s := m.snap()
	if s.ConsecutiveTrips != m.trips {
		t.Fatalf("snapshot says %d consecutive trips, transitions say %d", s.ConsecutiveTrips, m.trips)
	}
	if s.State == breaker.StateHalfOpen {
		if s.AdmittedShare == 0 && s.ProbesInFlight > m.cap {
			t.Fatalf("%d probes in flight, cap %d", s.ProbesInFlight, m.cap)
		}
	}
}

// evidenceFor reports whether the half-open period that tr ends saw a
// failed or slow probe, or held a probe unreported for MaxProbeWait: only
// these may reopen a half-open breaker (issue 12: absence of calls is not
// evidence).
func (m *model) evidenceFor(tr breaker.Transition) bool {
	if !m.evidence.Before(m.since) {
		return true
	}
	expired := func(at time.Time) bool {
		return !at.Before(m.since) && tr.At.Sub(at) >= m.cfg.MaxProbeWait
	}
	for _, at := range m.dropped {
		if expired(at) {
			return true
		}
	}
	for _, h := range m.held {
		if h.probe && !h.reported && expired(h.at) {
			return true
		}
	}
	return false
}

func TestModel(t *testing.T) {
	steps := "300"
	if testing.Short() {
		steps = "100"
	}
	if f := flag.Lookup("rapid.steps"); f != nil && f.Value.String() == f.DefValue {
		if err := f.Value.Set(steps); err != nil {
			t.Fatal(err)
		}
	}
	rapid.Check(t, func(t *rapid.T) {
		m := newModel(t)
		defer m.b.Stop()
		t.Repeat(map[string]func(*rapid.T){
			"admit":   m.Admit,
			"report":  m.Report,
			"call1":   m.Call,
			"call2":   m.Call,
			"call3":   m.Call,
			"advance": m.Advance,
			"tick":    func(t *rapid.T) { m.clk.Advance(100 * time.Millisecond) },
			"burst":   m.Burst,
			"force":   m.Force,
			"":        m.Check,
		})
	})
}
