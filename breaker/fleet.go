package breaker

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of the [FleetConfig] fields.
const (
	DefaultFleetOpTimeout       = 2 * time.Second        // FleetConfig.OpTimeout
	DefaultFleetResyncInterval  = 1 * time.Second        // FleetConfig.ResyncInterval
	DefaultFleetNoSlotBackoff   = 20 * time.Millisecond  // FleetConfig.NoSlotBackoff
	DefaultFallbackProbes       = 1                      // FleetConfig.FallbackProbes
	DefaultFallbackAfter        = 2 * time.Second        // FleetConfig.FallbackAfter
	minProbeLeaseTTL            = time.Second            // NATS per-key TTLs are whole seconds
	fleetReasonPrefix           = "fleet: "              // transitions applied from the store
	fleetHalfOpenSkew           = 250 * time.Millisecond // tolerated clock skew when leaving open
	fleetMaxCASAttempts         = 8
	fleetPendingEventsCap       = 64
	fleetReasonForcedOpen       = "forced open"   // Breaker.ForceOpen's reason
	fleetReasonForcedClosed     = "forced closed" // Breaker.ForceClose's reason
	fleetReasonReset            = "reset"         // Breaker.Reset's reason
	fleetReasonHealthCheckEnded = "health check passed"
)

// FleetConfig configures [JoinFleet].
type FleetConfig struct {
	// Store holds the shared state and the probe leases. Required. Every
	// fleet of a process on one store (one comparable Store value) shares
	// one pool of at most 4 worker goroutines, started when there is work,
	// and one resync timer: a joined breaker has no goroutine, ticker or
	// watch of its own (breaker/natskv also shares one KV watch per bucket).
	Store Store

	// Name is the breaker's name in the store: breakers of the same Name
	// on the same store form one fleet. Optional. Default the breaker's
	// [Config.Name]. A breaker per partner needs a name unique per
	// (service, partner), not the partner alone, or two services would
	// share a breaker: package partner uses "<service token>.<partner
	// token>" (partner.FleetName). The store may restrict it
	// ([NameChecker]).
	Name string

	// Replica names this process in the shared state and its probe leases
	// (for operators); give every replica its own (a pod name, or host and
	// process id, not a bare host name two replicas may share). Optional.
	// Default a random name "replica-xxxxxxxx".
	Replica string

	// ProbeLeaseTTL is how long a probe slot stays held without being
	// released: the slot of a replica that crashed with a probe in flight
	// frees itself after it. Optional. Default the breaker's MaxProbeWait
	// (at least 1s); range >= 1s (NATS per-key TTLs are whole seconds) and
	// >= the breaker's [Config.MaxProbeWait], so a probe never outlives its
	// lease and lets another replica's probe take its slot.
	ProbeLeaseTTL time.Duration

	// OpTimeout bounds every store call. Optional. Default 2s; range > 0.
	OpTimeout time.Duration

	// ResyncInterval is how often the fleet re-reads the shared state
	// while it is not quiet: while the store is unreachable (to try it
	// again), while its watch is not running, or while the shared or local
	// state is not closed, it bounds the delay to learn a change if a watch
	// update is lost. A quiet fleet (closed, connected, watching) relies
	// on its watch and costs no store call, so thousands of idle breakers
	// cost no store traffic. Optional. Default 1s; range > 0. Ignored with
	// Inline.
	ResyncInterval time.Duration

	// NoSlotBackoff is how long a replica that found every probe slot held
	// rejects probes without asking the store again. Optional. Default 20ms;
	// range > 0.
	NoSlotBackoff time.Duration

	// FallbackAfter is how long the store must keep failing before the
	// replica falls back to its local breaker. Meanwhile (a NATS node
	// failing over, a reconnect) probes are refused rather than admitted
	// without a lease, and closed-state traffic flows as usual. Optional.
	// Default 2s; range > 0.
	FallbackAfter time.Duration

	// FallbackProbes is the most probes in flight on this replica while the
	// store is unreachable (the local breaker's cap applies too), so a fleet
	// cut off from its store never admits unbounded probes. Optional.
	// Default 1; range 1..ProbeConcurrency.
	FallbackProbes int

	// Inline runs every store call in the goroutine that caused it and
	// starts no goroutine or timer, for simulations on virtual time with a
	// [MemoryStore] whose watchers are called synchronously. Optional.
	// Default false.
	Inline bool
}

func (c *FleetConfig) setDefaults(b *Breaker) {
	if c.Replica == "" {
		c.Replica = fmt.Sprintf("replica-%08x", rand.Uint32())
	}
	if c.ProbeLeaseTTL == 0 {
		c.ProbeLeaseTTL = max(minProbeLeaseTTL, b.cfg.MaxProbeWait)
	}
	c.setDefaultsStatic()
}

