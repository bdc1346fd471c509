package breaker

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

const (
	noTime         = math.MinInt64
	unknownLatency = time.Duration(-1)
)

// Breaker is a circuit breaker with the states closed, open and half-open.
// See the package documentation for the model. Create one with [New]; the
// zero value is not usable. All methods are safe for concurrent use.
type Breaker struct {
	// Read on the fast paths; written only under mu.
	per       atomic.Pointer[period]
	openUntil atomic.Int64 // ns since epoch; MaxInt64 while held open
	curEpoch  atomic.Int64 // time-based window: current bucket epoch
	stale     atomic.Uint64

	// fleet is the [Fleet] the breaker joined, or nil (fleet.go). Read
	// only outside the closed path. [fleet hook]
	fleet atomic.Pointer[Fleet]

	slots slotTable // closed-state permits (slots.go)

	// Immutable after New. cfg is shared by every breaker made from one
	// [Template]; its Name is the template's, name the breaker's.
	cfg         *Config
	name        string
	slowNs      time.Duration
	closedTimed bool
	timeWindow  bool
	wall        bool
	epoch       time.Time
	seed        uint64
	classifier  func(error) Outcome

	mu            sync.Mutex
	state         State
	forced        bool
	stopped       bool
	dispatching   bool
	sumDirty      bool // the lock-free path may have released since the last full sum
	gen           uint64
	trips         int
	lifetimeTrips uint64
	window        time.Duration
	step          time.Duration
	openUntilNs   int64

	cw          closedWindow
	windowStart uint64 // outcomesLocked() - uncounted when the period began
	uncounted   uint64 // stale and neutral outcomes released through slots
	sumCache    uint64 // slots.sum() at the last full sum, plus locked releases since

	listeners    []listener
	nextListener uint64
	pending      []Transition

	// The state of open and half-open, allocated when the breaker first
	// leaves closed (recoveryLocked), so an idle closed breaker stays small.
	// Its fields are promoted; nil until then.
	*recovery
}

// period is the published view of one generation, read by the lock-free
// paths; publishLocked stores a new one when the generation changes.
type period struct {
	gen   uint64
	state State
	warm  atomic.Bool // closed, and the window holds MinimumCalls
}

// recovery holds what only open and half-open need. Guarded by mu; the
// rejection errors are read without it, after loading a period that is not
// closed (published after recoveryLocked).
type recovery struct {
	errOpen     *RejectedError
	errProbe    *RejectedError
	errThrottle *RejectedError
	ctx         context.Context
	cancel      context.CancelFunc

	hcHold    bool
	hcRunning bool
	hcNext    int64

	ho  halfOpen
	led ledger

	timer    Timer
	timerAt  int64
	timerSeq uint64
}

var defaultRampSteps = DefaultRampSteps()

// recoveryLocked allocates the breaker's recovery state if it has none.
// Requires mu held; call it before anything that may leave closed.
func (b *Breaker) recoveryLocked() {
	if b.recovery != nil {
		return
	}
	r := &recovery{
		errOpen:     newRejectedError(b.name, StateOpen, ErrOpen),
		errProbe:    newRejectedError(b.name, StateHalfOpen, ErrProbeLimit),
		errThrottle: newRejectedError(b.name, StateHalfOpen, ErrThrottled),
		led:         newLedger(),
		timerAt:     noTime,
	}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	if b.stopped {
		r.cancel()
	}
	b.recovery = r
}

type listener struct {
	id uint64
	fn func(Transition)
}

// New returns a closed breaker. It returns an error wrapping
// [ErrInvalidConfig] ("invalid config: …") when cfg is invalid. It is
// [NewTemplate](cfg) then [Template.New](cfg.Name): to make many breakers of
// one configuration, make the template once and share it.
func New(cfg Config) (*Breaker, error) {
	t, err := NewTemplate(cfg)
	if err != nil {
		return nil, err
	}
	return t.New(cfg.Name), nil
}

