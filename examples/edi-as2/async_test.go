package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// TestShortRunAsyncMDN runs the example with -mdn async: every order is
// acked once its pending receipt is stored, each retailer posts its signed
// MDN to the receipt endpoint on loopback, and every receipt is resolved
// by its MDN: nothing lost, nothing dead-lettered, none left pending.
func TestShortRunAsyncMDN(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the example end to end")
	}
	o, err := parseFlags([]string{"-mdn", "async", "-quiet", "-rate", "30", "-retailers", "2", "-faulty", "2",
		"-produce-for", "2s", "-healthy", "0", "-outage", "0", "-fragile", "0", "-settle", "45s"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var out bytes.Buffer
	sum, err := run(ctx, o, &out)
	t.Log("\n" + out.String())
	if err != nil {
		t.Fatal(err)
	}
	if sum.Produced == 0 || sum.Lost != 0 || sum.Misdelivered != 0 || sum.Queued != 0 || sum.DeliveredUnique != sum.Produced {
		t.Fatalf("produced %d, delivered %d, lost %d, misdelivered %d, queued %d", sum.Produced, sum.DeliveredUnique, sum.Lost, sum.Misdelivered, sum.Queued)
	}
	if sum.AsyncStored != sum.DeliveredUnique || sum.AsyncResolved != sum.AsyncStored || sum.AsyncDead != 0 {
		t.Fatalf("async: %d stored, %d resolved, %d dead-lettered; want every delivered order's receipt resolved by its MDN",
			sum.AsyncStored, sum.AsyncResolved, sum.AsyncDead)
	}
	if !strings.Contains(out.String(), "resolved by their MDN") {
		t.Error("the summary does not show the asynchronous receipts")
	}
}