// Validate reports whether c, with defaults applied to its zero fields, is
// valid. It does not modify c. The error wraps [ErrInvalidConfig] (as a
// [*ConfigError]) and names the field and its allowed range. The defaults
// and limits that depend on the breaker are taken at their most permissive
// without one: [JoinFleet] also checks FallbackProbes against the breaker's
// ProbeConcurrency and ProbeLeaseTTL against its MaxProbeWait, and defaults
// ProbeLeaseTTL from its MaxProbeWait.
func (c FleetConfig) Validate() error {
	if c.ProbeLeaseTTL == 0 {
		c.ProbeLeaseTTL = minProbeLeaseTTL
	}
	c.Replica = "x"
	c.setDefaultsStatic()
	return c.validate(maxProbes, 0)
}

func (c *FleetConfig) setDefaultsStatic() {
	if c.OpTimeout == 0 {
		c.OpTimeout = DefaultFleetOpTimeout
	}
	if c.ResyncInterval == 0 {
		c.ResyncInterval = DefaultFleetResyncInterval
	}
	if c.NoSlotBackoff == 0 {
		c.NoSlotBackoff = DefaultFleetNoSlotBackoff
	}
	if c.FallbackProbes == 0 {
		c.FallbackProbes = DefaultFallbackProbes
	}
	if c.FallbackAfter == 0 {
		c.FallbackAfter = DefaultFallbackAfter
	}
}

// validate requires defaults set; probes is the breaker's probe cap,
// maxProbeWait its MaxProbeWait (0: not known).
func (c *FleetConfig) validate(probes int, maxProbeWait time.Duration) error {
	switch {
	case c.Store == nil:
		return invalid("FleetConfig.Store", nil, "non-nil (required)")
	case c.ProbeLeaseTTL < minProbeLeaseTTL:
		return invalid("FleetConfig.ProbeLeaseTTL", c.ProbeLeaseTTL, ">= 1s")
	case c.ProbeLeaseTTL < maxProbeWait:
		return invalid("FleetConfig.ProbeLeaseTTL", c.ProbeLeaseTTL, fmt.Sprintf(
			">= Config.MaxProbeWait (%v) (rule MaxProbeWait <= ProbeLeaseTTL: a probe must not outlive its lease)", maxProbeWait))
	case c.OpTimeout <= 0:
		return invalid("FleetConfig.OpTimeout", c.OpTimeout, "> 0")
	case c.ResyncInterval <= 0:
		return invalid("FleetConfig.ResyncInterval", c.ResyncInterval, "> 0")
	case c.NoSlotBackoff <= 0:
		return invalid("FleetConfig.NoSlotBackoff", c.NoSlotBackoff, "> 0")
	case c.FallbackAfter <= 0:
		return invalid("FleetConfig.FallbackAfter", c.FallbackAfter, "> 0")
	case c.FallbackProbes < 1 || c.FallbackProbes > probes:
		return invalid("FleetConfig.FallbackProbes", c.FallbackProbes, fmt.Sprintf("1..ProbeConcurrency (%d)", probes))
	}
	return nil
}

// Fleet connects one [Breaker] to the breakers of the same [Config.Name] in
// other processes through a [Store]. See [JoinFleet].
type Fleet struct {
	b     *Breaker
	cfg   FleetConfig
	store Store
	name  string
	ctx   context.Context
	stop  context.CancelFunc
	hub   *fleetHub // nil with Inline

	queued     atomic.Bool  // in the hub's queue
	nextResync atomic.Int64 // unix ns of the next resync while not quiet
	watching   atomic.Bool

	removeListener func()

	connected   atomic.Bool
	recState    atomic.Int32 // f.rec.State
	noSlotUntil atomic.Int64 // breaker ns
	failingFrom atomic.Int64 // 1 + breaker ns of the first failure in a row, 0: none

	applyMu sync.Mutex // serialises applyLatest; taken before mu

	mu       sync.Mutex
	rec      SharedState
	rev      uint64
	events   []Transition
	goods    []uint64 // epochs of good leased probes to count
	releases []ProbeLease
	leases   map[uint64]heldLease // by ledger id
	resync   bool
	stepping bool
	idle     chan struct{} // closed when a step ends, for Leave
	dirty    bool
	applied  appliedKey
	stats    FleetStats
}

type heldLease struct {
	lease ProbeLease
	epoch uint64
}

