package main

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// The made-up city: a street grid in local metres (x east, y north) laid
// over an arbitrary origin. Streets run every block metres; every
// arterialEvery metres a street is an arterial.
const (
	originLat     = 51.9000
	originLon     = 4.4500
	metresPerDeg  = 111320.0
	block         = 250.0
	gridW         = 3000.0
	gridH         = 2500.0
	arterialEvery = 1000.0

	localLimit    = 30 / 3.6 // m/s, 30 km/h residential streets
	arterialLimit = 50 / 3.6 // m/s, 50 km/h arterials
	drivewayLimit = 10 / 3.6 // m/s, yards and driveways
)

// xy is a point in local metres.
type xy struct{ x, y float64 }

func (a xy) add(b xy) xy        { return xy{a.x + b.x, a.y + b.y} }
func (a xy) sub(b xy) xy        { return xy{a.x - b.x, a.y - b.y} }
func (a xy) scale(f float64) xy { return xy{a.x * f, a.y * f} }
func (a xy) dist(b xy) float64  { return math.Hypot(a.x-b.x, a.y-b.y) }
func (a xy) lonLat() [2]float64 { return [2]float64{lonOf(a.x), latOf(a.y)} }
func latOf(y float64) float64   { return originLat + y/metresPerDeg }
func lonOf(x float64) float64   { return originLon + x/(metresPerDeg*math.Cos(originLat*math.Pi/180)) }
func isArterial(c float64) bool { return math.Mod(c, arterialEvery) == 0 }
func snap(c float64) float64    { return math.Round(c/block) * block }
func bearing(from, to xy) float64 {
	return math.Mod(math.Atan2(to.x-from.x, to.y-from.y)*180/math.Pi+360, 360)
}

// fenceKind is the kind of a geofence.
type fenceKind string

const (
	kindDepot      fenceKind = "depot"
	kindCustomer   fenceKind = "customer"
	kindRestricted fenceKind = "restricted"
)

// fence is a geofence: one or more polygons (outer rings only, closed).
type fence struct {
	id, name string
	kind     fenceKind
	parts    [][]xy
}

// contains reports whether p is inside one of the fence's rings (even-odd
// rule), the same planar test the example runs with orb on lon/lat.
func (f *fence) contains(p xy) bool {
	for _, ring := range f.parts {
		in := false
		for i, j := 0, len(ring)-1; i < len(ring); j, i = i, i+1 {
			a, b := ring[i], ring[j]
			if (a.y > p.y) != (b.y > p.y) && p.x < (b.x-a.x)*(p.y-a.y)/(b.y-a.y)+a.x {
				in = !in
			}
		}
		if in {
			return true
		}
	}
	return false
}

func (f *fence) bounds() (lo, hi xy) {
	lo, hi = xy{math.Inf(1), math.Inf(1)}, xy{math.Inf(-1), math.Inf(-1)}
	for _, r := range f.parts {
		for _, p := range r {
			lo = xy{math.Min(lo.x, p.x), math.Min(lo.y, p.y)}
			hi = xy{math.Max(hi.x, p.x), math.Max(hi.y, p.y)}
		}
	}
	return lo, hi
}

// closed returns ring with its first point repeated at the end.
func closed(ring ...xy) []xy { return append(ring, ring[0]) }

// site is a place a vehicle stops at: access is on a street's centre line,
// stop is where it parks.
type site struct {
	fence  *fence
	access xy
	stop   xy
	horiz  bool // the access street runs east-west
}

// depot is a yard with a gate on a street.
type depot struct {
	site
	parking []xy
}

// city holds the fences and the places vehicles visit.
type city struct {
	depots     []*depot
	customers  []*site
	restricted *fence
}

var customerNames = []string{
	"Harbour Bakery", "Quayside Pharmacy", "Linden Florist", "Marsh Hardware",
	"Canal Street Deli", "Beacon Books", "Dockside Bikes", "Millrace Dairy",
	"Old Lock Tailors", "Tidewater Optics", "Windmill Grocer", "Anchor Print Shop",
	"Saltmarsh Cafe", "Ferry Lane Vet", "Copper Kettle Bistro", "Lighthouse Toys",
	"Gull Point Pets", "Riverside Clinic", "Eastgate Electrics", "Polder Garden Centre",
	"Heron Bridge Bar", "Kade Shoes", "Tollhouse Laundry", "Silt Street Studio",
	"Dyke Road Dental", "Mooring Wine Cellar", "Sluice Gate Gym", "Barge Yard Cycles",
	"Estuary Fishmonger", "Reedbed Nursery", "Cobble Lane Cheese", "Towpath Tea Room",
	"Brickworks Salon", "Shipwright Timber", "Mudflat Pottery", "Pier Head Post Office",
	"Spinnaker Sails", "Lantern Hall Library", "Oyster Bank Kitchen", "Weir Street Market",
}

