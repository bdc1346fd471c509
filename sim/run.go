package sim

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/floodgate-go/floodgate/breaker"
)

// errDown is what the simulated health check returns while the dependency
// is down.
var errDown = errors.New("sim: dependency down")

// Random streams of a run, derived from [Scenario.Seed]. Each is separate,
// so every strategy sees the same arrivals.
const (
	streamArrivals = 1
	streamLatency  = 2
)

// breakerSeed derives the breakers' jitter seed from the scenario's seed
// (never 0, which would make the breaker pick a random seed).
func breakerSeed(seed uint64) uint64 {
	s := seed*0x9E3779B97F4A7C15 + 0x632BE59BD9B4E019
	if s == 0 {
		s = 1
	}
	return s
}

// Run simulates each named built-in strategy (see [StrategyNames]) in
// scenario sc and returns their results in the order given. The strategies
// run in parallel, each on its own virtual clock; the results depend only on
// sc (its Seed included), never on timing. The health check, when
// [Scenario.HealthCheck] is set, is given to every strategy except eager.
// With [Scenario.Backlog], eager releases the whole backlog at once on
// every close; the others drain it at [Scenario.DrainRate].
// It returns an error wrapping [ErrInvalidScenario] or [ErrUnknownStrategy].
func Run(sc Scenario, names []string) ([]Result, error) {
	sc.setDefaults()
	if err := sc.validate(); err != nil {
		return nil, err
	}
	cfgs := make([]breaker.Config, len(names))
	for i, n := range names {
		cfg, err := StrategyConfig(n, sc)
		if err != nil {
			return nil, err
		}
		cfgs[i] = cfg
	}
	results := make([]Result, len(names))
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i := range names {
		wg.Go(func() {
			s := sc
			if names[i] == Eager {
				s.HealthCheck = false
			}
			results[i], errs[i] = simulate(s, names[i], cfgs[i], names[i] == Eager)
		})
	}
	wg.Wait()
	return results, errors.Join(errs...)
}

// Simulate runs scenario sc against a breaker built by [breaker.New] from
// cfg, and labels the result name. It sets cfg.Clock to the simulation's
// virtual clock, cfg.Seed from sc.Seed, and, when sc.HealthCheck is set and
// cfg has none, cfg.HealthCheck to a check that passes whenever the
// dependency is not down. Use it to try a configuration of your own; see
// [StrategyConfig] for the built-in ones.
//
// The simulated caller behaves like the middleware: it asks the breaker for
// each offered call; a rejected call is diverted; an admitted call reaches
// the dependency, and its outcome (success or failure) and latency are
// reported to the breaker when it completes, so calls overlap as they do in
// production. With [Scenario.Backlog], diverted and failed calls join a
// retry backlog that is offered again, at [Scenario.DrainRate], while the
// breaker is closed. It returns an error wrapping [ErrInvalidScenario] for
// an invalid scenario, or the breaker's error for an invalid configuration.
func Simulate(sc Scenario, name string, cfg breaker.Config) (Result, error) {
	return simulate(sc, name, cfg, false)
}

// simulate is [Simulate]; dump releases the backlog all at once on every
// close instead of draining it at the scenario's rate.
func simulate(sc Scenario, name string, cfg breaker.Config, dump bool) (Result, error) {
	sc.setDefaults()
	if err := sc.validate(); err != nil {
		return Result{}, err
	}
	r := newRun(&sc, name)
	r.dump = dump
	cfg.Clock = r.eng
	cfg.Seed = breakerSeed(sc.Seed)
	if sc.HealthCheck && cfg.HealthCheck == nil {
		cfg.HealthCheck = func(context.Context) error {
			if r.dep.down(r.eng.now) {
				return errDown
			}
			return nil
		}
	}
	b, err := breaker.New(cfg)
	if err != nil {
		return Result{}, fmt.Errorf("sim: strategy %s: %w", name, err)
	}
	defer b.Stop()
	r.b = b
	b.AddListener(r.onTransition)
	r.run()
	return r.res, nil
}

