package faultscript_test

import (
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/internal/faultscript"
)

func TestIndex(t *testing.T) {
	script := []time.Duration{2 * time.Second, 3 * time.Second, 0}
	id := func(d time.Duration) time.Duration { return d }
	for _, tc := range []struct {
		elapsed time.Duration
		want    int
	}{
		{-time.Second, 0}, {0, 0}, {1999 * time.Millisecond, 0}, {2 * time.Second, 1},
		{4999 * time.Millisecond, 1}, {5 * time.Second, 2}, {time.Hour, 2},
	} {
		if got := faultscript.Index(script, id, tc.elapsed); got != tc.want {
			t.Errorf("Index(%v) = %d, want %d", tc.elapsed, got, tc.want)
		}
	}
}
