package capture_test

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/internal/capture"
	"github.com/floodgate-go/floodgate/internal/natstest"
)

// TestTap: the tap records every message published in the account, on
// "$"-prefixed subjects (KV, JetStream API) too, and Stop returns only once
// all of them are recorded.
func TestTap(t *testing.T) {
	srv := natstest.Server(t)
	tapConn, pubConn := natstest.Conn(t, srv.ClientURL()), natstest.Conn(t, srv.ClientURL())
	tap, err := capture.NewTap(tapConn)
	if err != nil {
		t.Fatal(err)
	}
	const n = 2000
	for i := range n {
		if err := pubConn.Publish(fmt.Sprintf("orders.%d", i%7), []byte(fmt.Sprintf("order-%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := pubConn.Publish("$KV.bucket.key", []byte("kv-value")); err != nil {
		t.Fatal(err)
	}
	if err := pubConn.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := tap.Stop(); err != nil {
		t.Fatal(err)
	}
	if got := tap.Count("orders."); got != n {
		t.Errorf("Count(orders.) = %d, want %d", got, n)
	}
	if tap.Count("$KV.bucket") != 1 || !strings.Contains(tap.String(), "kv-value") || !strings.Contains(tap.String(), fmt.Sprintf("order-%d", n-1)) {
		t.Errorf("the tap missed messages: subjects %v", tap.Subjects())
	}
}

// TestBufferFind: Find waits for a line written later and returns its
// group; it gives up when its context ends.
func TestBufferFind(t *testing.T) {
	var b capture.Buffer
	go func() { fmt.Fprintln(&b, "streams: retry floodgate_retry_ab12, dead letters") }()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second) // a hang guard
	defer cancel()
	if got, ok := b.Find(ctx, regexp.MustCompile(`floodgate_retry_(\w+),`)); !ok || got != "ab12" {
		t.Errorf("Find = %q, %v; want ab12", got, ok)
	}
	done, stop := context.WithCancel(context.Background())
	stop()
	if _, ok := b.Find(done, regexp.MustCompile(`never`)); ok {
		t.Error("Find matched what was never written")
	}
}
