package breaker

import (
	"fmt"
	"math"
	"time"
)

type stage uint8

const (
	stageProbes   stage = iota // capped (or single) probes
	stageRamp                  // ramp policy, after the probes passed
	stageAdaptive              // adaptive policy, after the probes passed
)

// halfOpen is the state of one half-open period. Guarded by the breaker's
// lock.
type halfOpen struct {
	stage  stage
	since  int64  // entered half-open
	consec int    // consecutive good probes
	period uint64 // in a fleet, the shared half-open period it belongs to (0: unknown)

	// ramp and adaptive
	credit float64 // admission credit: each offered call adds share
	share  float64
	calls  int // in the current step or interval
	fails  int
	slows  int

	// ramp
	stepIdx   int
	stepStart int64
	rampStart int64

	// adaptive
	aepoch     uint32 // grows on every change of share
	epochCalls int    // outcomes of calls admitted at the current share
	epochFails int
	aphase     adaptPhase
	wmax       float64 // goodput share at the last loss, 0 = no loss yet
	held       int     // clean intervals held since the last loss
	latSum     time.Duration
	latN       int
	longLat    float64
	minCalls   int // outcomes at the minimum share
	minFails   int
}

func (b *Breaker) probeCap() int {
	if b.cfg.HalfOpenPolicy == HalfOpenSingleProbe {
		return 1
	}
	return b.cfg.ProbeConcurrency
}

func (b *Breaker) probesToPass() int {
	if b.cfg.HalfOpenPolicy == HalfOpenSingleProbe {
		return 1
	}
	return b.cfg.SuccessesToClose
}

func (b *Breaker) admitHalfOpenLocked(now int64) (Permit, error) {
	h := &b.ho
	if h.stage == stageProbes {
		if b.led.open >= b.probeCap() {
			return Permit{}, b.errProbe
		}
	} else {
		h.credit += h.share
		if h.credit < 1-shareEpsilon {
			return Permit{}, b.errThrottle
		}
		h.credit--
	}
	id := b.led.add(now, h.aepoch)
	return Permit{b: b, tag: probeFlag | id, start: now}, nil
}

// reportHalfOpenLocked reports whether it released the probe's ledger
// entry: false when it was reported before or expired. Requires mu held.
func (b *Breaker) reportHalfOpenLocked(p Permit, now int64, o Outcome, lat time.Duration) bool {
	id := p.tag &^ probeFlag
	if b.state == StateHalfOpen && id >= b.led.liveFrom {
		b.advanceLocked(now) // an expiry may end the period first
	}
	e, ok, live := b.led.finish(id)
	if !ok {
		return false // reported before, or expired (already counted as a failure)
	}
	if !live {
		b.stale.Add(1) // admitted in an earlier half-open period
		return true
	}
	switch o {
	case OutcomeSuccess:
		if lat > b.slowNs {
			b.halfOpenOutcomeLocked(now, e, false, true, lat,
				fmt.Sprintf("slow probe: %v > SlowCallDuration %v", lat, b.slowNs))
		} else {
			b.halfOpenOutcomeLocked(now, e, true, false, lat, "")
		}
	case OutcomeFailure:
		b.halfOpenOutcomeLocked(now, e, false, false, lat, "probe failed")
	default:
		// neutral (or cancelled): the slot is free, nothing is counted, and
		// the period goes on as if the call had never been admitted
	}
	return true
}

// halfOpenOutcomeLocked applies one counted outcome of a half-open admission
// (reported, or expired after MaxProbeWait): the only evidence that moves a
// half-open breaker. reason explains a bad one.
func (b *Breaker) halfOpenOutcomeLocked(now int64, e entry, good, slow bool, lat time.Duration, reason string) {
	h := &b.ho
	switch h.stage {
	case stageProbes:
		if !good {
			b.tripLocked(now, reason)
			return
		}
		h.consec++
		if h.consec >= b.probesToPass() {
			b.probesPassedLocked(now)
		}
	case stageRamp:
		h.count(good, slow)
		if !good && h.calls >= b.cfg.RampMinCalls {
			if r := float64(h.fails) / float64(h.calls); r >= b.cfg.RampMaxFailureRate {
				b.tripLocked(now, fmt.Sprintf("ramp at %.0f%%: failure rate %.2f >= %.2f over %d calls",
					100*h.share, r, b.cfg.RampMaxFailureRate, h.calls))
			}
		}
	case stageAdaptive:
		b.adaptiveOutcomeLocked(now, e, good, slow, lat)
	}
}

