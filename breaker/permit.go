package breaker

import (
	"fmt"
	"time"
)

// probeFlag marks the tag of a half-open permit, whose tag is its ledger id.
const probeFlag = 1 << 63

// Permit is the admission of one call by [Breaker.Allow]. Report the call's
// outcome once with Done, DoneAt, Record, RecordAt or Cancel. A Permit is a
// small value: it is returned and copied by value and reporting does not
// allocate. Reporting a permit a second time is ignored, however many
// permits are in flight. A result reported after the breaker changed state
// (a new generation, compared on all 64 bits) is discarded and counted as
// stale. The zero Permit (returned with a rejection) ignores reports. The
// Try forms (TryDone, TryDoneAt, TryRecord, TryRecordAt) also tell whether
// the report released the permit, for a caller that must act once per
// call (package partner frees a bulkhead slot).
type Permit struct {
	// Four fields, so the compiler keeps a Permit in registers.
	b     *Breaker
	slot  *slot  // closed: the permit's slot (slots.go); nil for a probe
	tag   uint64 // closed: expected slot word; half-open: probeFlag | ledger id
	start int64  // admission time, ns since the breaker's epoch, or noTime
}

// IsProbe reports whether the call was admitted in the half-open state, as a
// probe or as part of a ramp or adaptive share.
func (p Permit) IsProbe() bool { return p.b != nil && p.tag&probeFlag != 0 }

// Done reports the call's error: [Config.Classifier] decides the outcome
// (by default nil is a success, any error, context.Canceled included, a
// failure) and the latency is the clock's time since admission. In the
// closed state, unless SlowCallRateThreshold > 0 or the window is time-based,
// Done reads no clock and judges no latency.
func (p Permit) Done(err error) {
	b := p.b
	if b == nil {
		return
	}
	o, now, lat := p.judge(b, err)
	b.report(p, now, o, lat)
}

// judge classifies err and, for a probe or a time-based closed window,
// reads the clock and the latency since admission (else noTime and
// unknownLatency): what Done and TryDone report.
func (p Permit) judge(b *Breaker, err error) (o Outcome, now int64, lat time.Duration) {
	o, now, lat = b.classify(err), noTime, unknownLatency
	if p.tag&probeFlag != 0 || b.closedTimed {
		now = b.nowNs()
		if p.start != noTime {
			lat = max(0, time.Duration(now-p.start))
		}
	}
	return o, now, lat
}

// DoneAt is [Permit.Done] at time now; the latency is now minus the
// admission time.
func (p Permit) DoneAt(now time.Time, err error) {
	b := p.b
	if b == nil {
		return
	}
	n := b.ns(now)
	lat := unknownLatency
	if p.start != noTime {
		lat = max(0, time.Duration(n-p.start))
	}
	b.report(p, n, b.classify(err), lat)
}

// Record reports an explicit outcome and latency (negative latencies count
// as 0). The clock is read only when the breaker needs the time.
func (p Permit) Record(o Outcome, latency time.Duration) {
	b := p.b
	if b == nil {
		return
	}
	now := int64(noTime)
	if p.tag&probeFlag != 0 || b.timeWindow {
		now = b.nowNs()
	}
	b.report(p, now, o, max(0, latency))
}

// RecordAt is [Permit.Record] at time now.
func (p Permit) RecordAt(now time.Time, o Outcome, latency time.Duration) {
	b := p.b
	if b == nil {
		return
	}
	b.report(p, b.ns(now), o, max(0, latency))
}

// TryRecordAt is [Permit.RecordAt] that reports whether this report
// released the permit: for a closed-state permit, true for exactly one
// report, the first (of several racing ones, the one that took effect),
// and false for every other; false for the zero Permit. For a probe
// ([Permit.IsProbe]) it is false also for the first report when the probe
// had expired ([Config.MaxProbeWait], which counted it a failure), so a
// caller that must act once per permit cannot tell a probe's first report
// by it. It costs a compare-and-swap where RecordAt's closed fast path
// stores. Like RecordAt, it is safe for concurrent use.
func (p Permit) TryRecordAt(now time.Time, o Outcome, latency time.Duration) bool {
	b := p.b
	if b == nil {
		return false
	}
	return b.reportOnce(p, b.ns(now), o, max(0, latency))
}