type appliedKey struct {
	rev       uint64
	epoch     uint64
	successes int
}

// FleetStats counts what a [Fleet] did, for tests and metrics.
type FleetStats struct {
	// Published counts transitions this replica wrote to the store.
	Published uint64
	// Adopted counts shared states applied to the local breaker.
	Adopted uint64
	// StaleCAS counts compare-and-swaps that lost to another writer.
	StaleCAS uint64
	// LeasesAcquired counts probe slots taken; NoSlot the refusals.
	LeasesAcquired, NoSlot uint64
	// LocalProbes counts probes admitted without a lease while the store
	// was unreachable.
	LocalProbes uint64
	// StoreErrors counts failed store calls.
	StoreErrors uint64
}

// JoinFleet makes b share its state with every breaker of the same name
// that joined the fleet through the same store, and returns the [Fleet].
//
// What is shared: the state, the open-until time, the trip count driving the
// backoff, the ramp start and the probe budget. What stays local: the
// closed-state hot path (Allow and reporting a success on a closed breaker
// never touch the store) and the sliding window. A replica whose window
// trips publishes the trip with a compare-and-swap on the store's revision;
// the others learn of it through the store's watch (or at the latest after
// ResyncInterval) and open until the same time. When the window ends every
// replica becomes half-open; each probe first takes one of the fleet's
// [Config.ProbeConcurrency] probe slots, a lease that expires after
// ProbeLeaseTTL, so at most ProbeConcurrency probes are in flight across the
// fleet. Good probes anywhere count toward one shared count of consecutive
// successes; reaching [Config.SuccessesToClose] closes the fleet (or starts
// the ramp or adaptive recovery of every replica at the same time); a bad
// probe anywhere reopens it with the next window of the shared ladder. Two
// writers racing: the one with a stale revision loses, reloads and merges
// (a trip on top of a closed or half-open state still trips; anything on
// top of a newer trip adopts it).
//
// If the store is unreachable, the replica falls back to its local breaker:
// traffic flows or stops by local evidence alone, probes are capped at
// FallbackProbes in flight on this replica, and it reconciles with the
// shared state when the store answers again (a local trip made meanwhile
// is published; otherwise the shared state is adopted).
//
// A probe admission waits for one store round trip (taking the lease,
// bounded by OpTimeout); nothing else a caller does waits for the store:
// publishing, watching and releasing run on the fleet's own goroutine.
// Keep the probe's call timeout below ProbeLeaseTTL, or a probe outliving
// its lease lets another replica's probe take its slot.
//
// All replicas must read the same clock (the wall clock in production;
// their clocks' skew adds to the convergence delay). JoinFleet reads the
// shared state once (adopting it) unless the store is unreachable, in which
// case it starts in fallback. It returns an error wrapping
// [ErrInvalidConfig] for a nil b, a bad cfg, or a name the store cannot
// hold ([FleetConfig.Name] or the breaker's; [NameChecker]; natskv: one or
// two tokens of [-_=A-Za-z0-9]+ joined by a dot), or [ErrFleetJoined].
//
// A joined breaker starts no goroutine, ticker or timer: its store calls
// run on a small pool shared by every fleet on the same store in the
// process (see [FleetConfig.Store]), so joining thousands of breakers
// (one per partner) costs their memory and a constant number of
// goroutines.
func JoinFleet(b *Breaker, cfg FleetConfig) (*Fleet, error) {
	if b == nil {
		return nil, fmt.Errorf("invalid config: %w: breaker is nil", ErrInvalidConfig)
	}
	cfg.setDefaults(b)
	if err := cfg.validate(b.probeCap(), b.cfg.MaxProbeWait); err != nil {
		return nil, fmt.Errorf("invalid config: %w", err)
	}
	name, field := cfg.Name, "FleetConfig.Name"
	if name == "" {
		name, field = b.name, "breaker Config.Name"
	}
	if nc, ok := cfg.Store.(NameChecker); ok {
		if err := nc.CheckName(name); err != nil {
			return nil, fmt.Errorf("invalid config: %w: %s: %w", ErrInvalidConfig, field, err)
		}
	}
	f := &Fleet{
		b: b, cfg: cfg, store: cfg.Store, name: name,
		leases: map[uint64]heldLease{},
	}
	f.ctx, f.stop = context.WithCancel(context.Background())
	if !b.fleet.CompareAndSwap(nil, f) {
		f.stop()
		return nil, ErrFleetJoined
	}
	f.mu.Lock()
	f.resync = true
	f.mu.Unlock()
	if !cfg.Inline {
		// Join the hub before anything can kick f: its tick and the
		// transition listener both enqueue f on f.hub.
		f.nextResync.Store(time.Now().UnixNano() + int64(cfg.ResyncInterval))
		joinHub(f)
	}
	f.removeListener = b.AddListener(f.onTransition)
	f.step()
	return f, nil
}