// Template is a validated breaker configuration, with defaults applied,
// that every breaker made from it ([Template.New]) shares instead of
// holding a copy: a breaker per partner, thousands of them, holds one
// pointer to it (the configuration is about 350 bytes). Create one with
// [NewTemplate]; the zero value is not usable. It is immutable and safe for
// concurrent use.
type Template struct {
	cfg Config
}

// NewTemplate validates cfg and returns it as a [Template]. It returns an
// error wrapping [ErrInvalidConfig] ("invalid config: …") when cfg is
// invalid, as [New] does. cfg.Name is the default name of its breakers (see
// [Template.New]); cfg.RampSteps is copied.
func NewTemplate(cfg Config) (*Template, error) {
	if cfg.RampSteps == nil {
		cfg.RampSteps = defaultRampSteps // shared: never modified, Config clones it
	} else {
		cfg.RampSteps = slices.Clone(cfg.RampSteps)
	}
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("invalid config: %w", err)
	}
	if cfg.Clock == nil {
		cfg.Clock = wallClock{}
	}
	return &Template{cfg: cfg}, nil
}

// Config returns the template's configuration with defaults applied,
// including Clock (the wall clock when none was given).
func (t *Template) Config() Config {
	c := t.cfg
	c.RampSteps = slices.Clone(c.RampSteps)
	return c
}

// New returns a closed breaker of the template's configuration named name
// ([Config.Name]; the breaker's [Breaker.Name], in its transitions and
// rejection errors). It shares the configuration, does not validate
// again, cannot fail and starts no goroutine. Safe for concurrent use.
func (t *Template) New(name string) *Breaker {
	cfg := &t.cfg
	b := &Breaker{
		cfg:         cfg,
		name:        name,
		slowNs:      cfg.SlowCallDuration,
		timeWindow:  cfg.WindowDuration > 0,
		closedTimed: cfg.WindowDuration > 0 || cfg.SlowCallRateThreshold > 0,
		seed:        cfg.Seed,
		classifier:  cfg.Classifier,
	}
	_, b.wall = cfg.Clock.(wallClock)
	if b.seed == 0 {
		b.seed = rand.Uint64()
	}
	b.epoch = cfg.Clock.Now()
	b.cw = newClosedWindow(cfg)
	b.cw.reset(0)
	b.curEpoch.Store(b.cw.cur)
	b.publishLocked(false)
	return b
}

// Name returns [Config.Name].
func (b *Breaker) Name() string { return b.name }

// Config returns the breaker's configuration with defaults applied,
// including Clock: the wall clock when none was given, so callers that
// measure latency for [Permit.RecordAt] read the breaker's own time.
func (b *Breaker) Config() Config {
	c := *b.cfg
	c.Name = b.name
	c.RampSteps = slices.Clone(c.RampSteps)
	return c
}

func (b *Breaker) nowNs() int64 {
	if b.wall {
		return int64(time.Since(b.epoch))
	}
	return int64(b.cfg.Clock.Now().Sub(b.epoch))
}

func (b *Breaker) ns(t time.Time) int64 { return int64(t.Sub(b.epoch)) }

func (b *Breaker) at(ns int64) time.Time { return b.epoch.Add(time.Duration(ns)) }

// publishLocked publishes the state and warmth for the lock-free paths: a
// new period when the generation changed, else the current one's warmth.
// Requires mu held (or New).
func (b *Breaker) publishLocked(warm bool) {
	warm = warm && b.state == StateClosed
	p := b.per.Load()
	if p != nil && p.warm.Load() {
		b.sumDirty = true // a report that saw it warm may release later
	}
	if p != nil && p.gen == b.gen && p.state == b.state {
		p.warm.Store(warm)
		return
	}
	p = &period{gen: b.gen, state: b.state}
	p.warm.Store(warm)
	b.per.Store(p)
}

