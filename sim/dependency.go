package sim

import (
	"math"
	"math/rand/v2"
	"time"
)

// burstWindow is how much of its capacity a fragile dependency serves in a
// burst: its token bucket holds capacity × 100 ms (at least one call).
const burstWindow = 100 * time.Millisecond

// dependency is the simulated partner. It decides each call's outcome and
// latency when the call reaches it (at admission), from the phase it is in.
// Calls must reach it in time order. Not safe for concurrent use.
type dependency struct {
	phases []Phase
	cur    int
	rng    *rand.Rand

	// token bucket of the current phase, when it has a capacity
	tokens float64
	burst  float64
	last   int64
	bucket int // phase index the bucket belongs to, -1 none

	slow  Latency
	sigma []float64 // per phase
	slowS float64
}

func newDependency(sc *Scenario, rng *rand.Rand) *dependency {
	d := &dependency{phases: sc.Phases(), rng: rng, bucket: -1, slow: sc.Slow, slowS: sc.Slow.sigma()}
	for _, p := range d.phases {
		d.sigma = append(d.sigma, p.Latency.sigma())
	}
	return d
}

// phase returns the index of the phase at now (ns from the start).
func (d *dependency) phase(now int64) int {
	t := time.Duration(now)
	for d.cur > 0 && t < d.phases[d.cur].Start {
		d.cur--
	}
	for d.cur < len(d.phases)-1 && t >= d.phases[d.cur].End {
		d.cur++
	}
	return d.cur
}

// down reports whether every call fails at now (for the health check).
func (d *dependency) down(now int64) bool { return d.phases[d.phase(now)].Down }

// serve decides the outcome of a call reaching the dependency at now: ok is
// false for a failure, lat is how long the call takes.
func (d *dependency) serve(now int64) (ok bool, lat time.Duration) {
	i := d.phase(now)
	p := &d.phases[i]
	z := d.rng.NormFloat64() // one draw per call, whatever the phase
	normal := draw(p.Latency.Median, d.sigma[i], z)
	switch {
	case p.Down:
		return false, normal
	case p.Capacity > 0 && !d.take(i, now):
		if p.Overflow == OverflowSlow {
			return true, draw(d.slow.Median, d.slowS, z)
		}
		return false, normal
	}
	return true, normal
}

// take takes a token from phase i's bucket, reporting whether one was there.
func (d *dependency) take(i int, now int64) bool {
	p := &d.phases[i]
	if d.bucket != i {
		d.bucket = i
		d.burst = max(1, p.Capacity*burstWindow.Seconds())
		d.tokens = d.burst
		d.last = now
	}
	d.tokens = min(d.burst, d.tokens+float64(now-d.last)/1e9*p.Capacity)
	d.last = now
	if d.tokens < 1 {
		return false
	}
	d.tokens--
	return true
}

// draw returns a log-normal latency with the given median and shape for the
// standard normal draw z, at least 1µs.
func draw(median time.Duration, sigma, z float64) time.Duration {
	l := time.Duration(math.Round(float64(median) * math.Exp(sigma*z)))
	return max(l, time.Microsecond)
}
