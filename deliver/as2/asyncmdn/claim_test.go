package asyncmdn_test

import (
	"errors"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/deliver/as2"
	"github.com/floodgate-go/floodgate/deliver/as2/asyncmdn"
)

// Exactly once across replicas, without relying on how concurrent sweeps
// interleave: two replicas read a record at the same revision; the
// second's claim, and its delete, are refused with ErrClaimed once the
// first has claimed it, and the first's delete succeeds at the revision
// its claim returned.
func TestClaimAndRemoveCheckTheRevision(t *testing.T) {
	e := newEnv(t, nil)
	r := e.replica("", nil)
	e.sendAsync(r, "order-1")
	st := e.store(e.js, e.bucket)
	id := as2.MessageID("order-1", as2.DefaultMessageIDDomain)
	rec, rev, err := st.Get(testCtx(t), id)
	if err != nil {
		t.Fatal(err)
	}
	lease := time.Now().Add(time.Minute)
	crev, err := st.Claim(testCtx(t), rec, rev, lease) // replica A
	if err != nil || crev <= rev {
		t.Fatalf("first claim = %d, %v; want a newer revision than %d", crev, err, rev)
	}
	if _, err := st.Claim(testCtx(t), rec, rev, lease); !errors.Is(err, asyncmdn.ErrClaimed) { // replica B, stale
		t.Fatalf("second claim at the read revision = %v; want ErrClaimed", err)
	}
	if err := st.Remove(testCtx(t), rec, rev); !errors.Is(err, asyncmdn.ErrClaimed) {
		t.Fatalf("delete at the read revision = %v; want ErrClaimed", err)
	}
	if !e.pending(st, "order-1") {
		t.Fatal("a stale claim or delete removed the record")
	}
	if err := st.Remove(testCtx(t), rec, crev); err != nil {
		t.Fatalf("delete at the claim's revision: %v", err)
	}
	if e.pending(st, "order-1") {
		t.Fatal("record still pending after the claimant deleted it")
	}
}