// Allow asks to make one call now (by the breaker's clock). It returns a
// [Permit] to report the call's outcome with, or a [*RejectedError] matching
// [ErrOpen] (open) or [ErrProbeLimit] (half-open: probe cap full, or outside
// the admitted share, which also matches [ErrThrottled]).
//
// In the closed state Allow takes no lock, does not allocate and reads the
// clock only when latency or time matters there (SlowCallRateThreshold > 0
// or a time-based window).
func (b *Breaker) Allow() (Permit, error) {
	if per := b.per.Load(); per.state == StateClosed {
		start := int64(noTime)
		if b.closedTimed {
			start = b.nowNs()
		}
		return b.closedPermit(per.gen, start), nil
	}
	return b.allowSlow(b.nowNs())
}

// AllowAt is [Breaker.Allow] at time now, which the caller read from the
// breaker's clock (or is replaying). The permit's latency is measured from
// now.
func (b *Breaker) AllowAt(now time.Time) (Permit, error) {
	if per := b.per.Load(); per.state == StateClosed {
		return b.closedPermit(per.gen, b.ns(now)), nil
	}
	return b.allowSlow(b.ns(now))
}

func (b *Breaker) allowSlow(now int64) (Permit, error) {
	if b.per.Load().state == StateOpen && now < b.openUntil.Load() {
		return Permit{}, b.errOpen
	}
	if f := b.fleet.Load(); f != nil { // [fleet hook] probes take a fleet-wide slot
		if p, err, ok := f.allow(now); ok {
			return p, err
		}
	}
	b.mu.Lock()
	b.advanceLocked(now)
	var p Permit
	var err error
	switch b.state {
	case StateClosed:
		p = b.closedPermit(b.gen, now)
	case StateOpen:
		err = b.errOpen
	default:
		p, err = b.admitHalfOpenLocked(now)
	}
	b.armLocked(now)
	b.unlockAndDispatch()
	return p, err
}

// State returns the state now. It evaluates time: an open breaker whose
// window ended reports half-open (and becomes so), an expired probe may
// reopen it.
func (b *Breaker) State() State {
	if b.per.Load().state == StateClosed {
		return StateClosed
	}
	return b.stateAt(b.nowNs())
}

// StateAt is [Breaker.State] at time now.
func (b *Breaker) StateAt(now time.Time) State {
	if b.per.Load().state == StateClosed {
		return StateClosed
	}
	return b.stateAt(b.ns(now))
}

func (b *Breaker) stateAt(now int64) State {
	b.mu.Lock()
	b.advanceLocked(now)
	st := b.state
	b.armLocked(now)
	b.unlockAndDispatch()
	return st
}

// Snapshot returns a consistent view of the breaker now (evaluating time
// like [Breaker.State]).
func (b *Breaker) Snapshot() Snapshot { return b.SnapshotAt(b.cfg.Clock.Now()) }

// SnapshotAt is [Breaker.Snapshot] at time t.
func (b *Breaker) SnapshotAt(t time.Time) Snapshot {
	now := b.ns(t)
	b.mu.Lock()
	b.advanceLocked(now)
	b.armLocked(now)
	s := Snapshot{
		State:            b.state,
		Generation:       b.gen,
		ConsecutiveTrips: b.trips,
		OpenWindow:       b.window,
		OpenWindowStep:   b.step,
		Stale:            b.stale.Load(),
		Forced:           b.forced,
		Trips:            b.lifetimeTrips,
	}
	switch b.state {
	case StateClosed:
		total := b.periodTotalLocked()
		if b.timeWindow {
			b.rotateLocked(now, total)
		}
		s.Calls, s.Failures, s.SlowCalls = b.cw.counts(total)
		s.AdmittedShare = 1
	case StateOpen:
		if !b.forced {
			s.OpenUntil = b.at(b.openUntilNs)
		}
	case StateHalfOpen:
		h := &b.ho
		s.ProbesInFlight = b.led.open
		s.ConsecutiveSuccesses = h.consec
		if h.stage != stageProbes {
			s.Calls, s.Failures, s.SlowCalls = h.calls, h.fails, h.slows
			s.AdmittedShare = h.share
		}
	}
	b.unlockAndDispatch()
	return s
}

