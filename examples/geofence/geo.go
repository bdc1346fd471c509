package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/paulmach/orb"
	"github.com/paulmach/orb/planar"
)

// Fence kinds, from the "kind" property of testdata/fences.geojson.
const (
	kindDepot      = "depot"
	kindCustomer   = "customer"
	kindRestricted = "restricted"
)

// fence is one geofence: a polygon or a multipolygon, in lon/lat degrees.
// Containment is planar (orb/planar), which is accurate for fences of a few
// hundred metres; a point on the boundary is inside.
type fence struct {
	ID    string
	Kind  string
	Name  string
	shape orb.MultiPolygon
	bound orb.Bound
}

// contains reports whether p (lon, lat) is inside the fence.
func (f *fence) contains(p orb.Point) bool {
	if !f.bound.Contains(p) {
		return false
	}
	if len(f.shape) == 1 {
		return planar.PolygonContains(f.shape[0], p)
	}
	return planar.MultiPolygonContains(f.shape, p)
}

// geoJSON is the part of a GeoJSON FeatureCollection (RFC 7946) the example
// reads.
type geoJSON struct {
	Type     string `json:"type"`
	Features []struct {
		ID         any             `json:"id"`
		Properties json.RawMessage `json:"properties"`
		Geometry   struct {
			Type        string          `json:"type"`
			Coordinates json.RawMessage `json:"coordinates"`
		} `json:"geometry"`
	} `json:"features"`
}

// parseFences reads a FeatureCollection of Polygon and MultiPolygon
// features with the properties id, kind (depot, customer or restricted)
// and name.
func parseFences(data []byte) ([]*fence, error) {
	var fc geoJSON
	if err := json.Unmarshal(data, &fc); err != nil {
		return nil, fmt.Errorf("fences: %w", err)
	}
	if fc.Type != "FeatureCollection" {
		return nil, fmt.Errorf("fences: type %q, want FeatureCollection", fc.Type)
	}
	var out []*fence
	seen := map[string]bool{}
	for i, ft := range fc.Features {
		var p struct{ ID, Kind, Name string }
		if err := json.Unmarshal(ft.Properties, &p); err != nil {
			return nil, fmt.Errorf("fences: feature %d properties: %w", i, err)
		}
		if p.ID == "" || seen[p.ID] {
			return nil, fmt.Errorf("fences: feature %d: missing or repeated id %q", i, p.ID)
		}
		seen[p.ID] = true
		if !slices.Contains([]string{kindDepot, kindCustomer, kindRestricted}, p.Kind) {
			return nil, fmt.Errorf("fences: %s: kind %q, want depot, customer or restricted", p.ID, p.Kind)
		}
		f := &fence{ID: p.ID, Kind: p.Kind, Name: p.Name}
		switch ft.Geometry.Type {
		case "Polygon":
			var pg orb.Polygon
			if err := json.Unmarshal(ft.Geometry.Coordinates, &pg); err != nil {
				return nil, fmt.Errorf("fences: %s: %w", p.ID, err)
			}
			f.shape = orb.MultiPolygon{pg}
		case "MultiPolygon":
			if err := json.Unmarshal(ft.Geometry.Coordinates, &f.shape); err != nil {
				return nil, fmt.Errorf("fences: %s: %w", p.ID, err)
			}
		default:
			return nil, fmt.Errorf("fences: %s: geometry %q, want Polygon or MultiPolygon", p.ID, ft.Geometry.Type)
		}
		for _, pg := range f.shape {
			if len(pg) == 0 || len(pg[0]) < 4 || pg[0][0] != pg[0][len(pg[0])-1] {
				return nil, fmt.Errorf("fences: %s: a polygon needs a closed outer ring of at least 4 positions", p.ID)
			}
		}
		f.bound = f.shape.Bound()
		out = append(out, f)
	}
	if len(out) == 0 {
		return nil, errors.New("fences: no features")
	}
	return out, nil
}

// fix is one GPS report of a vehicle.
type fix struct {
	Vehicle string    `json:"vehicle"`
	Time    time.Time `json:"time"`
	Lon     float64   `json:"lon"`
	Lat     float64   `json:"lat"`
	Speed   float64   `json:"speed_mps"`
	Heading float64   `json:"heading_deg"`
}

// visit is a stay of a vehicle's true position inside a fence, from the
// trace's ground truth (the "visits" property). Enter is zero when the
// vehicle was inside at its first fix, Exit when it was still inside at its
// last.
type visit struct {
	Fence string    `json:"fence"`
	Enter time.Time `json:"enter"`
	Exit  time.Time `json:"exit"`
}

// track is one vehicle's trace.
type track struct {
	Vehicle string
	Fixes   []fix
	Visits  []visit
}

// parseTrace reads a FeatureCollection of LineString features, one per
// vehicle, with the properties vehicle, coordTimes (RFC 3339, one per
// position, the convention of GPX converters such as togeojson), speed_mps,
// heading_deg and visits.
func parseTrace(data []byte) ([]track, error) {
	var fc geoJSON
	if err := json.Unmarshal(data, &fc); err != nil {
		return nil, fmt.Errorf("trace: %w", err)
	}
	var out []track
	for i, ft := range fc.Features {
		var p struct {
			Vehicle    string      `json:"vehicle"`
			CoordTimes []time.Time `json:"coordTimes"`
			Speed      []float64   `json:"speed_mps"`
			Heading    []float64   `json:"heading_deg"`
			Visits     []struct {
				Fence       string `json:"fence"`
				Enter, Exit string
			} `json:"visits"`
		}
		if err := json.Unmarshal(ft.Properties, &p); err != nil {
			return nil, fmt.Errorf("trace: feature %d properties: %w", i, err)
		}
		if ft.Geometry.Type != "LineString" {
			return nil, fmt.Errorf("trace: %s: geometry %q, want LineString", p.Vehicle, ft.Geometry.Type)
		}
		var ls orb.LineString
		if err := json.Unmarshal(ft.Geometry.Coordinates, &ls); err != nil {
			return nil, fmt.Errorf("trace: %s: %w", p.Vehicle, err)
		}
		if p.Vehicle == "" || len(ls) == 0 || len(p.CoordTimes) != len(ls) || len(p.Speed) != len(ls) || len(p.Heading) != len(ls) {
			return nil, fmt.Errorf("trace: feature %d (%q): vehicle, and one time, speed and heading per position, are required", i, p.Vehicle)
		}
		t := track{Vehicle: p.Vehicle}
		for j, pt := range ls {
			if j > 0 && !p.CoordTimes[j].After(p.CoordTimes[j-1]) {
				return nil, fmt.Errorf("trace: %s: times not increasing at %d", p.Vehicle, j)
			}
			t.Fixes = append(t.Fixes, fix{Vehicle: p.Vehicle, Time: p.CoordTimes[j], Lon: pt[0], Lat: pt[1], Speed: p.Speed[j], Heading: p.Heading[j]})
		}
		for _, v := range p.Visits {
			vv := visit{Fence: v.Fence}
			for _, x := range []struct {
				s   string
				dst *time.Time
			}{{v.Enter, &vv.Enter}, {v.Exit, &vv.Exit}} {
				if x.s == "" {
					continue
				}
				var err error
				if *x.dst, err = time.Parse(time.RFC3339, x.s); err != nil {
					return nil, fmt.Errorf("trace: %s: visit: %w", p.Vehicle, err)
				}
			}
			t.Visits = append(t.Visits, vv)
		}
		out = append(out, t)
	}
	if len(out) == 0 {
		return nil, errors.New("trace: no vehicles")
	}
	return out, nil
}