// Name returns the breaker's name in the store ([FleetConfig.Name]).
func (f *Fleet) Name() string { return f.name }

// Replica returns [FleetConfig.Replica].
func (f *Fleet) Replica() string { return f.cfg.Replica }

// Connected reports whether the last store call succeeded; false means the
// breaker runs on local evidence (fallback).
func (f *Fleet) Connected() bool { return f.connected.Load() }

// Shared returns the last shared state this replica read or wrote, and its
// revision.
func (f *Fleet) Shared() (SharedState, uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.rec, f.rev
}

// Stats returns the fleet's counters.
func (f *Fleet) Stats() FleetStats {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stats
}

// Leave detaches the breaker from the fleet: it keeps working on local
// evidence alone. It waits for a store call of the fleet in progress, then
// releases the probe leases still held (best effort). Leave is idempotent;
// it must not be called from a listener of the breaker.
func (f *Fleet) Leave() {
	if !f.b.fleet.CompareAndSwap(f, nil) {
		return
	}
	f.removeListener()
	f.mu.Lock()
	f.stop() // under mu: no step starts after this
	var idle chan struct{}
	if f.stepping && !f.cfg.Inline {
		f.idle = make(chan struct{})
		idle = f.idle
	}
	f.mu.Unlock()
	if idle != nil {
		<-idle
	}
	if f.hub != nil {
		f.hub.leave(f)
	}
	f.mu.Lock()
	rel := f.releases
	for _, l := range f.leases {
		rel = append(rel, l.lease)
	}
	f.releases, f.leases = nil, map[uint64]heldLease{}
	f.mu.Unlock()
	for _, l := range rel {
		ctx, cancel := context.WithTimeout(context.Background(), f.cfg.OpTimeout)
		_ = f.store.ReleaseProbe(ctx, l)
		cancel()
	}
}

// ---- hooks called by the breaker ----

// onTransition queues a local transition for publication.
func (f *Fleet) onTransition(t Transition) {
	if strings.HasPrefix(t.Reason, fleetReasonPrefix) {
		return // applied from the store
	}
	f.mu.Lock()
	if len(f.events) >= fleetPendingEventsCap { // store unreachable for long: keep the latest
		f.events = append(f.events[:0], f.events[len(f.events)-fleetPendingEventsCap/2:]...)
	}
	f.events = append(f.events, t)
	f.mu.Unlock()
	f.kick()
}

// allow admits a half-open probe against the fleet's budget. ok is false
// when the breaker is not admitting capped probes, and the breaker then
// takes its own path.
func (f *Fleet) allow(now int64) (p Permit, err error, ok bool) {
	b := f.b
	for attempt := 0; attempt < 2; attempt++ {
		b.mu.Lock()
		b.advanceLocked(now)
		if b.state != StateHalfOpen || b.ho.stage != stageProbes {
			b.armLocked(now)
			b.unlockAndDispatch()
			return Permit{}, nil, false
		}
		if !f.connected.Load() {
			if b.led.open >= min(b.probeCap(), f.cfg.FallbackProbes) {
				b.unlockAndDispatch()
				return Permit{}, b.errProbe, true
			}
			p, err = b.admitHalfOpenLocked(now)
			b.armLocked(now)
			b.unlockAndDispatch()
			if err == nil {
				f.mu.Lock()
				f.stats.LocalProbes++
				f.mu.Unlock()
			}
			return p, err, true
		}
		if b.led.open >= b.probeCap() || now < f.noSlotUntil.Load() {
			b.unlockAndDispatch()
			return Permit{}, b.errProbe, true
		}
		gen := b.gen
		b.unlockAndDispatch()
		if State(f.recState.Load()) != StateHalfOpen {
			// Probe only once the fleet is half-open: the transition is
			// being published (or lost to a newer trip, adopted soon).
			f.kick()
			return Permit{}, b.errProbe, true
		}
		f.mu.Lock()
		epoch, period := f.rec.Epoch, sharedPeriod(f.rec)
		f.mu.Unlock()
		ctx, cancel := context.WithTimeout(f.ctx, f.cfg.OpTimeout)
		lease, lerr := f.store.AcquireProbe(ctx, f.name, b.probeCap(), f.cfg.ProbeLeaseTTL, f.cfg.Replica)
		cancel()
		if errors.Is(lerr, ErrNoProbeSlot) {
			f.noSlotUntil.Store(now + int64(f.cfg.NoSlotBackoff))
			f.mu.Lock()
			f.stats.NoSlot++
			f.mu.Unlock()
			return Permit{}, b.errProbe, true
		}
		if lerr != nil {
			f.storeFailed()
			if f.connected.Load() {
				return Permit{}, b.errProbe, true // not yet FallbackAfter
			}
			continue // fall back to the local cap
		}
		f.storeOK()
		b.mu.Lock()
		b.advanceLocked(now)
		if b.gen != gen || b.state != StateHalfOpen || b.ho.stage != stageProbes || b.led.open >= b.probeCap() {
			b.armLocked(now)
			b.unlockAndDispatch()
			f.mu.Lock()
			f.releases = append(f.releases, lease)
			f.mu.Unlock()
			f.kick()
			return Permit{}, b.errProbe, true
		}
		if b.ho.period == 0 { // a half-open period entered locally: now the fleet's
			b.ho.period = period
		}
		p, err = b.admitHalfOpenLocked(now)
		if err == nil {
			f.mu.Lock()
			f.leases[p.tag&^probeFlag] = heldLease{lease: lease, epoch: epoch}
			f.stats.LeasesAcquired++
			f.mu.Unlock()
		}
		b.armLocked(now)
		b.unlockAndDispatch()
		return p, err, true
	}
	return Permit{}, b.errProbe, true
}