func (h *halfOpen) count(good, slow bool) {
	h.calls++
	if !good {
		h.fails++
	}
	if slow {
		h.slows++
	}
}

func (b *Breaker) probesPassedLocked(now int64) {
	h := &b.ho
	n := h.consec
	switch b.cfg.HalfOpenPolicy {
	case HalfOpenRamp:
		h.stage = stageRamp
		h.rampStart, h.stepStart, h.stepIdx = now, now, 0
		h.share = b.rampShare(0)
		h.credit = 0
		h.calls, h.fails, h.slows = 0, 0, 0
	case HalfOpenAdaptive:
		h.stage = stageAdaptive
		h.share = b.cfg.AdaptiveMinShare
		h.credit = 0
		h.aphase, h.wmax, h.held = adaptSearch, 0, 0
		h.aepoch++
		h.stepStart = now
		h.calls, h.fails, h.slows = 0, 0, 0
	default:
		b.closeLocked(now, fmt.Sprintf("%d consecutive good probes", n))
	}
}

// rampShare returns the share of the ramp elapsed ns after it started (curve
// form) or of the current step.
func (b *Breaker) rampShare(elapsed int64) float64 {
	c := b.cfg
	if c.RampWindow <= 0 {
		return c.RampSteps[b.ho.stepIdx]
	}
	t := max(float64(elapsed), 1) / float64(c.RampWindow)
	return min(1, max(c.RampMinShare, math.Pow(t, 1/c.RampAggression)))
}

// advanceHalfOpenLocked applies expiries, ramp steps and adaptive intervals
// due by now. Time alone never reopens: with no admission outstanding, a
// half-open breaker stays half-open however long no call comes.
func (b *Breaker) advanceHalfOpenLocked(now int64) {
	c := b.cfg
	gen := b.gen
	for b.gen == gen {
		e, ok := b.led.expireOne(now - int64(c.MaxProbeWait))
		if !ok {
			break
		}
		b.halfOpenOutcomeLocked(now, e, false, false, 0,
			fmt.Sprintf("probe not reported within MaxProbeWait %v", c.MaxProbeWait))
	}
	if b.gen != gen {
		return
	}
	h := &b.ho
	switch h.stage {
	case stageRamp:
		if c.RampWindow > 0 {
			h.share = b.rampShare(now - h.rampStart)
		}
		if now-h.stepStart < int64(c.RampStepDuration) && (c.RampWindow <= 0 || now-h.rampStart < int64(c.RampWindow)) {
			return
		}
		if h.calls > 0 {
			if r := float64(h.fails) / float64(h.calls); r >= c.RampMaxFailureRate {
				b.tripLocked(now, fmt.Sprintf("ramp at %.0f%%: failure rate %.2f >= %.2f over %d calls",
					100*h.share, r, c.RampMaxFailureRate, h.calls))
				return
			}
		}
		if c.RampWindow > 0 {
			if now-h.rampStart >= int64(c.RampWindow) {
				b.closeLocked(now, "ramp completed")
				return
			}
		} else {
			if h.stepIdx == len(c.RampSteps)-1 {
				b.closeLocked(now, "ramp completed")
				return
			}
			h.stepIdx++
			h.share = c.RampSteps[h.stepIdx]
		}
		h.stepStart = now
		h.calls, h.fails, h.slows = 0, 0, 0
	case stageAdaptive:
		if now-h.stepStart >= int64(c.AdaptiveInterval) {
			b.adaptiveIntervalLocked(now)
		}
	}
}

func (b *Breaker) halfOpenDeadlineLocked() int64 {
	c := b.cfg
	h := &b.ho
	d := int64(noTime)
	if e := b.led.oldestLive(); e != nil {
		d = e.start + int64(c.MaxProbeWait)
	}
	switch h.stage {
	case stageRamp:
		d = minTime(d, h.stepStart+int64(c.RampStepDuration))
		if c.RampWindow > 0 {
			d = minTime(d, h.rampStart+int64(c.RampWindow))
		}
	case stageAdaptive:
		d = minTime(d, h.stepStart+int64(c.AdaptiveInterval))
	}
	return d
}

