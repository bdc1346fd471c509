package main

import (
	"math"
	"math/rand/v2"
)

// Driving model. A vehicle follows a polyline of legs, each with a speed
// limit, accelerating and braking with bounded rates so that it takes
// corners slowly, stops at red lights and at every site, and keeps its
// cruising speed a little under or over the limit.
const (
	accel      = 1.3  // m/s², gentle van acceleration
	decel      = 2.2  // m/s², comfortable braking
	dt         = 0.1  // s, integration step
	cornerBase = 4.5  // m/s through a right-angle turn
	redLightP  = 0.35 // chance of a red light at an arterial crossing
)

// leg is a straight piece of the route.
type leg struct {
	from, to xy
	limit    float64 // m/s
}

// halt is a place on the route where the vehicle must slow to v (0 to
// stop) and then wait hold seconds.
type halt struct {
	at   float64 // metres from the route start
	v    float64
	hold float64
}

// route is a polyline with its halts.
type route struct {
	legs  []leg
	cum   []float64 // distance at the start of each leg
	halts []halt
	total float64
}

func (r *route) add(to xy, limit float64) {
	from := to
	if n := len(r.legs); n > 0 {
		from = r.legs[n-1].to
	}
	if from == to {
		return
	}
	r.cum = append(r.cum, r.total)
	r.legs = append(r.legs, leg{from: from, to: to, limit: limit})
	r.total += from.dist(to)
}

// start begins the route at p; the first add draws the first leg.
func (r *route) start(p xy) { r.legs = append(r.legs[:0], leg{from: p, to: p}); r.cum = []float64{0} }

func (r *route) stopHere(hold float64) {
	r.halts = append(r.halts, halt{at: r.total, v: 0, hold: hold})
}

// streetLimit is the speed limit of the street through a and b.
func streetLimit(a, b xy) float64 {
	if a.y == b.y && isArterial(a.y) || a.x == b.x && isArterial(a.x) {
		return arterialLimit
	}
	return localLimit
}

// driveStreets appends the Manhattan path from the street point from to
// the street point to, with red lights at arterial crossings.
func (r *route) driveStreets(rng *rand.Rand, from xy, fromHoriz bool, to xy, toHoriz bool) {
	var corners []xy
	switch {
	case fromHoriz && toHoriz && from.y != to.y:
		xs := snap(to.x)
		corners = []xy{{xs, from.y}, {xs, to.y}}
	case !fromHoriz && !toHoriz && from.x != to.x:
		ys := snap(to.y)
		corners = []xy{{from.x, ys}, {to.x, ys}}
	case fromHoriz && !toHoriz:
		corners = []xy{{to.x, from.y}}
	case !fromHoriz && toHoriz:
		corners = []xy{{from.x, to.y}}
	}
	p := from
	for _, q := range append(corners, to) {
		if p == q {
			continue
		}
		r.straight(rng, p, q)
		p = q
	}
}

// straight appends one straight street leg, with a red light at each
// arterial it crosses (not at its ends).
func (r *route) straight(rng *rand.Rand, p, q xy) {
	limit := streetLimit(p, q)
	base := r.total
	d := p.dist(q)
	horiz := p.y == q.y
	lo, hi := math.Min(p.x, q.x), math.Max(p.x, q.x)
	if !horiz {
		lo, hi = math.Min(p.y, q.y), math.Max(p.y, q.y)
	}
	for c := math.Ceil(lo/arterialEvery) * arterialEvery; c <= hi; c += arterialEvery {
		var node xy
		if horiz {
			node = xy{c, p.y}
		} else {
			node = xy{p.x, c}
		}
		at := p.dist(node) - 8 // stop line
		if at > 10 && at < d-10 && rng.Float64() < redLightP {
			r.halts = append(r.halts, halt{at: base + at, v: 0, hold: 6 + rng.Float64()*30})
		}
	}
	r.add(q, limit)
}

// cornerHalts adds a speed limit at every vertex, from its turn angle.
func (r *route) cornerHalts() {
	for i := 1; i < len(r.legs); i++ {
		a, b := r.legs[i-1], r.legs[i]
		h1, h2 := bearing(a.from, a.to), bearing(b.from, b.to)
		turn := math.Abs(math.Mod(h2-h1+540, 360) - 180) // 0..180
		if turn < 5 {
			if b.limit < a.limit {
				r.halts = append(r.halts, halt{at: r.cum[i], v: b.limit})
			}
			continue
		}
		v := cornerBase * (180 - turn) / 90
		r.halts = append(r.halts, halt{at: r.cum[i], v: math.Max(0, math.Min(v, math.Min(a.limit, b.limit)))})
	}
}

// at returns the position and the leg's bearing s metres along the route.
func (r *route) at(s float64) (xy, float64, float64) {
	i := len(r.legs) - 1
	for i > 0 && r.cum[i] > s {
		i--
	}
	l := r.legs[i]
	d := l.from.dist(l.to)
	f := 0.0
	if d > 0 {
		f = math.Min(1, math.Max(0, (s-r.cum[i])/d))
	}
	return l.from.add(l.to.sub(l.from).scale(f)), bearing(l.from, l.to), l.limit
}

// sample is the vehicle's true state at one second.
type sample struct {
	pos     xy
	speed   float64 // m/s
	heading float64 // degrees clockwise from north, of the leg
}

// drive integrates the route and returns one sample per second, from t=0
// for at most seconds. cruise scales the limits (the driver's habit).
func (r *route) drive(seconds int, cruise float64) []sample {
	out := make([]sample, 0, seconds)
	s, v := 0.0, 0.0
	hold := 0.0
	next := 0 // index of the next halt not yet passed
	steps := int(math.Round(1 / dt))
	for t := 0; t < seconds; t++ {
		p, h, _ := r.at(s)
		out = append(out, sample{pos: p, speed: v, heading: h})
		for k := 0; k < steps; k++ {
			if hold > 0 {
				hold -= dt
				continue
			}
			if s >= r.total {
				v = 0
				continue
			}
			_, _, limit := r.at(s)
			target := limit * cruise
			for j := next; j < len(r.halts); j++ {
				d := r.halts[j].at - s
				if d > v*v/(2*decel)+60 {
					break
				}
				target = math.Min(target, math.Sqrt(r.halts[j].v*r.halts[j].v+2*decel*math.Max(0, d)))
			}
			target = math.Min(target, math.Sqrt(2*decel*math.Max(0, r.total-s)))
			switch {
			case v < target:
				v = math.Min(target, v+accel*dt)
			case v > target:
				v = math.Max(target, v-decel*dt)
			}
			s += v * dt
			for next < len(r.halts) && (s >= r.halts[next].at-0.05 || r.halts[next].v == 0 && r.halts[next].at-s < 0.6 && v < 0.8) {
				if r.halts[next].v == 0 {
					s, v = math.Max(s, r.halts[next].at), 0
					hold = math.Max(hold, r.halts[next].hold)
				}
				next++
			}
		}
	}
	return out
}