// probeDone releases a reported probe's lease and counts a good one toward
// the shared consecutive successes; a neutral or cancelled probe only frees
// its lease. Called without the breaker's lock.
func (f *Fleet) probeDone(p Permit, o Outcome, lat time.Duration) {
	id := p.tag &^ probeFlag
	f.mu.Lock()
	h, ok := f.leases[id]
	if ok {
		delete(f.leases, id)
		f.releases = append(f.releases, h.lease)
		if o == OutcomeSuccess && lat <= f.b.slowNs {
			f.goods = append(f.goods, h.epoch)
		}
	}
	f.mu.Unlock()
	if ok {
		f.kick()
	}
}

// ---- the worker ----

// kick has the fleet step: at once with Inline, else on the hub's pool.
func (f *Fleet) kick() {
	if f.cfg.Inline {
		f.step()
		return
	}
	if f.ctx.Err() == nil && f.queued.CompareAndSwap(false, true) {
		f.hub.enqueue(f)
	}
}

// quiet reports a fleet that needs no periodic resync: connected, its
// watch running, no store failure pending, and closed both in the shared
// state and locally. It reads atomics only.
func (f *Fleet) quiet() bool {
	return f.connected.Load() && f.watching.Load() && f.failingFrom.Load() == 0 &&
		State(f.recState.Load()) == StateClosed && f.b.per.Load().state == StateClosed
}

// storeFailed records a failed store call; the replica falls back once
// the store has failed for FallbackAfter.
func (f *Fleet) storeFailed() {
	now := f.b.nowNs()
	from := f.failingFrom.Load() // now+1 of the first failure, 0: none
	if from == 0 {
		f.failingFrom.CompareAndSwap(0, now+1)
		from = now + 1
	}
	if now-(from-1) >= int64(f.cfg.FallbackAfter) {
		f.connected.Store(false)
	}
	f.mu.Lock()
	f.stats.StoreErrors++
	f.resync = true
	f.mu.Unlock()
}

// storeOK records a store call that succeeded.
func (f *Fleet) storeOK() {
	f.failingFrom.Store(0)
	f.connected.Store(true)
}

func (f *Fleet) opCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(f.ctx, f.cfg.OpTimeout)
}

// step processes what is pending: lease releases, a resync, local
// transitions to publish, good probes to count, and the shared state to
// apply. Only one step runs at a time; a step requested meanwhile runs next.
func (f *Fleet) step() {
	f.mu.Lock()
	if f.ctx.Err() != nil {
		f.mu.Unlock()
		return
	}
	if f.stepping {
		f.dirty = true
		f.mu.Unlock()
		return
	}
	f.stepping = true
	f.mu.Unlock()
	for {
		f.stepOnce()
		f.mu.Lock()
		if !f.dirty || f.ctx.Err() != nil {
			f.stepping, f.dirty = false, false
			if f.idle != nil {
				close(f.idle)
				f.idle = nil
			}
			f.mu.Unlock()
			return
		}
		f.dirty = false
		f.mu.Unlock()
	}
}