// TryRecord is [Permit.Record] that reports whether this report released
// the permit (see [Permit.TryRecordAt]).
func (p Permit) TryRecord(o Outcome, latency time.Duration) bool {
	b := p.b
	if b == nil {
		return false
	}
	now := int64(noTime)
	if p.tag&probeFlag != 0 || b.timeWindow {
		now = b.nowNs()
	}
	return b.reportOnce(p, now, o, max(0, latency))
}

// TryDone is [Permit.Done] that reports whether this report released the
// permit (see [Permit.TryRecordAt]).
func (p Permit) TryDone(err error) bool {
	b := p.b
	if b == nil {
		return false
	}
	o, now, lat := p.judge(b, err)
	return b.reportOnce(p, now, o, lat)
}

// TryDoneAt is [Permit.DoneAt] that reports whether this report released
// the permit (see [Permit.TryRecordAt]).
func (p Permit) TryDoneAt(now time.Time, err error) bool {
	b := p.b
	if b == nil {
		return false
	}
	n := b.ns(now)
	lat := unknownLatency
	if p.start != noTime {
		lat = max(0, time.Duration(n-p.start))
	}
	return b.reportOnce(p, n, b.classify(err), lat)
}

// Cancel releases the permit without an outcome (like OutcomeNeutral): a
// cancelled probe frees its slot and counts neither way. Use it when the call
// was never made, or was abandoned for a reason unrelated to the dependency
// (shutdown). A probe cancelled because it timed out is a failure: report it
// with Done.
func (p Permit) Cancel() { p.Record(OutcomeNeutral, 0) }

// closedPermit admits a closed-state call in generation gen.
func (b *Breaker) closedPermit(gen uint64, start int64) Permit {
	s, tag := b.slots.claim(gen)
	return Permit{b: b, slot: s, tag: tag, start: start}
}

func (b *Breaker) classify(err error) Outcome {
	if b.classifier != nil {
		return b.classifier(err)
	}
	if err == nil {
		return OutcomeSuccess
	}
	return OutcomeFailure
}

// report is the closed fast path: a fast success of the current generation,
// once the window holds MinimumCalls, only releases the permit's slot (no
// lock, no read-modify-write). Everything else takes the locked path.
func (b *Breaker) report(p Permit, now int64, o Outcome, lat time.Duration) {
	if s := p.slot; s != nil && o == OutcomeSuccess && lat <= b.slowNs {
		// A sequential second report finds the word changed and is ignored.
		// Two reports of one permit racing each other store the same word;
		// only if they also race a new claim of the slot can one success go
		// uncounted.
		if s.w.Load() != p.tag {
			return
		}
		if per := b.per.Load(); per.warm.Load() && per.gen == s.gen().Load() &&
			(!b.timeWindow || floorDiv(now, b.cw.width) == b.curEpoch.Load()) {
			storeRelease(&s.w, p.tag+1)
			return
		}
	}
	b.reportSlow(p, now, o, lat)
}

// reportOnce is report that reports whether it released the permit (see
// [Permit.TryRecordAt]): its closed fast path releases the slot by
// compare-and-swap, so of two racing reports exactly one wins.
func (b *Breaker) reportOnce(p Permit, now int64, o Outcome, lat time.Duration) bool {
	if s := p.slot; s != nil && o == OutcomeSuccess && lat <= b.slowNs {
		if s.w.Load() != p.tag {
			return false
		}
		if per := b.per.Load(); per.warm.Load() && per.gen == s.gen().Load() &&
			(!b.timeWindow || floorDiv(now, b.cw.width) == b.curEpoch.Load()) {
			return s.w.CompareAndSwap(p.tag, p.tag+1)
		}
	}
	return b.reportSlow(p, now, o, lat)
}