// ---- adaptive ----

// adaptPhase is the phase of the adaptive policy (see [HalfOpenAdaptive]).
type adaptPhase uint8

const (
	// adaptSearch: the share doubles every clean interval, from the minimum
	// share or after a clean probe (capacity has grown).
	adaptSearch adaptPhase = iota
	// adaptHold: after a loss, the share holds at AdaptiveBackoff × the
	// goodput measured at the loss for AdaptiveHold clean intervals.
	adaptHold
	// adaptProbe: one interval just above the last loss level.
	adaptProbe
)

// adaptiveGrowth is the factor by which a clean interval multiplies the
// share while searching: TCP slow start's doubling.
const adaptiveGrowth = 2

const shareEpsilon = 1e-9

// adaptiveFloorDivisor: below the minimum share the adaptive share goes no
// lower than AdaptiveMinShare / adaptiveFloorDivisor (1 % by default). A
// dependency that serves less than that is treated as down.
const adaptiveFloorDivisor = 10

func (b *Breaker) atMinShare() bool { return b.ho.share <= b.cfg.AdaptiveMinShare+shareEpsilon }

func (b *Breaker) adaptiveFloor() float64 { return b.cfg.AdaptiveMinShare / adaptiveFloorDivisor }

// adaptiveOutcomeLocked judges one outcome. Only the calls admitted at the
// current share count (one decrease per share, like TCP's one reduction per
// window: the in-flight consequences of an earlier share do not cut it
// again). Above the last loss level (probing, or searching after a clean
// probe) one failure is a loss: it confirms a capacity already measured.
// Elsewhere a loss needs evidence of a rate: two failures or more, and a
// failure rate above AdaptiveTolerance, so sporadic errors do not hold the
// share down. At the minimum share a loss backs off below it only when
// some calls still succeed (the capacity is below the minimum share);
// failures that persist there reopen the breaker. Below the minimum share a
// loss backs off down to the floor, where failures with no success reopen.
func (b *Breaker) adaptiveOutcomeLocked(now int64, e entry, good, slow bool, lat time.Duration) {
	c := b.cfg
	h := &b.ho
	h.count(good, slow)
	if good && lat >= 0 {
		h.latSum += lat
		h.latN++
	}
	if e.aepoch != h.aepoch {
		return
	}
	h.epochCalls++
	if !good {
		h.epochFails++
	}
	if b.atMinShare() {
		h.minCalls++
		if !good {
			h.minFails++
			loss := float64(h.epochFails) / float64(h.epochCalls)
			served := h.epochCalls > h.epochFails
			below := h.share < c.AdaptiveMinShare-shareEpsilon
			atFloor := h.share <= b.adaptiveFloor()+shareEpsilon
			switch {
			case h.epochFails < 2 || loss <= c.AdaptiveTolerance:
			case (served || below) && !atFloor:
				b.adaptiveLossLocked(now, loss)
				return
			case !served && atFloor:
				b.tripLocked(now, fmt.Sprintf("adaptive: %d failures and no success at the floor share %.1f%%",
					h.epochFails, 100*h.share))
				return
			}
		}
		if h.minCalls >= c.MinimumCalls {
			if r := float64(h.minFails) / float64(h.minCalls); r >= c.FailureRateThreshold {
				b.tripLocked(now, fmt.Sprintf("adaptive: failure rate %.2f >= %.2f persists at minimum share %.0f%%",
					r, c.FailureRateThreshold, 100*c.AdaptiveMinShare))
			}
		}
		return
	}
	if good {
		// Far above the last loss level (at least twice it, after a clean
		// probe), MinimumCalls clean outcomes are evidence enough to double
		// again: an overload that large shows at once, unless a burst
		// allowance absorbs it, and then the failures that follow back off
		// at the first one. So the share reaches 100 % sooner once capacity
		// returns. Closing still takes a whole clean interval at 100 %.
		if h.aphase == adaptSearch && h.wmax > 0 && h.share >= adaptiveGrowth*h.wmax-shareEpsilon &&
			h.share < 1-shareEpsilon && h.epochFails == 0 && h.epochCalls >= c.MinimumCalls {
			b.adaptiveIntervalLocked(now)
		}
		return
	}
	loss := float64(h.epochFails) / float64(h.epochCalls)
	aboveLoss := h.wmax > 0 && h.share > h.wmax+shareEpsilon
	if aboveLoss || (h.epochFails >= 2 && loss > c.AdaptiveTolerance) {
		b.adaptiveLossLocked(now, loss)
	}
}