func (f *Fleet) stepOnce() {
	if f.ctx.Err() != nil {
		return
	}
	// Latency matters most for a trip: apply a newer shared state (local,
	// no I/O) and publish local transitions before anything else.
	f.mu.Lock()
	evs := f.events
	f.events = nil
	resync := f.resync || !f.connected.Load()
	f.resync = false
	f.mu.Unlock()
	if len(evs) == 0 && !resync {
		f.applyLatest()
	}
	if resync && !f.reload() {
		f.requeueEvents(evs)
		return
	}
	for i, ev := range evs {
		if !f.publish(ev) {
			f.requeueEvents(evs[i:])
			return
		}
	}
	f.applyLatest()
	if resync {
		f.startWatch()
	}

	f.mu.Lock()
	goods, rel := f.goods, f.releases
	f.goods, f.releases = nil, nil
	f.mu.Unlock()
	for i, e := range goods {
		if !f.countGood(e) {
			f.mu.Lock()
			f.goods = append(goods[i:len(goods):len(goods)], f.goods...)
			f.releases = append(rel[:len(rel):len(rel)], f.releases...)
			f.mu.Unlock()
			return
		}
	}
	f.applyLatest()
	for i, l := range rel {
		ctx, cancel := f.opCtx()
		err := f.store.ReleaseProbe(ctx, l)
		cancel()
		if err != nil {
			f.storeFailed()
			f.mu.Lock()
			f.releases = append(rel[i:len(rel):len(rel)], f.releases...) // retried; the TTL frees them anyway
			f.mu.Unlock()
			return
		}
	}
}

func (f *Fleet) requeueEvents(evs []Transition) {
	if len(evs) == 0 {
		return
	}
	f.mu.Lock()
	f.events = append(evs[:len(evs):len(evs)], f.events...)
	f.mu.Unlock()
}

// reload reads the shared state; false when the store is unreachable.
func (f *Fleet) reload() bool {
	ctx, cancel := f.opCtx()
	st, rev, err := f.store.Load(ctx, f.name)
	cancel()
	if err != nil {
		f.storeFailed()
		return false
	}
	f.storeOK()
	f.setRec(st, rev)
	return true
}

// setRec records a shared state read or written, unless an older revision.
func (f *Fleet) setRec(st SharedState, rev uint64) {
	f.mu.Lock()
	if rev >= f.rev || rev == 0 {
		f.rec, f.rev = st, rev
		f.recState.Store(int32(st.State))
	}
	f.mu.Unlock()
}

func (f *Fleet) startWatch() {
	if !f.watching.CompareAndSwap(false, true) {
		return
	}
	err := f.store.Watch(f.ctx, f.name, func(st SharedState, rev uint64, err error) {
		if err != nil {
			f.watching.Store(false)
			f.storeFailed()
			f.kick()
			return
		}
		f.mu.Lock()
		newer := rev > f.rev
		f.mu.Unlock()
		if newer {
			f.setRec(st, rev)
			f.mu.Lock()
			quiet := len(f.events) == 0
			f.mu.Unlock()
			if quiet && !f.cfg.Inline {
				f.applyLatest() // at once, without waiting for the worker
			}
			f.kick()
		}
	})
	if err != nil {
		f.watching.Store(false)
		f.storeFailed()
	}
}

// publish merges one local transition into the shared state with
// compare-and-swap, retrying on a stale revision. It returns false when the
// store is unreachable.
func (f *Fleet) publish(ev Transition) bool {
	for range fleetMaxCASAttempts {
		f.mu.Lock()
		cur, rev := f.rec, f.rev
		f.mu.Unlock()
		next, ok := f.merge(cur, ev)
		if !ok {
			return true // adopt cur, applied by applyLatest
		}
		written, retry := f.cas(next, rev)
		if written {
			f.mu.Lock()
			f.stats.Published++
			f.mu.Unlock()
			return true
		}
		if !retry {
			return false
		}
	}
	return true // lost too many races: the shared state wins
}

// cas writes next over revision rev of the shared state. written reports
// success; retry that the revision was stale and the state has been
// reloaded, so the caller may merge again; both false mean the store is
// unreachable.
func (f *Fleet) cas(next SharedState, rev uint64) (written, retry bool) {
	ctx, cancel := f.opCtx()
	nrev, err := f.store.CompareAndSwap(ctx, f.name, next, rev)
	cancel()
	switch {
	case err == nil:
		f.storeOK()
		f.setRec(next, nrev)
		return true, false
	case errors.Is(err, ErrStaleRevision):
		f.mu.Lock()
		f.stats.StaleCAS++
		f.mu.Unlock()
		return false, f.reload()
	default:
		f.storeFailed()
		return false, false
	}
}

