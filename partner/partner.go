package partner

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/floodgate-go/floodgate/breaker"
)

// The word of a partner: the calls in flight (bulkhead permits and
// holds) in bits 0-31, the evicted bit 32, and in bits 33-63 a sequence
// that every admission advances. An eviction is a compare-and-swap from a
// word read before the partner was judged evictable, so any admission in
// between makes it fail.
const (
	countMask  = 1<<32 - 1
	evictedBit = 1 << 32
	seqOne     = 1 << 33
	admitOne   = seqOne | 1
)

// Partner is one partner of a [Registry]: its key, its token, its breaker
// and its bulkhead. Get one with [Registry.Get]; it stays valid until it is
// evicted, after which [Partner.Acquire] returns [ErrEvicted] and the
// registry holds a new Partner for the key (created on its next use). All
// methods are safe for concurrent use.
type Partner struct {
	key, token  string
	b           *breaker.Breaker
	maxInFlight uint64
	reg         *Registry
	unlisten    func()
	fleet       *breaker.Fleet // nil without Config.Fleet
	// From the breaker's configuration, read once at creation.
	clock    breaker.Clock
	classify func(error) breaker.Outcome

	word atomic.Uint64
	// seen is the registry's sweep epoch at the last use; idleSince is the
	// time of the first sweep that found it unused (ns since the registry's
	// epoch), read and written by sweeps.
	seen      atomic.Uint64
	idleSince atomic.Int64
}

// Key returns the partner's key. It is untrusted input, as it came: quote
// it (or use [Partner.Token]) before logging it.
func (p *Partner) Key() string { return p.key }

// Token returns [Token] of the partner's key: its name in subjects,
// consumer names, KV keys and metric labels.
func (p *Partner) Token() string { return p.token }

// Breaker returns the partner's breaker. Read its state freely. Calls go
// through [Partner.Acquire] (or [Registry.Acquire]), which count them in
// the bulkhead and keep the partner from being evicted while they run;
// change the breaker's state ([breaker.Breaker.ForceOpen], ForceClose,
// Reset) inside [Registry.With], for the same reason.
func (p *Partner) Breaker() *breaker.Breaker { return p.b }

// Clock returns the clock of the partner's breaker (its
// [breaker.Breaker.Config] Clock: the wall clock when none was given), read
// at creation, so a caller can measure latency for [Lease.RecordAt] on the
// breaker's own time without copying its configuration.
func (p *Partner) Clock() breaker.Clock { return p.clock }

// Classifier returns the [breaker.Config.Classifier] of the partner's
// breaker, read at creation; nil when none was given (every error is then a
// failure).
func (p *Partner) Classifier() func(error) breaker.Outcome { return p.classify }

// MaxInFlight returns the partner's bulkhead size ([PartnerConfig.MaxInFlight]).
func (p *Partner) MaxInFlight() int { return int(p.maxInFlight) }

// InFlight returns the number of calls in flight now (leases not yet
// reported, and [Registry.With] holds).
func (p *Partner) InFlight() int { return int(p.word.Load() & countMask) }

// Evicted reports whether the partner was evicted from its registry.
func (p *Partner) Evicted() bool { return p.word.Load()&evictedBit != 0 }

// touch records a use for idle eviction: two loads, and a store at most once
// per sweep period.
func (p *Partner) touch() {
	if e := p.reg.epoch.Load(); p.seen.Load() != e {
		p.seen.Store(e)
	}
}

// hold counts one call in flight, without the bulkhead's cap when capped is
// false. It fails only with ErrEvicted or ErrBulkheadFull.
func (p *Partner) hold(capped bool) error {
	w := p.word.Add(admitOne)
	switch {
	case w&evictedBit != 0:
		p.word.Add(^uint64(0))
		return ErrEvicted
	case capped && w&countMask > p.maxInFlight:
		p.word.Add(^uint64(0))
		p.touch()
		return ErrBulkheadFull
	}
	p.touch()
	return nil
}

func (p *Partner) unhold() {
	p.word.Add(^uint64(0))
	p.touch()
}

// Acquire admits one call to the partner: first its bulkhead, then its
// breaker. It returns a [Lease] to report the call's outcome with, or an
// error: [ErrBulkheadFull] (MaxInFlight calls in flight; the breaker was
// not asked), a [*breaker.RejectedError] matching [breaker.ErrOpen] or
// [breaker.ErrProbeLimit], or [ErrEvicted] (use [Registry.Acquire], which
// looks the key up again). It does not allocate (but for the first probe
// lease of a P, from a sync.Pool) and reads the clock as
// [breaker.Breaker.Allow] does.
func (p *Partner) Acquire() (Lease, error) {
	if err := p.hold(true); err != nil {
		return Lease{}, err
	}
	permit, err := p.b.Allow()
	if err != nil {
		p.unhold()
		return Lease{}, err
	}
	if permit.IsProbe() {
		return probeLease(p, permit), nil
	}
	return Lease{p: p, permit: permit}, nil
}

