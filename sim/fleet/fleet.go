package fleet

import (
	"container/heap"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"text/tabwriter"
	"time"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/sim"
)

// Random streams of a run, derived from [sim.Scenario.Seed]: the same
// streams as package sim's, so a seed gives the arrivals of package sim,
// and every fleet (size, shared or not, strategy) sees the same arrivals.
const (
	streamArrivals = 1
	streamLatency  = 2
)

// Result is one simulated fleet.
type Result struct {
	// Strategy is the sim strategy name; Replicas the fleet size; Shared
	// whether the breakers shared their state; ScaledWindow whether each
	// replica's window was divided by Replicas (Options.ScaleWindow).
	Strategy     string
	Replicas     int
	Shared       bool
	ScaledWindow bool
	// OutageProbes counts admitted half-open calls that started while the
	// dependency was down.
	OutageProbes int
	// MaxProbesInFlight is the most half-open calls in flight at once,
	// across the fleet.
	MaxProbesInFlight int
	// ErrorsAfterRecovery counts failed calls that started after the
	// dependency came back (fragile phase included). Unlike package sim's,
	// it does not count slow successes (the breakers still judge them).
	ErrorsAfterRecovery int
	// TimeToFullTraffic means "every replica closed for good": the time
	// from the recovery to the last transition into closed of any replica,
	// when every replica is closed at the end of the run (0 if none left
	// closed after the recovery); -1 if a replica is not closed at the end.
	// It is not package sim's [sim.Result.TimeToFullTraffic] (from the
	// recovery until no offered call is rejected any more, which a ramp or
	// adaptive breaker reaches while still half-open at 100 %): it is
	// [sim.Result.TimeToClose] taken over the whole fleet, so it is often
	// later than sim's time to full traffic, never earlier by more than the
	// gap between two calls.
	TimeToFullTraffic time.Duration
	// Calls, Admitted and Failed count offered, admitted and failed calls.
	Calls, Admitted, Failed int
}

// Options selects the fleet to simulate.
type Options struct {
	// Replicas is the fleet size. Required; range 1..64.
	Replicas int
	// Shared makes the breakers share their state ([breaker.JoinFleet]).
	// Optional. Default false: independent breakers.
	Shared bool
	// ScaleWindow sizes each replica's sliding window for its share of the
	// load: WindowSize and MinimumCalls divided by Replicas (at least 1),
	// so a replica trips on as many seconds of evidence as one breaker
	// carrying the whole load. Optional. Default false: the strategy's
	// window on every replica.
	ScaleWindow bool
}

