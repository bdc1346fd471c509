package main

import (
	"bufio"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/internal/natstest"
)

// TestMain runs the program itself when the test re-executes its binary.
func TestMain(m *testing.M) {
	if os.Getenv("QUICKSTART_RUN") == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}

// The README's quick start is this program, byte for byte.
func TestReadmeQuickStartIsThisProgram(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(readme), "\n## Quick start\n")
	if !ok {
		t.Fatal("README has no \"## Quick start\" section")
	}
	_, block, ok := strings.Cut(after, "```go\n")
	block, _, ok2 := strings.Cut(block, "```\n")
	if !ok || !ok2 {
		t.Fatal("README's quick start has no go code block")
	}
	if block != string(src) {
		t.Fatal("README's quick start differs from examples/quickstart/main.go: copy the file into the README")
	}
	if n := strings.Count(block, "\n"); n > 70 {
		t.Errorf("quick start is %d lines, want it on one screen (<= 70)", n)
	}
}

// The quick start runs: it delivers each order to its partner and stops
// cleanly on an interrupt.
func TestQuickStartRuns(t *testing.T) {
	url := natstest.URL(t)
	nc := natstest.Conn(t, url)
	js := natstest.JetStream(t, nc)
	natstest.DeleteStreams(t, js, "orders", "floodgate_retry", "floodgate_dead")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "QUICKSTART_RUN=1", "NATS_URL="+url)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	want := map[string]bool{"delivered order-0 to acme": true, "delivered order-1 to globex": true, "delivered order-2 to initech": true}
	lines := make(chan string)
	go func() {
		s := bufio.NewScanner(out)
		for s.Scan() {
			lines <- s.Text()
		}
		close(lines)
	}()
	deadline := time.After(60 * time.Second)
	for len(want) > 0 {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("the program ended before delivering %v", want)
			}
			delete(want, l)
		case <-deadline:
			t.Fatalf("not delivered within 60s: %v", want)
		}
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		for range lines {
		}
		done <- cmd.Wait()
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("exit after SIGINT: %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the program did not stop within 60s of SIGINT")
	}
}