// merge returns the shared state to write for local transition ev on top of
// r, or ok=false when r already says as much or more and is to be adopted:
// a transition older than r (beyond the tolerated clock skew), the verdict
// (a trip or a clean close) of a half-open period the fleet has left, a
// trip on top of a newer trip, a half-open before r's window ends, a clean
// close of a fleet that is not half-open.
func (f *Fleet) merge(r SharedState, ev Transition) (next SharedState, ok bool) {
	c := f.b.cfg
	next = r
	next.Epoch = r.Epoch + 1
	next.By = f.cfg.Replica
	next.Reason = ev.Reason
	next.UpdatedAt = ev.At
	next.Successes = 0
	next.RampStart = time.Time{}
	if !r.UpdatedAt.IsZero() && ev.At.Add(fleetHalfOpenSkew).Before(r.UpdatedAt) {
		// The fleet moved on after this transition (one queued while the
		// store was unreachable): it is history, not news.
		return r, false
	}
	if ev.From == StateHalfOpen && ev.period != 0 && sharedPeriod(r) != ev.period && !operatorReason(ev.Reason) {
		// A probe's verdict from a half-open period that ended (the fleet
		// closed, or reopened, meanwhile): as for successes (countGood),
		// it says nothing about the current period.
		return r, false
	}
	openNow := r.State == StateOpen && (r.Forced || r.OpenUntil.After(ev.At))
	switch ev.To {
	case StateOpen:
		if forcedOpenReason(ev.Reason) {
			if r.State == StateOpen && r.Forced && r.Reason == ev.Reason {
				return r, false
			}
			// Not forced yet, or forced for another reason: the latest
			// reason is the one status shows.
			next.State, next.Forced, next.OpenUntil, next.Window = StateOpen, true, time.Time{}, 0
			return next, true
		}
		if openNow {
			return r, false // someone tripped first: adopt their window
		}
		next.State, next.Forced = StateOpen, false
		next.Trips = r.Trips + 1
		next.Window = c.jittered(c.step(next.Trips), JitterDraw(f.b.seed, next.Epoch))
		next.OpenUntil = ev.At.Add(next.Window)
		return next, true
	case StateHalfOpen:
		if r.State != StateOpen || r.Forced {
			return r, false
		}
		if r.OpenUntil.After(ev.At.Add(fleetHalfOpenSkew)) && ev.Reason != fleetReasonHealthCheckEnded {
			return r, false // a newer trip: stay open
		}
		next.State, next.OpenUntil = StateHalfOpen, time.Time{}
		return next, true
	default: // closed
		switch ev.Reason {
		case fleetReasonReset:
			if r.State == StateClosed && r.Trips == 0 && !r.Forced {
				return r, false
			}
			next.State, next.Trips, next.Forced, next.OpenUntil, next.Window = StateClosed, 0, false, time.Time{}, 0
			return next, true
		case fleetReasonForcedClosed:
			if r.State == StateClosed && !r.Forced {
				return r, false
			}
			next.State, next.Forced, next.OpenUntil = StateClosed, false, time.Time{}
			return next, true
		}
		if r.State != StateHalfOpen {
			return r, false // closed already, or reopened by another replica
		}
		next.State, next.Trips, next.OpenUntil = StateClosed, 0, time.Time{}
		return next, true
	}
}

// operatorReason reports the reason of a command ([Breaker.ForceOpen],
// [Breaker.ForceClose], [Breaker.Reset]), which applies whatever the period.
func operatorReason(reason string) bool {
	return forcedOpenReason(reason) || reason == fleetReasonForcedClosed || reason == fleetReasonReset
}

// forcedOpenReason reports the reason of [Breaker.ForceOpen] or
// [Breaker.ForceOpenReason]: "forced open", or "forced open: " and why.
func forcedOpenReason(reason string) bool {
	return reason == fleetReasonForcedOpen || strings.HasPrefix(reason, fleetReasonForcedOpen+": ")
}

// sharedPeriod identifies the half-open period of r: the epoch at which the
// fleet became half-open, or 0 when r is not half-open. Good probes keep
// the epoch; countGood adds one when they pass and the ramp (or adaptive
// recovery) starts, the only write that sets RampStart, so the period of a
// ramping r is its epoch minus one.
func sharedPeriod(r SharedState) uint64 {
	switch {
	case r.State != StateHalfOpen:
		return 0
	case !r.RampStart.IsZero() && r.Epoch > 0:
		return r.Epoch - 1
	}
	return r.Epoch
}