// Simulate runs sc with a fleet of o.Replicas replicas, each with the
// breaker of sim strategy name (sim.StrategyConfig). It models a subset of
// [sim.Scenario] (see the package doc): it returns an error wrapping
// [ErrInvalidReplicas]; [ErrUnsupportedScenario] for a scenario feature it
// does not model; sim.ErrInvalidScenario for an invalid scenario;
// sim.ErrUnknownStrategy; or breaker.ErrInvalidConfig.
func Simulate(sc sim.Scenario, name string, o Options) (Result, error) {
	replicas, shared := o.Replicas, o.Shared
	if replicas < 1 || replicas > 64 {
		return Result{}, fmt.Errorf("%w: got %d", ErrInvalidReplicas, replicas)
	}
	if err := sc.Validate(); err != nil {
		return Result{}, err
	}
	sc = sc.WithDefaults()
	if err := supported(&sc); err != nil {
		return Result{}, err
	}
	e := &engine{}
	arr := rand.New(rand.NewPCG(sc.Seed, streamArrivals))
	rng := rand.New(rand.NewPCG(sc.Seed, streamLatency))
	res := Result{Strategy: name, Replicas: replicas, Shared: shared, ScaledWindow: o.ScaleWindow, TimeToFullTraffic: -1}
	store := breaker.NewMemoryStore(e)
	var bs []*breaker.Breaker
	lastClose := make([]int64, replicas)
	closed := make([]bool, replicas)
	for i := range replicas {
		cfg, err := sim.StrategyConfig(name, sc)
		if err != nil {
			return Result{}, err
		}
		cfg.Name, cfg.Clock, cfg.Seed = "dependency", e, sc.Seed*1000+uint64(i)+1
		if o.ScaleWindow {
			ws, mc := cfg.WindowSize, cfg.MinimumCalls
			if ws == 0 {
				ws = breaker.DefaultWindowSize
			}
			if mc == 0 {
				mc = min(breaker.DefaultMinimumCalls, ws)
			}
			cfg.WindowSize, cfg.MinimumCalls = max(1, ws/replicas), max(1, mc/replicas)
		}
		b, err := breaker.New(cfg)
		if err != nil {
			return Result{}, err
		}
		defer b.Stop()
		closed[i] = true
		b.AddListener(func(t breaker.Transition) {
			closed[i] = t.To == breaker.StateClosed
			if closed[i] {
				lastClose[i] = e.now
			}
		})
		if shared {
			f, err := breaker.JoinFleet(b, breaker.FleetConfig{Store: store, Replica: fmt.Sprint("r", i), Inline: true})
			if err != nil {
				return Result{}, err
			}
			defer f.Leave()
		}
		bs = append(bs, b)
	}
	down0 := int64(sc.RecoverAt - sc.Outage)
	rec := int64(sc.RecoverAt)
	fragEnd := rec + int64(sc.Fragile)
	end := int64(sc.Duration)
	sigma := math.Log(float64(sc.Healthy.P99)/float64(sc.Healthy.Median)) / 2.3263478740408408
	burst := max(1, sc.FragileCapacity/10)
	tokens, tokensAt := burst, rec
	inflight := 0
	next := 0

	var arrive func()
	var nextArrival func(int64) int64
	arrive = func() {
		now := e.now
		res.Calls++
		b := bs[next]
		next = (next + 1) % replicas
		p, err := b.AllowAt(e.Now())
		if err == nil {
			res.Admitted++
			probe := p.IsProbe()
			ok := true
			switch {
			case now >= down0 && now < rec:
				ok = false
			case now >= rec && now < fragEnd:
				tokens = min(burst, tokens+float64(now-tokensAt)/1e9*sc.FragileCapacity)
				tokensAt = now
				if tokens >= 1 {
					tokens--
				} else {
					ok = false
				}
			}
			if probe {
				inflight++
				res.MaxProbesInFlight = max(res.MaxProbesInFlight, inflight)
				if now >= down0 && now < rec {
					res.OutageProbes++
				}
			}
			if !ok {
				res.Failed++
				if now >= rec {
					res.ErrorsAfterRecovery++
				}
			}
			lat := time.Duration(float64(sc.Healthy.Median) * math.Exp(sigma*rng.NormFloat64()))
			e.at(now+int64(lat), func() {
				if probe {
					inflight--
				}
				o := breaker.OutcomeSuccess
				if !ok {
					o = breaker.OutcomeFailure
				}
				p.RecordAt(e.Now(), o, lat)
			})
		}
		if t := nextArrival(now); t < end {
			e.at(t, arrive)
		}
	}
	// nextArrival returns the time of the call after one at t, as package
	// sim draws it.
	arrivalN := int64(0)
	nextArrival = func(t int64) int64 {
		if sc.Arrivals == sim.ArrivalsUniform {
			arrivalN++
			return int64(math.Round(float64(arrivalN) * 1e9 / sc.Rate))
		}
		return t + max(1, int64(math.Round(arr.ExpFloat64()/sc.Rate*1e9)))
	}
	if t := nextArrival(0); t < end {
		e.at(t, arrive)
	}
	e.run(end)
	all := true
	last := int64(0)
	for i := range replicas {
		if bs[i].StateAt(e.Now()) != breaker.StateClosed || !closed[i] {
			all = false
		}
		last = max(last, lastClose[i])
	}
	if all {
		res.TimeToFullTraffic = time.Duration(max(0, last-rec))
	}
	return res, nil
}