// Stale returns the number of reported results discarded because their call
// was admitted in an earlier state period.
func (b *Breaker) Stale() uint64 { return b.stale.Load() }

// AddListener registers fn to receive every [Transition]. Listeners are
// called after the breaker's lock is released, one at a time, in the order
// the transitions happened and the listeners were added; a listener may call
// the breaker. When another goroutine is already delivering transitions, a
// transition caused by this goroutine is delivered by that one. A listener
// that panics panics the goroutine delivering (which may be a timer's);
// later transitions are still delivered. remove unregisters fn; calling it
// again does nothing.
func (b *Breaker) AddListener(fn func(Transition)) (remove func()) {
	if fn == nil {
		return func() {}
	}
	b.mu.Lock()
	b.nextListener++
	id := b.nextListener
	b.listeners = append(slices.Clip(b.listeners), listener{id: id, fn: fn})
	b.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			b.mu.Lock()
			b.listeners = slices.DeleteFunc(slices.Clone(b.listeners), func(l listener) bool { return l.id == id })
			b.mu.Unlock()
		})
	}
}

// unlockAndDispatch releases mu and delivers pending transitions, unless
// another goroutine is delivering. Requires mu held.
func (b *Breaker) unlockAndDispatch() {
	if b.dispatching || len(b.pending) == 0 {
		b.mu.Unlock()
		return
	}
	b.dispatching = true
	done := false
	defer func() {
		if !done { // a listener panicked; let the next caller deliver
			b.mu.Lock()
			b.dispatching = false
			b.mu.Unlock()
		}
	}()
	for len(b.pending) > 0 {
		evs, ls := b.pending, b.listeners
		b.pending = nil
		b.mu.Unlock()
		for _, ev := range evs {
			for _, l := range ls {
				l.fn(ev)
			}
		}
		b.mu.Lock()
	}
	b.dispatching = false
	done = true
	b.mu.Unlock()
}

// ForceOpen isolates the dependency: the breaker opens (if not already) and
// stays open, rejecting every call with [ErrOpen], ignoring its window and
// health check, until [Breaker.ForceClose] or [Breaker.Reset]. It is not a
// trip: the backoff ladder is unchanged. The transition's reason is
// "forced open"; [Breaker.ForceOpenReason] records why.
func (b *Breaker) ForceOpen() { b.forceOpen(fleetReasonForcedOpen) }

// ForceOpenReason is [Breaker.ForceOpen] with a reason: the transition's
// Reason (and, in a fleet, the shared state's, which "floodgate status"
// shows) is "forced open: " + reason. Use it when the program, not an
// operator, isolates the dependency, e.g. a partner parked for a bad
// certificate, so the operator sees why. reason is free text (keep it
// short, one line, and free of secrets); "" is the same as ForceOpen.
// Safe for concurrent use.
func (b *Breaker) ForceOpenReason(reason string) {
	if reason == "" {
		b.ForceOpen()
		return
	}
	b.forceOpen(fleetReasonForcedOpen + ": " + reason)
}

func (b *Breaker) forceOpen(reason string) {
	now := b.nowNs()
	b.mu.Lock()
	b.forced = true
	already := b.state == StateOpen
	if !already {
		b.window, b.step = 0, 0
		b.enterLocked(StateOpen, now, reason, 0)
	} else {
		b.openUntil.Store(math.MaxInt64)
	}
	b.armLocked(now)
	b.unlockAndDispatch()
	if already {
		b.tellFleet(StateOpen, now, reason)
	}
}

// tellFleet hands a command that changed no state (the breaker was already
// in it) to the fleet the breaker joined, which publishes it: forcing open
// a breaker that is open, for example, must still force the fleet open.
// Listeners see no transition. [fleet hook]
func (b *Breaker) tellFleet(s State, now int64, reason string) {
	if f := b.fleet.Load(); f != nil {
		f.onTransition(Transition{From: s, To: s, Reason: reason, At: b.at(now), Breaker: b.name})
	}
}