// AcquireAt is [Partner.Acquire] at time now, which the caller read from
// the partner's [Partner.Clock] ([breaker.Breaker.AllowAt]): a caller that
// measures the call's latency on that clock reads it once for both. (The
// two are written out in full, not through a shared helper, to keep the
// stack of a call shallow: see the middleware package.)
func (p *Partner) AcquireAt(now time.Time) (Lease, error) {
	if err := p.hold(true); err != nil {
		return Lease{}, err
	}
	permit, err := p.b.AllowAt(now)
	if err != nil {
		p.unhold()
		return Lease{}, err
	}
	if permit.IsProbe() {
		return probeLease(p, permit), nil
	}
	return Lease{p: p, permit: permit}, nil
}

// probeLease is the lease of a probe's permit on p, with a guard. A
// closed-state permit tells its first report itself
// ([breaker.Permit.TryRecordAt]); a probe's cannot (an expired probe's
// first report is ignored too), so a probe's lease takes a guard (see
// guard). Acquire and AcquireAt call it only for a probe, to keep the
// stack of an admission shallow.
func probeLease(p *Partner, permit breaker.Permit) Lease {
	g := guards.Get().(*guard)
	return Lease{p: p, permit: permit, g: g, gen: g.gen.Load()}
}

// Lease is one call admitted by [Partner.Acquire] or [Registry.Acquire]:
// a slot of the partner's bulkhead and its breaker's [breaker.Permit].
// Report the outcome once, with Done, DoneAt, Record, RecordAt or Cancel:
// that reports to the breaker, then frees the bulkhead slot. Report before
// anything that may take long (the slot and the partner stay held until
// then). A second report is ignored, as is any report of the zero Lease;
// of reports racing each other, one takes effect. A Lease is a small
// value, copied freely; reporting does not allocate.
type Lease struct {
	p      *Partner
	permit breaker.Permit
	g      *guard // a probe's; nil for a closed-state permit
	gen    uint64
}

// guard makes a probe's lease report once: a report swaps gen to gen+1,
// then returns the guard to its pool, so a later report of the same lease
// finds another gen. gen only grows, so there is no ABA. A closed-state
// lease needs none: its permit's Try reports tell the first report.
type guard struct{ gen atomic.Uint64 }

var guards = sync.Pool{New: func() any { return new(guard) }}

// claim reports whether this is a probe lease's first report.
func (l Lease) claim() bool {
	return l.g != nil && l.g.gen.CompareAndSwap(l.gen, l.gen+1)
}

// finish frees a probe lease's guard and its bulkhead slot, after its
// first report.
func (l Lease) finish() {
	guards.Put(l.g)
	l.p.unhold()
}

// Partner returns the partner of the lease (nil for the zero Lease).
func (l Lease) Partner() *Partner { return l.p }

// IsProbe reports whether the call was admitted in the half-open state
// ([breaker.Permit.IsProbe]).
func (l Lease) IsProbe() bool { return l.permit.IsProbe() }

// Done reports the call's error to the breaker ([breaker.Permit.Done]) and
// frees the bulkhead slot.
func (l Lease) Done(err error) {
	if l.g == nil {
		if l.permit.TryDone(err) {
			l.p.unhold()
		}
	} else if l.claim() {
		l.permit.Done(err)
		l.finish()
	}
}

// DoneAt is [Lease.Done] at time now ([breaker.Permit.DoneAt]).
func (l Lease) DoneAt(now time.Time, err error) {
	if l.g == nil {
		if l.permit.TryDoneAt(now, err) {
			l.p.unhold()
		}
	} else if l.claim() {
		l.permit.DoneAt(now, err)
		l.finish()
	}
}

// Record reports an explicit outcome and latency ([breaker.Permit.Record])
// and frees the bulkhead slot.
func (l Lease) Record(o breaker.Outcome, latency time.Duration) {
	if l.g == nil {
		if l.permit.TryRecord(o, latency) {
			l.p.unhold()
		}
	} else if l.claim() {
		l.permit.Record(o, latency)
		l.finish()
	}
}

// RecordAt is [Lease.Record] at time now ([breaker.Permit.RecordAt]).
func (l Lease) RecordAt(now time.Time, o breaker.Outcome, latency time.Duration) {
	if l.g == nil {
		if l.permit.TryRecordAt(now, o, latency) {
			l.p.unhold()
		}
	} else if l.claim() {
		l.permit.RecordAt(now, o, latency)
		l.finish()
	}
}

// Cancel releases the lease without an outcome ([breaker.Permit.Cancel]):
// the call was never made, or was abandoned for a reason unrelated to the
// partner.
func (l Lease) Cancel() {
	if l.g == nil {
		if l.permit.TryRecord(breaker.OutcomeNeutral, 0) { // what Permit.Cancel reports
			l.p.unhold()
		}
	} else if l.claim() {
		l.permit.Cancel()
		l.finish()
	}
}
