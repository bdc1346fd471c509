package breaker_test

import (
	"errors"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/breaker/breakertest"
)

// ForceOpenReason forces the breaker open like ForceOpen, with its reason
// in the transition, and in a fleet forces every replica open and records
// the reason in the shared state ("floodgate status" shows it), whether
// the breaker was closed or open already. A later ForceClose ends it.
func TestForceOpenReason(t *testing.T) {
	clk := breakertest.NewClock(time.Time{})
	b, err := breaker.New(breaker.Config{Name: "p", Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Stop()
	var got []string
	b.AddListener(func(tr breaker.Transition) { got = append(got, tr.Reason) })
	b.ForceOpenReason("parked: certificate expired")
	clk.Advance(24 * time.Hour)
	if s := b.Snapshot(); s.State != breaker.StateOpen || !s.Forced {
		t.Fatalf("after ForceOpenReason: %+v, want forced open", s)
	}
	if _, err := b.Allow(); !errors.Is(err, breaker.ErrOpen) {
		t.Fatalf("Allow = %v, want ErrOpen", err)
	}
	if len(got) != 1 || got[0] != "forced open: parked: certificate expired" {
		t.Fatalf("transition reasons %q, want [\"forced open: parked: certificate expired\"]", got)
	}
	b.ForceClose()
	if st := b.State(); st != breaker.StateClosed {
		t.Fatalf("after ForceClose: %v, want closed", st)
	}
}

func TestFleetForceOpenReasonReachesEveryReplica(t *testing.T) {
	for _, open := range []bool{false, true} {
		tf := newTestFleet(t, 2, nil)
		if open {
			tf.trip(t, 0)
		}
		tf.bs[0].ForceOpenReason("parked (as2-trust): not pinned")
		sh := tf.shared(t)
		if sh.State != breaker.StateOpen || !sh.Forced || sh.Reason != "forced open: parked (as2-trust): not pinned" {
			t.Fatalf("open before %v: shared %+v, want forced open with the reason", open, sh)
		}
		tf.clk.Advance(time.Hour)
		wantAll(t, tf, breaker.StateOpen)
		if s := tf.bs[1].Snapshot(); !s.Forced {
			t.Fatalf("open before %v: replica b %+v, want forced", open, s)
		}
		tf.bs[1].ForceClose()
		wantAll(t, tf, breaker.StateClosed)
	}
}

// A second ForceOpenReason on a breaker already forced open replaces the
// reason in the shared state (what "floodgate status" shows); repeating
// the same reason writes nothing.
func TestFleetForceOpenReasonUpdatesReason(t *testing.T) {
	tf := newTestFleet(t, 2, nil)
	tf.bs[0].ForceOpenReason("parked: certificate expired")
	tf.bs[1].ForceOpenReason("parked: partner asked for a pause")
	sh := tf.shared(t)
	if sh.State != breaker.StateOpen || !sh.Forced || sh.Reason != "forced open: parked: partner asked for a pause" {
		t.Fatalf("shared %+v, want forced open with the second reason", sh)
	}
	tf.bs[0].ForceOpenReason("parked: partner asked for a pause")
	if again := tf.shared(t); again.Epoch != sh.Epoch {
		t.Fatalf("the same reason again wrote epoch %d over %d, want no write", again.Epoch, sh.Epoch)
	}
	wantAll(t, tf, breaker.StateOpen)
}