// adaptiveLossLocked backs off after a loss (or a latency rise, with loss
// 0). The loss level becomes the goodput just measured, share × (1-loss):
// while searching, no lower than the share before the last doubling, which
// was served cleanly; while probing, the level probed above, which the
// failure confirmed. The share holds at AdaptiveBackoff times it, a level
// the dependency served without loss.
func (b *Breaker) adaptiveLossLocked(now int64, loss float64) {
	c := b.cfg
	h := &b.ho
	good := h.share * (1 - loss)
	switch h.aphase {
	case adaptSearch:
		good = max(good, h.share/adaptiveGrowth)
	case adaptProbe:
		good = h.wmax
	}
	// Only a loss at or below the minimum share, where some calls were
	// served, shows a capacity below it.
	floor := c.AdaptiveMinShare
	if b.atMinShare() {
		floor = b.adaptiveFloor()
	}
	h.wmax = max(good, floor)
	h.aphase = adaptHold
	h.held = 0
	h.setShare(max(floor, h.wmax*c.AdaptiveBackoff))
	h.stepStart = now
	h.calls, h.fails, h.slows, h.latSum, h.latN = 0, 0, 0, 0, 0
}

func (h *halfOpen) setShare(s float64) {
	h.share = min(1, s)
	h.aepoch++
	h.epochCalls, h.epochFails = 0, 0
	h.minCalls, h.minFails = 0, 0
}

// adaptiveIntervalLocked ends an interval. An interval is clean when it saw
// calls, its failure rate is within AdaptiveTolerance and the mean latency
// of its successes is within AdaptiveLatencyRatio of their long-run mean (a
// rise backs off as a loss does). A clean interval at 100 % closes.
// Otherwise a clean interval doubles the share while searching; while
// holding, the AdaptiveHold-th clean one moves the share to the last loss
// level plus AdaptiveIncrease (a probe); a clean probe means the capacity
// has grown, and the search resumes from there, doubling (at twice the loss
// level and more, an interval also ends after MinimumCalls clean outcomes:
// see adaptiveOutcomeLocked).
func (b *Breaker) adaptiveIntervalLocked(now int64) {
	c := b.cfg
	h := &b.ho
	clean := h.calls > 0 && float64(h.fails) <= c.AdaptiveTolerance*float64(h.calls)
	if c.AdaptiveLatencyRatio > 0 && h.latN > 0 {
		mean := float64(h.latSum) / float64(h.latN)
		slow := h.longLat > 0 && h.latN >= 3 && mean > c.AdaptiveLatencyRatio*h.longLat
		// The long-run mean follows every interval, so a lasting shift of
		// latency becomes the new normal instead of holding the share down.
		if h.longLat == 0 {
			h.longLat = mean
		} else {
			h.longLat = 0.8*h.longLat + 0.2*mean
		}
		if clean && slow && !b.atMinShare() {
			// Latency is a congestion signal, not an error: at the minimum
			// share it neither holds the share down nor reopens.
			b.adaptiveLossLocked(now, 0)
			return
		}
	}
	if clean {
		if h.share >= 1-shareEpsilon {
			b.closeLocked(now, "adaptive recovery: clean interval at 100%")
			return
		}
		switch h.aphase {
		case adaptHold:
			h.held++
			if h.held >= c.AdaptiveHold {
				h.aphase = adaptProbe
				h.setShare(max(h.share, h.wmax+c.AdaptiveIncrease))
			}
		default: // searching, or a clean probe: the capacity has grown
			h.aphase = adaptSearch
			h.setShare(h.share * adaptiveGrowth)
		}
	}
	h.stepStart = now
	h.calls, h.fails, h.slows, h.latSum, h.latN = 0, 0, 0, 0, 0
}
