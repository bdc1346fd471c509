package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/internal/natstest"
)

// A partner parked by the program (Breaker.ForceOpenReason, as the
// middleware does for a deliver.ParkError) shows as forced open with its
// reason in "floodgate status", text and JSON; "floodgate close" un-parks
// it on the replica.
func TestStatusShowsParkedPartner(t *testing.T) {
	b, _, cli := fleetCLI(t)

	const why = `as2 send: partner parked (as2-trust): MDN signer "CN=MALLORY" (serial 4): as2: certificate is not the pinned one`
	b.ForceOpenReason(why)
	var st []breakerStatus
	natstest.Eventually(t, 30*time.Second, func() bool {
		out, _, code := cli("status", "-breaker", "partner", "-format", "json")
		st = nil
		return code == exitOK && json.Unmarshal([]byte(out), &st) == nil && len(st) == 1 && st[0].Forced
	}, "the parked partner in status -format json")
	if st[0].State != "open" || st[0].Reason != "forced open: "+why || st[0].UpdatedBy != "r1" {
		t.Fatalf("status -format json of a parked partner: %+v", st[0])
	}
	out, errs, code := cli("status", "-breaker", "partner")
	if code != exitOK || !strings.Contains(out, "forced open: "+why) || !strings.Contains(out, "open") {
		t.Fatalf("status of a parked partner: exit %d, out %q, err %q", code, out, errs)
	}

	if _, errs, code := cli("close", "-breaker", "partner"); code != exitOK {
		t.Fatalf("close: exit %d: %s", code, errs)
	}
	natstest.Eventually(t, 30*time.Second, func() bool { return b.State() == breaker.StateClosed && !b.Snapshot().Forced },
		"the replica un-parked by floodgate close")
}
