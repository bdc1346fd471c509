package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"
)

// Fleet and GPS settings.
const (
	seed         = 20260302
	vans         = 16
	shiftSeconds = 15 * 60 // trace length per van
	gpsSigma     = 2.5     // m, stationary position error per axis
	gpsPhi       = 0.9     // per-second correlation of the position error
	missedFixP   = 0.004   // chance a fix is missing
)

// shiftStart is the trace's first timestamp.
var shiftStart = time.Date(2026, 3, 2, 7, 0, 0, 0, time.UTC)

// generate returns the output files by name.
func generate() (map[string][]byte, error) {
	rng := rand.New(rand.NewPCG(seed, seed>>1))
	c, err := newCity(rng)
	if err != nil {
		return nil, err
	}
	fences := append([]*fence{c.depots[0].fence, c.depots[1].fence}, c.restricted)
	for _, s := range c.customers {
		fences = append(fences, s.fence)
	}
	var traces [][]byte
	for i := 0; i < vans; i++ {
		b, err := van(rng, c, fences, i)
		if err != nil {
			return nil, err
		}
		traces = append(traces, b)
	}
	return map[string][]byte{
		"fences.geojson": fencesJSON(fences),
		"trace.geojson":  collection(traces),
	}, nil
}

// van drives van i for one shift and returns its GeoJSON feature.
func van(rng *rand.Rand, c *city, fences []*fence, i int) ([]byte, error) {
	dp := c.depots[i%2]
	id := fmt.Sprintf("van-%02d", i+1)
	// Its round: the customers of one of eight districts across town, the
	// nearest first.
	district := xy{375 + 750*float64(i%4), 625 + 1250*float64(i/4%2)}
	pool := slices.Clone(c.customers)
	slices.SortStableFunc(pool, func(a, b *site) int {
		return cmpFloats(manhattan(a.access, district), manhattan(b.access, district))
	})
	pool = pool[:9]
	var round []*site
	at := dp.access
	for len(pool) > 0 {
		k := 0
		for j := range pool {
			if manhattan(at, pool[j].access) < manhattan(at, pool[k].access) {
				k = j
			}
		}
		round = append(round, pool[k])
		at = pool[k].access
		pool = slices.Delete(pool, k, k+1)
	}

	var r route
	park := dp.parking[i/2%len(dp.parking)]
	r.start(park)
	r.stopHere(10 + rng.Float64()*30) // loading before leaving
	r.add(xy{park.x, dp.stop.y}, drivewayLimit)
	r.add(dp.stop, drivewayLimit)
	r.add(dp.access, drivewayLimit)
	from, fromHoriz := dp.access, dp.horiz
	for _, s := range round {
		r.driveStreets(rng, from, fromHoriz, s.access, s.horiz)
		r.add(s.stop, drivewayLimit)
		r.stopHere(dwellSeconds(rng))
		r.add(s.access, drivewayLimit)
		from, fromHoriz = s.access, s.horiz
	}
	r.cornerHalts()
	slices.SortStableFunc(r.halts, func(a, b halt) int {
		switch {
		case a.at < b.at:
			return -1
		case a.at > b.at:
			return 1
		}
		return 0
	})
	truth := r.drive(shiftSeconds, 0.92+rng.Float64()*0.12)

	// The GPS receiver.
	var (
		coords   [][2]float64
		times    []string
		speeds   []float64
		headings []float64
		ex, ey   float64
		course   = truth[0].heading
		innov    = gpsSigma * math.Sqrt(1-gpsPhi*gpsPhi)
	)
	ex, ey = rng.NormFloat64()*gpsSigma, rng.NormFloat64()*gpsSigma
	for t, s := range truth {
		ex = gpsPhi*ex + rng.NormFloat64()*innov
		ey = gpsPhi*ey + rng.NormFloat64()*innov
		if s.speed > 1 {
			course = math.Mod(s.heading+rng.NormFloat64()*2+360, 360)
		}
		speed := math.Max(0, s.speed+rng.NormFloat64()*0.15)
		if t > 0 && rng.Float64() < missedFixP {
			continue
		}
		coords = append(coords, s.pos.add(xy{ex, ey}).lonLat())
		times = append(times, shiftStart.Add(time.Duration(t)*time.Second).Format(time.RFC3339))
		speeds = append(speeds, speed)
		headings = append(headings, math.Mod(math.Round(course*10)/10, 360))
	}
	if len(coords) != len(truth) && len(coords) < len(truth)*9/10 {
		return nil, fmt.Errorf("%s: too many missed fixes", id)
	}

	// Ground truth: when the true position was inside each fence.
	var visits []visit
	for _, f := range fences {
		var cur *visit
		for t, s := range truth {
			in := f.contains(s.pos)
			ts := shiftStart.Add(time.Duration(t) * time.Second).Format(time.RFC3339)
			switch {
			case in && cur == nil:
				cur = &visit{Fence: f.id}
				if t > 0 {
					cur.Enter = ts
				}
			case !in && cur != nil:
				cur.Exit = ts
				visits = append(visits, *cur)
				cur = nil
			}
		}
		if cur != nil {
			visits = append(visits, *cur)
		}
	}
	slices.SortStableFunc(visits, func(a, b visit) int {
		return cmpStrings(a.Enter+a.Fence, b.Enter+b.Fence)
	})

	var buf bytes.Buffer
	fmt.Fprintf(&buf, `{"type":"Feature","id":%q,"properties":{"vehicle":%q,"depot":%q,`, id, id, dp.fence.id)
	buf.WriteString(`"visits":`)
	vb, err := json.Marshal(visits)
	if err != nil {
		return nil, err
	}
	buf.Write(vb)
	buf.WriteString(`,"coordTimes":`)
	tb, _ := json.Marshal(times)
	buf.Write(tb)
	buf.WriteString(`,"speed_mps":`)
	writeNumbers(&buf, speeds, 1)
	buf.WriteString(`,"heading_deg":`)
	writeNumbers(&buf, headings, 1)
	buf.WriteString(`},"geometry":{"type":"LineString","coordinates":`)
	writeCoords(&buf, coords)
	buf.WriteString(`}}`)
	return buf.Bytes(), nil
}