// ForceClose closes the breaker now with a fresh window (ending a forced
// open). Unlike a clean close it keeps the backoff ladder: the next trip
// opens with the next, longer window.
func (b *Breaker) ForceClose() {
	now := b.nowNs()
	b.mu.Lock()
	b.forced = false
	already := b.state == StateClosed
	if !already {
		b.enterLocked(StateClosed, now, "forced closed", 0)
	}
	b.armLocked(now)
	b.unlockAndDispatch()
	if already {
		b.tellFleet(StateClosed, now, "forced closed")
	}
}

// Reset returns the breaker to its initial state: closed, a fresh window,
// the backoff ladder back at its base, not forced. Results of calls admitted
// before the reset are stale.
func (b *Breaker) Reset() {
	now := b.nowNs()
	b.mu.Lock()
	b.forced = false
	b.trips = 0
	b.window, b.step = 0, 0
	already := b.state == StateClosed
	if !already {
		b.enterLocked(StateClosed, now, "reset", 0)
	} else {
		b.gen++
		b.startClosedLocked(now)
	}
	b.armLocked(now)
	b.unlockAndDispatch()
	if already {
		b.tellFleet(StateClosed, now, "reset")
	}
}

// Stop stops the breaker's timers and any running health check. The breaker
// keeps working, evaluating time lazily on calls (as with a plain Clock).
func (b *Breaker) Stop() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.stopped = true
	if b.recovery == nil {
		return
	}
	if b.timer != nil {
		b.timer.Stop()
		b.timer = nil
	}
	b.timerAt = noTime
	b.cancel()
}

// ---- transitions (all require mu held) ----

func (b *Breaker) enterLocked(to State, now int64, reason string, window time.Duration) {
	b.recoveryLocked()
	from := b.state
	var period uint64
	if from == StateHalfOpen {
		b.led.retire()
		period = b.ho.period
	}
	b.state = to
	b.gen++
	switch to {
	case StateClosed:
		b.startClosedLocked(now)
	case StateOpen:
		if b.forced {
			b.openUntil.Store(math.MaxInt64)
		} else {
			b.openUntil.Store(b.openUntilNs)
		}
		b.publishLocked(false)
	case StateHalfOpen:
		b.ho = halfOpen{stage: stageProbes, since: now}
		b.publishLocked(false)
	}
	if len(b.listeners) > 0 {
		b.pending = append(b.pending, Transition{
			From: from, To: to, Reason: reason, At: b.at(now), Window: window,
			Breaker: b.name, Generation: b.gen, ConsecutiveTrips: b.trips,
			period: period,
		})
	}
}

func (b *Breaker) startClosedLocked(now int64) {
	b.windowStart = b.outcomesLocked() - b.uncounted
	b.cw.reset(now)
	b.curEpoch.Store(b.cw.cur)
	b.publishLocked(false)
}

// outcomesLocked returns the number of outcomes ever released through the
// slot table, modulo 2^64. It sums the table only when the lock-free path
// may have released slots since the last sum (the window was warm); locked
// releases are counted as they happen. Requires mu held.
func (b *Breaker) outcomesLocked() uint64 {
	if b.sumDirty || b.per.Load().warm.Load() {
		b.sumCache = b.slots.sum()
		b.sumDirty = false
	}
	return b.sumCache
}

// tripLocked opens the breaker with the next window of the ladder.
func (b *Breaker) tripLocked(now int64, reason string) {
	b.recoveryLocked()
	b.trips++
	b.lifetimeTrips++
	b.step = b.cfg.step(b.trips)
	b.window = b.cfg.jittered(b.step, JitterDraw(b.seed, b.lifetimeTrips))
	b.openUntilNs = now + int64(b.window)
	b.hcHold = false
	b.hcNext = now + int64(b.cfg.HealthCheckInterval)
	b.enterLocked(StateOpen, now, reason, b.window)
}

// closeLocked closes after a successful recovery: a clean close, which puts
// the backoff ladder back at its base.
func (b *Breaker) closeLocked(now int64, reason string) {
	b.trips = 0
	b.enterLocked(StateClosed, now, reason, 0)
}