// reportSlow is report's locked path; it reports whether it released the
// permit.
func (b *Breaker) reportSlow(p Permit, now int64, o Outcome, lat time.Duration) (released bool) {
	b.mu.Lock()
	if now == noTime {
		now = b.nowNs()
	}
	if p.tag&probeFlag != 0 {
		released = b.reportHalfOpenLocked(p, now, o, lat)
	} else {
		released = b.reportClosedLocked(p, now, o, lat)
	}
	b.armLocked(now)
	b.unlockAndDispatch()
	if f := b.fleet.Load(); f != nil && p.tag&probeFlag != 0 { // [fleet hook] free the probe's slot
		f.probeDone(p, o, lat)
	}
	return released
}

// release frees a closed permit's slot, counting one outcome; false means
// the permit was already reported. Requires mu held.
func (b *Breaker) release(p Permit) bool {
	if !p.slot.w.CompareAndSwap(p.tag, p.tag+1) {
		return false
	}
	b.sumCache++
	return true
}

// periodTotalLocked is the number of outcomes counted in the current closed
// period.
func (b *Breaker) periodTotalLocked() int64 {
	return int64(b.outcomesLocked() - b.uncounted - b.windowStart)
}

func (b *Breaker) rotateLocked(now, total int64) {
	b.curEpoch.Store(b.cw.rotate(now, total))
}

// reportClosedLocked reports whether it released p's slot. Requires mu held.
func (b *Breaker) reportClosedLocked(p Permit, now int64, o Outcome, lat time.Duration) bool {
	if p.slot.w.Load() != p.tag {
		return false // reported already
	}
	// The slot is the permit's while its word is the tag (it never repeats),
	// so gen is the permit's unless release fails below.
	if b.state != StateClosed || p.slot.gen().Load() != b.gen {
		if !b.release(p) {
			return false
		}
		b.uncounted++
		b.stale.Add(1)
		return true
	}
	if b.timeWindow {
		b.rotateLocked(now, b.periodTotalLocked())
	}
	if !b.release(p) {
		return false
	}
	if o != OutcomeSuccess && o != OutcomeFailure {
		b.uncounted++ // neutral: not counted at all
		return true
	}
	total := b.periodTotalLocked()
	fail := o == OutcomeFailure
	slow := lat > b.slowNs
	b.cw.add(total, fail, slow)
	b.evaluateClosedLocked(now, total)
	return true
}

// evaluateClosedLocked judges the window and trips or marks it warm. It runs
// for every failure and slow call, and for successes until the window holds
// MinimumCalls: once it does, a success can only lower the rates.
func (b *Breaker) evaluateClosedLocked(now, total int64) {
	c := b.cfg
	calls, fails, slows := b.cw.counts(total)
	if c.ConsecutiveFailures > 0 && b.cw.lastFailPos == total && b.cw.run >= c.ConsecutiveFailures {
		b.tripLocked(now, fmt.Sprintf("consecutive failures %d >= %d", b.cw.run, c.ConsecutiveFailures))
		return
	}
	warm := calls >= c.MinimumCalls
	if warm {
		if r := float64(fails) / float64(calls); r >= c.FailureRateThreshold {
			b.tripLocked(now, fmt.Sprintf("failure rate %.2f >= %.2f over %d calls", r, c.FailureRateThreshold, calls))
			return
		}
		if c.SlowCallRateThreshold > 0 {
			if r := float64(slows) / float64(calls); r >= c.SlowCallRateThreshold {
				b.tripLocked(now, fmt.Sprintf("slow-call rate %.2f >= %.2f over %d calls", r, c.SlowCallRateThreshold, calls))
				return
			}
		}
	}
	if warm != b.per.Load().warm.Load() {
		b.publishLocked(warm)
	}
}
