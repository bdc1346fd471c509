package natstest_test

import (
	"context"
	"fmt"
	"regexp"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/internal/natstest"
)

func TestURLConnJetStream(t *testing.T) {
	nc := natstest.Conn(t, natstest.URL(t))
	js := natstest.JetStream(t, nc)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	info, err := js.AccountInfo(ctx)
	if err != nil {
		t.Fatalf("JetStream not enabled: %v", err)
	}
	if info.Limits.MaxStreams == 0 {
		t.Fatalf("account limits = %+v", info.Limits)
	}
}

func TestNameIsUniqueAndValid(t *testing.T) {
	a, b := natstest.Name(t, "x.y"), natstest.Name(t, "x.y")
	if a == b {
		t.Fatalf("Name returned %q twice", a)
	}
	if !regexp.MustCompile(`^[A-Za-z0-9_-]+$`).MatchString(a) {
		t.Fatalf("Name %q has characters outside [A-Za-z0-9_-]", a)
	}
}

func TestEventually(t *testing.T) {
	n := 0
	natstest.Eventually(t, time.Second, func() bool { n++; return n == 3 }, "n reaches 3")
	if n != 3 {
		t.Fatalf("cond called %d times, want 3", n)
	}
}

func TestNowFormatsAtFormatTime(t *testing.T) {
	n := 1
	v := natstest.Now(func() any { return n })
	n = 42
	if got := fmt.Sprintf("%d|%3d|%v", v, v, v); got != "42| 42|42" {
		t.Errorf("formatted %q, want %q", got, "42| 42|42")
	}
}
