package capture_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
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

// TestProgram: a program's run id and metrics URL are read from what it
// prints; the endpoint is scraped until the program returns, whose error
// Wait gives back; a program that does not return by the guard is an
// error.
func TestProgram(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "# HELP floodgate_x test")
	}))
	defer srv.Close()
	release := make(chan struct{})
	done := errors.New("program done")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p := capture.Start(ctx, func(_ context.Context, stdout io.Writer) error {
		fmt.Fprintf(stdout, "streams: retry floodgate_retry_ab12cd, dead letters x\nmetrics: %s/metrics\n", srv.URL)
		<-release
		return done
	}, 10*time.Millisecond)
	if id, ok := p.RunID(ctx); !ok || id != "ab12cd" {
		t.Fatalf("RunID = %q, %v; want ab12cd", id, ok)
	}
	for p.Scrapes() == 0 && ctx.Err() == nil {
		time.Sleep(5 * time.Millisecond)
	}
	close(release)
	if err := p.Wait(time.Minute); !errors.Is(err, done) {
		t.Errorf("Wait = %v, want the program's error", err)
	}
	if !strings.Contains(p.Metrics(), "floodgate_x") {
		t.Errorf("Metrics = %q", p.Metrics())
	}

	stuck := capture.Start(ctx, func(ctx context.Context, _ io.Writer) error { <-ctx.Done(); return nil }, time.Second)
	if err := stuck.Wait(10 * time.Millisecond); err == nil {
		t.Error("Wait on a program still running after the guard: nil, want an error")
	}
}