func (b *Breaker) enterHalfOpenLocked(now int64, reason string) {
	b.recoveryLocked()
	b.hcHold = false
	b.enterLocked(StateHalfOpen, now, reason, 0)
}

// advanceLocked applies what time alone changes: the end of the open window,
// expired probes, ramp steps and adaptive intervals.
func (b *Breaker) advanceLocked(now int64) {
	for range 64 {
		switch b.state {
		case StateOpen:
			if b.forced || now < b.openUntilNs {
				return
			}
			if b.hcHold {
				b.openUntil.Store(math.MaxInt64)
				return
			}
			b.enterHalfOpenLocked(now, "open window ended")
		case StateHalfOpen:
			gen := b.gen
			b.advanceHalfOpenLocked(now)
			if b.gen == gen {
				return
			}
		default:
			return
		}
	}
}

// ---- timers ----

func minTime(a, b int64) int64 {
	if a == noTime {
		return b
	}
	if b == noTime {
		return a
	}
	return min(a, b)
}

// nextDeadlineLocked returns when time alone will next change something.
func (b *Breaker) nextDeadlineLocked() int64 {
	switch b.state {
	case StateOpen:
		if b.forced {
			return noTime
		}
		d := int64(noTime)
		if !b.hcHold {
			d = b.openUntilNs
		}
		if b.cfg.HealthCheck != nil && !b.hcRunning {
			d = minTime(d, b.hcNext)
		}
		return d
	case StateHalfOpen:
		return b.halfOpenDeadlineLocked()
	}
	return noTime
}

// armLocked makes sure a timer fires at the next deadline (when the clock
// has timers). A timer already set earlier is kept; it re-arms when it fires.
func (b *Breaker) armLocked(now int64) {
	if b.stopped || b.recovery == nil {
		return
	}
	tclock, _ := b.cfg.Clock.(TimerClock) // a Clock without timers: none armed
	if tclock == nil {
		return
	}
	d := b.nextDeadlineLocked()
	if d == noTime {
		return
	}
	if d <= now { // due yet not applied: never spin on a zero-delay timer
		d = now + int64(time.Millisecond)
	}
	if b.timerAt != noTime && b.timerAt <= d {
		return
	}
	if b.timer != nil {
		b.timer.Stop()
	}
	b.timerSeq++
	seq := b.timerSeq
	b.timerAt = d
	b.timer = tclock.AfterFunc(time.Duration(max(0, d-now)), func() { b.onTimer(seq) })
}

func (b *Breaker) onTimer(seq uint64) {
	b.mu.Lock()
	if seq != b.timerSeq || b.stopped {
		b.mu.Unlock()
		return
	}
	b.timer, b.timerAt = nil, noTime
	now := b.nowNs()
	b.advanceLocked(now)
	check, gen := false, b.gen
	if b.state == StateOpen && !b.forced && b.cfg.HealthCheck != nil && !b.hcRunning && now >= b.hcNext {
		check = true
		b.hcRunning = true
		b.hcNext = now + int64(b.cfg.HealthCheckInterval)
	}
	b.armLocked(now)
	b.unlockAndDispatch()
	if check {
		b.runHealthCheck(gen)
	}
}

func (b *Breaker) runHealthCheck(gen uint64) {
	err := b.callHealthCheck()
	b.mu.Lock()
	b.hcRunning = false
	now := b.nowNs()
	if b.gen == gen && b.state == StateOpen && !b.forced {
		if err == nil {
			b.enterHalfOpenLocked(now, "health check passed")
		} else {
			b.hcHold = true
			b.advanceLocked(now)
		}
	}
	b.armLocked(now)
	b.unlockAndDispatch()
}

func (b *Breaker) callHealthCheck() (err error) {
	ctx, cancel := context.WithTimeout(b.ctx, b.cfg.HealthCheckTimeout)
	defer cancel()
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("breaker: health check panicked: %v", r)
		}
	}()
	return b.cfg.HealthCheck(ctx)
}
