package partner

import (
	"errors"
	"fmt"
	"iter"
	"sync"
	"sync/atomic"
	"time"

	"github.com/floodgate-go/floodgate/breaker"
)

// Registry holds a [Partner] per partner key, created on first use from
// [Config.Template] and [Config.Override], at most [Config.MaxPartners] of
// them, evicting idle ones. See the package documentation for the model.
// Create one with [New]; the zero value is not usable. All methods are safe
// for concurrent use.
type Registry struct {
	cfg   Config
	tmpl  *breaker.Template // Template.Breaker, shared by every partner Override leaves alone (Override nil)
	clock breaker.Clock
	start time.Time // the origin of Partner.idleSince

	m sync.Map // key string -> *Partner; read without a lock

	// epoch counts sweeps: a partner used since the last sweep has seen
	// equal to it (see Partner.touch).
	epoch atomic.Uint64

	mu     sync.Mutex // serialises inserts and deletes of m, and n
	n      int
	closed bool

	sweepMu   sync.Mutex // one sweep at a time
	lastSweep atomic.Int64
}

// New returns an empty registry. It returns an error wrapping
// [ErrInvalidConfig] ("invalid config: …") when cfg is invalid. It starts
// no goroutine.
func New(cfg Config) (*Registry, error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("invalid config: %w", err)
	}
	r := &Registry{cfg: cfg, clock: cfg.Clock}
	if r.clock == nil {
		r.clock = wallClock{}
	}
	if cfg.Override == nil {
		bc := cfg.Template.Breaker
		if bc.Clock == nil {
			bc.Clock = cfg.Clock
		}
		t, err := breaker.NewTemplate(bc)
		if err != nil { // validated above
			return nil, fmt.Errorf("invalid config: %w: Template.Breaker: %w", ErrInvalidConfig, err)
		}
		r.tmpl = t
	}
	r.start = r.clock.Now()
	return r, nil
}

// Get returns the partner of key, creating it on first use. Looking up a
// partner that exists takes no lock, does not allocate and reads no clock.
//
// Creating one reads the clock, may first sweep for idle partners (see
// [Config.SweepInterval]) and fails with: [ErrNoKey] for the empty key,
// [ErrKeyTooLong] beyond [Config.MaxKeyLen], [ErrPartnerLimit] when the
// registry is full and nothing can be evicted, an error wrapping
// [ErrInvalidConfig] when [Config.Override] made an invalid configuration,
// or [ErrClosed].
//
// The Partner returned may be evicted once idle: hold it only for the call
// at hand, and use [Registry.Acquire] to make a call.
func (r *Registry) Get(key string) (*Partner, error) {
	if v, ok := r.m.Load(key); ok {
		p := v.(*Partner)
		p.touch()
		return p, nil
	}
	return r.create(key)
}

// Lookup returns the partner of key if the registry holds it, without
// creating it or counting it as a use (for status listings).
func (r *Registry) Lookup(key string) (*Partner, bool) {
	if v, ok := r.m.Load(key); ok {
		return v.(*Partner), true
	}
	return nil, false
}

// Acquire admits one call to the partner of key: [Registry.Get], then
// [Partner.Acquire], looking the key up again if the partner was evicted
// in between. It returns the partner (nil only for the errors of Get) and
// a [Lease] to report the outcome with; or an error from Get (for which
// nothing was attempted, see [ErrPartnerLimit]), [ErrBulkheadFull], or
// the breaker's rejection (a [*breaker.RejectedError]). For a partner that
// exists, it takes no lock and does not allocate.
func (r *Registry) Acquire(key string) (*Partner, Lease, error) {
	p, err := r.Get(key)
	for err == nil {
		var l Lease
		if l, err = p.Acquire(); !errors.Is(err, ErrEvicted) {
			return p, l, err
		}
		p, err = r.create(key) // waits for the eviction to finish
	}
	return nil, Lease{}, err
}

// With runs fn with the partner of key (created if need be) held as one
// call in flight (beyond its bulkhead's cap if need be, so an operator is
// never turned away), so it is not evicted meanwhile:
// change its breaker's state there (ForceOpen, ForceClose, Reset). It
// returns the errors of [Registry.Get].
func (r *Registry) With(key string, fn func(p *Partner)) error {
	p, err := r.Get(key)
	for err == nil {
		if err = p.hold(false); err == nil {
			defer p.unhold()
			fn(p)
			return nil
		}
		p, err = r.create(key)
	}
	return err
}

// Len returns the number of partners held.
func (r *Registry) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n
}

// All returns the partners held, in no particular order (for status
// listings). It does not count as a use.
func (r *Registry) All() iter.Seq[*Partner] {
	return func(yield func(*Partner) bool) {
		r.m.Range(func(_, v any) bool { return yield(v.(*Partner)) })
	}
}