// countGood adds one good probe admitted in epoch to the shared count; the
// one that reaches the count needed closes the fleet (or starts its ramp).
// It returns false when the store is unreachable.
func (f *Fleet) countGood(epoch uint64) bool {
	b := f.b
	for range fleetMaxCASAttempts {
		f.mu.Lock()
		r, rev := f.rec, f.rev
		f.mu.Unlock()
		if r.State != StateHalfOpen || r.Epoch != epoch || !r.RampStart.IsZero() {
			return true // from an earlier period, or the probes already passed
		}
		now := b.cfg.Clock.Now()
		next := r
		next.Successes++
		next.By, next.UpdatedAt = f.cfg.Replica, now
		if next.Successes >= b.probesToPass() {
			next.Epoch++
			next.Reason = fmt.Sprintf("%d consecutive good probes across the fleet", next.Successes)
			if b.cfg.HalfOpenPolicy == HalfOpenRamp || b.cfg.HalfOpenPolicy == HalfOpenAdaptive {
				next.RampStart = now
			} else {
				next.State, next.Trips, next.Window = StateClosed, 0, r.Window
			}
		}
		written, retry := f.cas(next, rev)
		if written {
			return true
		}
		if !retry {
			return false
		}
	}
	return true
}

// applyLatest applies the latest shared state to the local breaker if it
// has not been applied yet.
func (f *Fleet) applyLatest() {
	f.applyMu.Lock() // applied in order, by the worker or the watch
	defer f.applyMu.Unlock()
	f.mu.Lock()
	r, rev := f.rec, f.rev
	key := appliedKey{rev: rev, epoch: r.Epoch, successes: r.Successes}
	if key == f.applied || rev == 0 {
		f.mu.Unlock()
		return
	}
	f.applied = key
	f.stats.Adopted++
	f.mu.Unlock()
	f.b.applyShared(r)
}

// applyShared brings the breaker to the shared state r without publishing
// (its transitions carry the reason prefix "fleet: "). It assumes nothing
// about the states in between: a store's watch may skip revisions.
func (b *Breaker) applyShared(r SharedState) {
	now := b.nowNs()
	b.mu.Lock()
	b.recoveryLocked()
	reason := fleetReasonPrefix + r.Reason
	switch r.State {
	case StateOpen:
		if r.Forced {
			b.forced = true
			if b.state != StateOpen {
				b.window, b.step = 0, 0
				b.enterLocked(StateOpen, now, reason, 0)
			} else {
				b.openUntil.Store(math.MaxInt64)
			}
			break
		}
		b.forced = false
		b.trips = r.Trips
		b.step = b.cfg.step(max(1, r.Trips))
		b.window = r.Window
		b.openUntilNs = b.ns(r.OpenUntil)
		b.hcHold = false
		if b.state != StateOpen {
			b.hcNext = now + int64(b.cfg.HealthCheckInterval)
			b.enterLocked(StateOpen, now, reason, r.Window)
		} else {
			b.openUntil.Store(b.openUntilNs)
		}
	case StateHalfOpen:
		b.forced = false
		b.trips = r.Trips
		period := sharedPeriod(r)
		if b.state != StateHalfOpen || (b.ho.period != 0 && period != 0 && b.ho.period != period) {
			// A half-open period other than ours (the revisions between may
			// never have reached us) starts afresh: the results of calls
			// admitted in ours are stale.
			b.enterHalfOpenLocked(now, reason)
		}
		if period != 0 {
			b.ho.period = period
		}
		if !r.RampStart.IsZero() && b.ho.stage == stageProbes &&
			(b.cfg.HalfOpenPolicy == HalfOpenRamp || b.cfg.HalfOpenPolicy == HalfOpenAdaptive) {
			b.ho.consec = max(b.ho.consec, r.Successes)
			b.probesPassedLocked(min(now, b.ns(r.RampStart)))
		}
	default:
		b.forced = false
		b.trips = r.Trips
		if b.state != StateClosed {
			b.enterLocked(StateClosed, now, reason, 0)
		}
	}
	b.advanceLocked(now)
	b.armLocked(now)
	b.unlockAndDispatch()
}

// Resync re-reads the shared state now (and retries a store that was
// unreachable), instead of waiting for ResyncInterval; with Inline it is
// the only way back from fallback besides the next transition. It returns
// whether the store answered.
func (f *Fleet) Resync() bool {
	f.mu.Lock()
	f.resync = true
	f.mu.Unlock()
	if f.cfg.Inline {
		f.step()
	} else {
		f.kick()
		ctx, cancel := f.opCtx()
		defer cancel()
		_, _, err := f.store.Load(ctx, f.name)
		return err == nil
	}
	return f.connected.Load()
}