// visit is one stay of a van's true position inside a fence. Enter is
// empty when the van was inside at the first fix, Exit when it was still
// inside at the last.
type visit struct {
	Fence string `json:"fence"`
	Enter string `json:"enter,omitempty"`
	Exit  string `json:"exit,omitempty"`
}

// dwellSeconds is a stop's length: a quick drop (25–45 s) or a longer
// delivery (80–200 s), never near the example's 1-minute dwell trigger.
func dwellSeconds(rng *rand.Rand) float64 {
	if rng.IntN(2) == 0 {
		return 25 + rng.Float64()*20
	}
	return 80 + rng.Float64()*120
}

func manhattan(a, b xy) float64 { return math.Abs(a.x-b.x) + math.Abs(a.y-b.y) }

func cmpFloats(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func cmpStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func fencesJSON(fences []*fence) []byte {
	var feats [][]byte
	for _, f := range fences {
		var buf bytes.Buffer
		fmt.Fprintf(&buf, `{"type":"Feature","id":%q,"properties":{"id":%q,"kind":%q,"name":%q},"geometry":`, f.id, f.id, f.kind, f.name)
		polygon := func(ring []xy) {
			cs := make([][2]float64, len(ring))
			for i, p := range ring {
				cs[i] = p.lonLat()
			}
			buf.WriteByte('[')
			writeCoords(&buf, cs)
			buf.WriteByte(']')
		}
		if len(f.parts) == 1 {
			buf.WriteString(`{"type":"Polygon","coordinates":`)
			polygon(f.parts[0])
		} else {
			buf.WriteString(`{"type":"MultiPolygon","coordinates":[`)
			for i, ring := range f.parts {
				if i > 0 {
					buf.WriteByte(',')
				}
				polygon(ring)
			}
			buf.WriteByte(']')
		}
		buf.WriteString(`}}`)
		feats = append(feats, buf.Bytes())
	}
	return collection(feats)
}

// collection wraps features in a FeatureCollection, one feature a line.
func collection(feats [][]byte) []byte {
	var buf bytes.Buffer
	buf.WriteString("{\"type\":\"FeatureCollection\",\"features\":[\n")
	for i, f := range feats {
		buf.Write(f)
		if i < len(feats)-1 {
			buf.WriteByte(',')
		}
		buf.WriteByte('\n')
	}
	buf.WriteString("]}\n")
	return buf.Bytes()
}

func writeNumbers(buf *bytes.Buffer, xs []float64, prec int) {
	buf.WriteByte('[')
	for i, x := range xs {
		if i > 0 {
			buf.WriteByte(',')
		}
		buf.WriteString(strconv.FormatFloat(x, 'f', prec, 64))
	}
	buf.WriteByte(']')
}

func writeCoords(buf *bytes.Buffer, cs [][2]float64) {
	buf.WriteByte('[')
	for i, c := range cs {
		if i > 0 {
			buf.WriteByte(',')
		}
		fmt.Fprintf(buf, "[%s,%s]", strconv.FormatFloat(c[0], 'f', 6, 64), strconv.FormatFloat(c[1], 'f', 6, 64))
	}
	buf.WriteByte(']')
}