// run is the state of one simulation.
type run struct {
	sc  *Scenario
	eng *engine
	dep *dependency
	b   *breaker.Breaker
	arr *rand.Rand

	end, rec, outageStart int64
	slowNs                time.Duration

	res Result

	state breaker.State // as of the last transition
	gen   uint64        // half-open period counter, bumped on every transition
	// reporting is the admission time of the call whose outcome is being
	// reported, -1 outside a report: a trip caused by a call admitted before
	// recovery is not a re-trip after recovery.
	reporting int64
	inFlight  int // admissions of the current period in flight

	// retry backlog (Scenario.Backlog)
	dump     bool  // release it all at once on a close (eager)
	backlog  int   // calls waiting
	draining bool  // a drain tick is scheduled
	drainGap int64 // ns between drained calls
	emptyAt  int64 // when the backlog last became empty, -1 never

	lastReject int64 // arrival time of the last rejected call, -1 none
	fullFrom   int64 // first admitted arrival after lastReject, -1 none

	// current point of the series
	offered, admitted, errs int
	arrivalN                int64
}

func newRun(sc *Scenario, name string) *run {
	r := &run{
		sc:          sc,
		eng:         &engine{},
		arr:         rand.New(rand.NewPCG(sc.Seed, streamArrivals)),
		end:         int64(sc.Duration),
		rec:         int64(sc.RecoverAt),
		outageStart: int64(sc.OutageStart()),
		slowNs:      sc.SlowCallDuration,
		lastReject:  -1,
		fullFrom:    -1,
		reporting:   -1,
		emptyAt:     -1,
		drainGap:    max(1, int64(math.Round(1e9/sc.DrainRate))),
	}
	r.dep = newDependency(sc, rand.New(rand.NewPCG(sc.Seed, streamLatency)))
	r.res.Strategy = name
	n := int((sc.Duration + SeriesStep - 1) / SeriesStep)
	r.res.Series = Series{
		Step:     SeriesStep,
		State:    make([]breaker.State, 0, n),
		Offered:  make([]int, 0, n),
		Admitted: make([]int, 0, n),
		Errors:   make([]int, 0, n),
		Share:    make([]float64, 0, n),
	}
	return r
}

func (r *run) run() {
	r.eng.at(r.nextArrival(0), r.arrive)
	r.eng.at(int64(SeriesStep), r.sample)
	r.eng.run(r.end + 1) // events at end run too
	r.eng.now = r.end
	if r.offered > 0 || r.admitted > 0 || r.errs > 0 || r.end%int64(SeriesStep) != 0 {
		r.sample() // the last, partial point
	}
	r.finish()
}

// nextArrival returns the time of the call after one at t.
func (r *run) nextArrival(t int64) int64 {
	if r.sc.Arrivals == ArrivalsUniform {
		r.arrivalN++
		return int64(math.Round(float64(r.arrivalN) * 1e9 / r.sc.Rate))
	}
	return t + max(1, int64(math.Round(r.arr.ExpFloat64()/r.sc.Rate*1e9)))
}

// arrive offers one call to the breaker, and schedules the next arrival.
func (r *run) arrive() {
	now := r.eng.now
	if next := r.nextArrival(now); next < r.end {
		r.eng.at(next, r.arrive)
	}
	r.offered++
	r.res.Offered++
	r.offer(now, true)
}

// offer asks the breaker to admit one call at now: a fresh arrival, or a
// call from the backlog. An admitted call reaches the dependency and its
// outcome is reported when it completes. A rejected fresh call is diverted
// (to the backlog, with Scenario.Backlog); a rejected backlog call is left
// to the caller. It reports whether the call was admitted.
func (r *run) offer(now int64, fresh bool) bool {
	p, err := r.b.AllowAt(r.eng.time(now))
	if err != nil {
		if fresh {
			r.res.Diverted++
			r.lastReject, r.fullFrom = now, -1
			r.enqueue()
		}
		return false
	}
	if fresh {
		r.admitted++
		r.res.Admitted++
		if r.fullFrom < 0 {
			r.fullFrom = now
		}
	} else {
		r.res.Redelivered++
	}
	probe, gen := p.IsProbe(), r.gen
	if probe {
		if now >= r.outageStart && now < r.rec {
			r.res.ProbesDuringOutage++
		}
		r.inFlight++
		r.res.MaxProbesInFlight = max(r.res.MaxProbesInFlight, r.inFlight)
	}
	ok, lat := r.dep.serve(now)
	bad := !ok || lat > r.slowNs
	if bad && now >= r.rec {
		r.res.ErrorsAfterRecovery++
	}
	outcome := breaker.OutcomeSuccess
	if !ok {
		outcome = breaker.OutcomeFailure
	}
	r.eng.at(now+int64(lat), func() {
		if probe && gen == r.gen {
			r.inFlight--
		}
		if bad {
			r.errs++
		}
		r.reporting = now
		p.RecordAt(r.eng.time(r.eng.now), outcome, lat)
		r.reporting = -1
		if !ok {
			r.enqueue() // nacked: the retry queue delivers it again
		}
	})
	return true
}