// Close empties the registry: every partner is marked evicted and its
// breaker's timers are stopped ([breaker.Breaker.Stop]); Get and Acquire
// then return [ErrClosed]. Leases already taken can still be reported.
// OnEvict is not called. Close is idempotent.
func (r *Registry) Close() {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return
	}
	r.closed = true
	var ps []*Partner
	r.m.Range(func(k, v any) bool {
		ps = append(ps, v.(*Partner))
		r.m.Delete(k)
		return true
	})
	r.n = 0
	r.mu.Unlock()
	for _, p := range ps {
		p.word.Or(evictedBit)
		p.retire()
	}
}

func (r *Registry) now() int64 { return int64(r.clock.Now().Sub(r.start)) }

// create returns the partner of key, creating it if the registry does not
// hold one (or holds one being evicted: the lock waits for the eviction).
func (r *Registry) create(key string) (*Partner, error) {
	switch {
	case key == "":
		return nil, ErrNoKey
	case len(key) > r.cfg.MaxKeyLen:
		return nil, ErrKeyTooLong
	}
	now := r.now()
	if p, err := r.existing(key); p != nil || err != nil {
		return p, err
	}
	if now-r.lastSweep.Load() >= int64(r.cfg.SweepInterval) {
		r.sweep(now)
	}
	if p, err := r.existing(key); p != nil || err != nil {
		return p, err
	}
	if r.full() {
		return nil, ErrPartnerLimit
	}

	p, err := r.newPartner(key, now)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	if v, ok := r.m.Load(key); ok || r.closed || r.n >= r.cfg.MaxPartners {
		r.mu.Unlock()
		p.retire()
		switch {
		case ok:
			q := v.(*Partner)
			q.touch()
			return q, nil
		case r.isClosed():
			return nil, ErrClosed
		}
		return nil, ErrPartnerLimit
	}
	r.m.Store(key, p)
	r.n++
	r.mu.Unlock()
	return p, nil
}

// existing returns the partner of key if held, under the lock (so not one
// being evicted), or ErrClosed.
func (r *Registry) existing(key string) (*Partner, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, ErrClosed
	}
	if v, ok := r.m.Load(key); ok {
		p := v.(*Partner)
		p.touch()
		return p, nil
	}
	return nil, nil
}

func (r *Registry) full() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n >= r.cfg.MaxPartners
}

func (r *Registry) isClosed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.closed
}

// newPartner builds the partner of key, not yet in the registry. It calls
// Override and creates the breaker without the registry's lock.
func (r *Registry) newPartner(key string, now int64) (*Partner, error) {
	token := Token(key)
	b, maxInFlight, err := r.newBreaker(key, token)
	if err != nil {
		return nil, err
	}
	bc := b.Config()
	p := &Partner{key: key, token: token, b: b, maxInFlight: uint64(maxInFlight), reg: r,
		clock: bc.Clock, classify: bc.Classifier}
	p.seen.Store(r.epoch.Load())
	p.idleSince.Store(now)
	if fn := r.cfg.OnTransition; fn != nil {
		p.unlisten = b.AddListener(func(t breaker.Transition) { fn(p, t) })
	}
	if err := r.join(p); err != nil {
		p.retire()
		return nil, err
	}
	return p, nil
}

// newBreaker makes the breaker of a new partner, named token, and returns
// its bulkhead size: from the shared template without Override (every
// partner's breaker shares the template's configuration, see
// [breaker.Template]), else from the partner's own configuration.
func (r *Registry) newBreaker(key, token string) (*breaker.Breaker, int, error) {
	if r.tmpl != nil {
		return r.tmpl.New(token), r.cfg.Template.MaxInFlight, nil
	}
	pc := r.cfg.Template
	pc.Breaker.Name = token
	if pc.Breaker.Clock == nil {
		pc.Breaker.Clock = r.cfg.Clock
	}
	r.cfg.Override(key, &pc)
	pc.setDefaults()
	if err := pc.validate("partner " + token + ": "); err != nil {
		return nil, 0, err
	}
	b, err := breaker.New(pc.Breaker)
	if err != nil { // validated above
		return nil, 0, fmt.Errorf("%w: partner %s: Breaker: %w", ErrInvalidConfig, token, err)
	}
	return b, pc.MaxInFlight, nil
}

// retire stops a partner that left (or never entered) the registry: it
// leaves its fleet, then stops its breaker.
func (p *Partner) retire() {
	if p.fleet != nil {
		p.fleet.Leave()
	}
	if p.unlisten != nil {
		p.unlisten()
	}
	p.b.Stop()
}
