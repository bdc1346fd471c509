// Command gen writes the geofence example's test data, deterministically
// (a fixed seed, no clock, no network):
//
//	go run ./examples/geofence/internal/gen -out examples/geofence/testdata
//
// It lays out a made-up street grid (residential streets every 250 m at
// 30 km/h, arterials every 1 km at 50 km/h) over an arbitrary origin, puts
// two depot yards, customer sites and a two-part restricted zone on it
// (fences.geojson), and drives a fleet of delivery vans through it for a
// morning shift (trace.geojson): each van leaves its depot and serves a
// round of customers, stopping at each for one to five minutes, braking for
// corners and red lights. A simulated GPS receiver reports each van once a
// second with a correlated position error (σ ≈ 2.5 m), speed and course
// noise, and the odd missed fix. Each van's ground truth (when its true,
// error-free position was inside each fence) goes into the trace's
// "visits" property, for the example's tests.
//
// See ../../testdata/README.md for the formats.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
)

func main() {
	out := flag.String("out", "testdata", "output `directory`")
	flag.Parse()
	files, err := generate()
	if err == nil {
		for name, data := range files {
			if err = os.WriteFile(filepath.Join(*out, name), data, 0o644); err != nil {
				break
			}
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}
