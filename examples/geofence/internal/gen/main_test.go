package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestTestdataUpToDate regenerates the test data and compares it with the
// committed files: the generator is deterministic, and the files are its
// output. After changing the generator, run go generate ./examples/geofence.
func TestTestdataUpToDate(t *testing.T) {
	files, err := generate()
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 2 {
		t.Fatalf("generated %d files, want 2", len(files))
	}
	for name, want := range files {
		got, err := os.ReadFile(filepath.Join("..", "..", "testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("testdata/%s differs from the generator's output; run go generate ./examples/geofence", name)
		}
	}
	again, err := generate()
	if err != nil {
		t.Fatal(err)
	}
	for name := range files {
		if !bytes.Equal(files[name], again[name]) {
			t.Errorf("%s: two runs differ; the generator must be deterministic", name)
		}
	}
}

func TestFenceContains(t *testing.T) {
	f := &fence{parts: [][]xy{closed(xy{0, 0}, xy{10, 0}, xy{10, 10}, xy{0, 10}), closed(xy{20, 20}, xy{30, 20}, xy{25, 30})}}
	for _, tc := range []struct {
		p    xy
		want bool
	}{{xy{5, 5}, true}, {xy{15, 15}, false}, {xy{25, 22}, true}, {xy{-1, 5}, false}} {
		if got := f.contains(tc.p); got != tc.want {
			t.Errorf("contains(%v) = %v, want %v", tc.p, got, tc.want)
		}
	}
}