// newCity lays out two depots, a restricted zone of two parts, and
// len(customerNames) customer sites along residential streets.
func newCity(rng *rand.Rand) (*city, error) {
	c := &city{}
	// Depots: a yard north of a street (north) and south of one (south),
	// mid-block and 15 m off the centre line, with a gate on the street.
	for i, d := range []struct {
		id, name string
		gate     xy
		side     float64
	}{
		{"depot-north", "North Depot (Kade 12)", xy{875, 2250}, +1},
		{"depot-south", "South Depot (Polderweg 3)", xy{2375, 250}, -1},
	} {
		s, g := d.side, d.gate
		f := &fence{id: d.id, name: d.name, kind: kindDepot, parts: [][]xy{closed(
			xy{g.x - 98, g.y + s*15}, xy{g.x + 95, g.y + s*15}, xy{g.x + 104, g.y + s*70},
			xy{g.x + 90, g.y + s*125}, xy{g.x - 92, g.y + s*120},
		)}}
		dp := &depot{site: site{fence: f, access: g, stop: xy{g.x, g.y + s*45}, horiz: true}}
		for k := 0; k < 6; k++ {
			dp.parking = append(dp.parking, xy{g.x - 75 + 30*float64(k), g.y + s*(85+float64(i%2)*5)})
		}
		c.depots = append(c.depots, dp)
	}
	// Restricted zone: a pedestrianised centre and three school streets.
	c.restricted = &fence{id: "restricted-centre", name: "Low-traffic centre and school street", kind: kindRestricted,
		parts: [][]xy{
			closed(xy{1170, 1190}, xy{1830, 1200}, xy{1845, 1680}, xy{1600, 1830}, xy{1180, 1810}),
			closed(xy{1020, 2180}, xy{1230, 2180}, xy{1230, 2320}, xy{1020, 2320}),
			closed(xy{1770, 180}, xy{1980, 180}, xy{1980, 320}, xy{1770, 320}),
			closed(xy{1430, 520}, xy{1570, 520}, xy{1570, 980}, xy{1430, 980}),
		}}
	// Customers: on residential (non-arterial) street segments, away from
	// intersections, the depots, the restricted zone and each other.
	taken := []*fence{c.restricted, c.depots[0].fence, c.depots[1].fence}
	for i, name := range customerNames {
		var s *site
		for try := 0; try < 1000 && s == nil; try++ {
			s = tryCustomer(rng, fmt.Sprintf("cust-%02d", i+1), name, taken)
		}
		if s == nil {
			return nil, fmt.Errorf("could not place %s", name)
		}
		taken = append(taken, s.fence)
		c.customers = append(c.customers, s)
	}
	return c, nil
}

func tryCustomer(rng *rand.Rand, id, name string, taken []*fence) *site {
	horiz := rng.IntN(2) == 0
	var street, along float64
	if horiz {
		street = block * float64(1+rng.IntN(int(gridH/block)-1))
		along = block*float64(rng.IntN(int(gridW/block))) + 70 + rng.Float64()*110
	} else {
		street = block * float64(1+rng.IntN(int(gridW/block)-1))
		along = block*float64(rng.IntN(int(gridH/block))) + 70 + rng.Float64()*110
	}
	if isArterial(street) {
		return nil
	}
	side := float64(1 - 2*rng.IntN(2))
	// to maps (along the street, offset from the centre line) to x, y.
	to := func(a, o float64) xy {
		if horiz {
			return xy{a, street + side*o}
		}
		return xy{street + side*o, a}
	}
	j := func() float64 { return rng.Float64()*8 - 4 }
	w := 22 + rng.Float64()*14
	ring := closed(
		to(along-w+j(), 15), to(along+w+j(), 15), to(along+w+4+j(), 40+j()),
		to(along+w-6+j(), 62+j()), to(along-w+5+j(), 64+j()), to(along-w-3+j(), 38+j()),
	)
	f := &fence{id: id, name: name, kind: kindCustomer, parts: [][]xy{ring}}
	lo, hi := f.bounds()
	if lo.x < 20 || lo.y < 20 || hi.x > gridW-20 || hi.y > gridH-20 {
		return nil
	}
	for _, o := range taken {
		olo, ohi := o.bounds()
		if lo.x < ohi.x+40 && olo.x < hi.x+40 && lo.y < ohi.y+40 && olo.y < hi.y+40 {
			return nil
		}
	}
	return &site{fence: f, access: to(along, 0), stop: to(along, 38), horiz: horiz}
}