// enqueue adds a call to the backlog, with Scenario.Backlog.
func (r *run) enqueue() {
	if !r.sc.Backlog {
		return
	}
	r.backlog++
	r.res.BacklogPeak = max(r.res.BacklogPeak, r.backlog)
	r.kickDrain()
}

// kickDrain schedules a drain tick now, unless one is pending, the backlog
// is empty or the breaker is not closed.
func (r *run) kickDrain() {
	if r.draining || r.backlog == 0 || r.state != breaker.StateClosed {
		return
	}
	r.draining = true
	r.eng.at(r.eng.now, r.drainTick)
}

// drainTick offers the backlog's next call (or, when dumping, all of it)
// to the breaker, and schedules the next tick one DrainRate gap later. It
// stops when the breaker rejects a call (it is no longer closed; the next
// close resumes) or the backlog is empty.
func (r *run) drainTick() {
	r.draining = false
	if r.backlog == 0 || r.state != breaker.StateClosed {
		return
	}
	now := r.eng.now
	n := 1
	if r.dump {
		n = r.backlog
	}
	for range n {
		r.backlog--
		if !r.offer(now, false) {
			r.backlog++
			return
		}
	}
	if r.backlog == 0 {
		r.emptyAt = now
		return
	}
	r.draining = true
	r.eng.at(now+r.drainGap, r.drainTick)
}

// sample closes the current point of the series. The state is the one the
// listener saw last (the breaker's timers run on time, so it is current);
// only in half-open is the breaker asked for its admitted share.
func (r *run) sample() {
	now := r.eng.now
	share := 0.0
	switch r.state {
	case breaker.StateClosed:
		share = 1
	case breaker.StateHalfOpen:
		share = r.b.SnapshotAt(r.eng.time(now)).AdmittedShare
	}
	s := &r.res.Series
	s.State = append(s.State, r.state)
	s.Share = append(s.Share, share)
	s.Offered = append(s.Offered, r.offered)
	s.Admitted = append(s.Admitted, r.admitted)
	s.Errors = append(s.Errors, r.errs)
	r.offered, r.admitted, r.errs = 0, 0, 0
	if next := now + int64(SeriesStep); next <= r.end {
		r.eng.at(next, r.sample)
	}
}

// onTransition is the breaker's listener. It runs in the simulation's
// goroutine, right after the breaker released its lock.
func (r *run) onTransition(t breaker.Transition) {
	at := int64(t.At.Sub(epoch))
	r.state = t.To
	if t.To == breaker.StateClosed {
		r.kickDrain() // only schedules: the drain runs as its own event
	}
	r.gen++
	r.inFlight = 0
	r.res.Transitions = append(r.res.Transitions, Transition{At: time.Duration(at), From: t.From, To: t.To, Reason: t.Reason, Window: t.Window})
	switch t.To {
	case breaker.StateOpen:
		if at >= r.rec && (r.reporting < 0 || r.reporting >= r.rec) {
			r.res.RetripsAfterRecovery++
		}
	case breaker.StateHalfOpen:
		if at >= r.outageStart && at < r.rec {
			r.res.ProbeBursts++
		}
	}
}

// finish computes the metrics known only at the end.
func (r *run) finish() {
	res := &r.res
	final := r.b.StateAt(r.eng.time(r.end))
	res.TimeToClose = Never
	if final == breaker.StateClosed {
		res.TimeToClose = 0
		for _, t := range res.Transitions {
			if t.To == breaker.StateClosed && int64(t.At) >= r.rec {
				res.TimeToClose = t.At - time.Duration(r.rec)
			}
		}
	}
	res.BacklogLeft = r.backlog
	switch {
	case r.backlog > 0:
		res.TimeToDrain = Never
	case r.emptyAt > r.rec:
		res.TimeToDrain = time.Duration(r.emptyAt - r.rec)
	}
	switch {
	case r.lastReject < 0:
		res.TimeToFullTraffic = 0
	case r.fullFrom < 0:
		res.TimeToFullTraffic = Never
	default:
		res.TimeToFullTraffic = time.Duration(max(0, r.fullFrom-r.rec))
	}
}