// supported returns an error wrapping [ErrUnsupportedScenario], naming the
// field, when sc (with defaults) uses a feature the fleet does not model.
func supported(sc *sim.Scenario) error {
	switch {
	case sc.Capacity > 0:
		return fmt.Errorf("%w: Capacity = %v, allowed 0 (a healthy dependency of unlimited capacity)", ErrUnsupportedScenario, sc.Capacity)
	case sc.Overflow != sim.OverflowFail:
		return fmt.Errorf("%w: Overflow = %v, allowed fail (calls beyond FragileCapacity fail)", ErrUnsupportedScenario, sc.Overflow)
	case sc.SlowOutage:
		return fmt.Errorf("%w: SlowOutage = true, allowed false (the dependency is down during the outage)", ErrUnsupportedScenario)
	case sc.Backlog:
		return fmt.Errorf("%w: Backlog = true, allowed false (a diverted call is not retried)", ErrUnsupportedScenario)
	case sc.HealthCheck:
		return fmt.Errorf("%w: HealthCheck = true, allowed false (the breakers have no health check)", ErrUnsupportedScenario)
	}
	return nil
}

// Compare runs sc for strategy name: one replica carrying the whole load,
// then for each fleet size independent breakers and shared ones, each with
// its window scaled to its share of the load (Options.ScaleWindow). It
// returns the results in that order, or the first error of [Simulate].
func Compare(sc sim.Scenario, name string, sizes []int) ([]Result, error) {
	one, err := Simulate(sc, name, Options{Replicas: 1})
	if err != nil {
		return nil, err
	}
	out := []Result{one}
	for _, n := range sizes {
		for _, shared := range []bool{false, true} {
			r, err := Simulate(sc, name, Options{Replicas: n, Shared: shared, ScaleWindow: true})
			if err != nil {
				return nil, err
			}
			out = append(out, r)
		}
	}
	return out, nil
}

// WriteTable prints results as an aligned table, one row per result. It
// returns the first error from writing to w.
func WriteTable(w io.Writer, rs []Result) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "strategy\treplicas\tbreakers\tprobes in outage\tmax probes in flight\terrors after recovery\ttime to full traffic")
	for _, r := range rs {
		kind := "independent"
		if r.Shared {
			kind = "shared"
		}
		if r.ScaledWindow {
			kind += ", window/N"
		}
		ttf := "never"
		if r.TimeToFullTraffic >= 0 {
			ttf = r.TimeToFullTraffic.Round(10 * time.Millisecond).String()
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%d\t%d\t%s\n", r.Strategy, r.Replicas, kind, r.OutageProbes, r.MaxProbesInFlight, r.ErrorsAfterRecovery, ttf)
	}
	return tw.Flush()
}

// ---- engine: a discrete-event queue that is the breakers' TimerClock ----

var epoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

type event struct {
	t, seq int64
	fn     func()
	idx    int
	dead   bool
}

type events []*event

func (h events) Len() int { return len(h) }
func (h events) Less(i, j int) bool {
	if h[i].t != h[j].t {
		return h[i].t < h[j].t
	}
	return h[i].seq < h[j].seq
}
func (h events) Swap(i, j int)   { h[i], h[j] = h[j], h[i]; h[i].idx = i; h[j].idx = j }
func (h *events) Push(x any)     { ev := x.(*event); ev.idx = len(*h); *h = append(*h, ev) }
func (h *events) Pop() any       { o := *h; ev := o[len(o)-1]; *h = o[:len(o)-1]; return ev }
func (e *engine) Now() time.Time { return epoch.Add(time.Duration(e.now)) }

type engine struct {
	q   events
	now int64
	seq int64
}

func (e *engine) at(t int64, fn func()) *event {
	e.seq++
	ev := &event{t: max(t, e.now), seq: e.seq, fn: fn}
	heap.Push(&e.q, ev)
	return ev
}

func (e *engine) run(end int64) {
	for e.q.Len() > 0 {
		ev := heap.Pop(&e.q).(*event)
		if ev.t > end {
			e.now = end
			return
		}
		e.now = ev.t
		if !ev.dead {
			ev.fn()
		}
	}
	e.now = end
}

// AfterFunc implements breaker.TimerClock.
func (e *engine) AfterFunc(d time.Duration, f func()) breaker.Timer {
	return &timer{e.at(e.now+int64(max(0, d)), f)}
}

type timer struct{ ev *event }

func (t *timer) Stop() bool {
	was := !t.ev.dead
	t.ev.dead = true
	return was
}
