package fleet

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/breaker/natskv"
)

var theCluster *cluster

func TestMain(m *testing.M) {
	if raw := os.Getenv(envReplica); raw != "" {
		os.Exit(runReplica(raw))
	}
	dir, err := os.MkdirTemp("", "floodgate-fleet-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	c, err := startCluster(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "start cluster:", err)
		os.Exit(1)
	}
	theCluster = c
	code := m.Run()
	c.shutdown()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// env is one test's streams, bucket and connection.
type env struct {
	t        *testing.T
	nc       *nats.Conn
	js       jetstream.JetStream
	kv       *natskv.Store
	stream   string
	subject  string
	consumer string
	bucket   string
}

var nameSeq int

func newEnv(t *testing.T) *env {
	t.Helper()
	nameSeq++
	e := &env{t: t, stream: fmt.Sprintf("WORK%d", nameSeq), subject: fmt.Sprintf("work%d", nameSeq),
		consumer: "workers", bucket: fmt.Sprintf("breakers%d", nameSeq)}
	nc, err := connect(theCluster.urls(), "test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	e.nc = nc
	e.js, _ = jetstream.New(nc)
	// A cluster just started (or a node just back) may need a moment
	// before it places R3 assets.
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err = e.js.CreateStream(ctx, jetstream.StreamConfig{
			Name: e.stream, Subjects: []string{e.subject}, Retention: jetstream.WorkQueuePolicy,
			Replicas: 3, Storage: jetstream.FileStorage,
		})
		if err == nil {
			_, err = e.js.CreateOrUpdateConsumer(ctx, e.stream, jetstream.ConsumerConfig{
				Durable: e.consumer, AckPolicy: jetstream.AckExplicitPolicy, AckWait: 2 * time.Second,
				MaxDeliver: -1, MaxAckPending: 1000,
			})
		}
		if err == nil {
			e.kv, err = natskv.New(ctx, e.js, natskv.Config{Bucket: e.bucket, Replicas: 3})
		}
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("create R3 stream, consumer and KV bucket: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	return e
}

// publish publishes n messages "m<i>" at rate per second, in the
// background; done closes when all are published.
func (e *env) publish(n int, rate float64) (done chan struct{}) {
	done = make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(time.Duration(float64(time.Second) / rate))
		defer tick.Stop()
		for i := range n {
			<-tick.C
			for {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				_, err := e.js.Publish(ctx, e.subject, []byte("m"+strconv.Itoa(i)))
				cancel()
				if err == nil {
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
	}()
	return done
}

// trickle publishes a message "t<i>" every 50 ms until the returned stop
// is called: a breaker closes only through probes, so the tests waiting for
// every replica to close after the load keep some traffic flowing.
func (e *env) trickle() (stop func()) {
	done := make(chan struct{})
	go func() {
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			case <-time.After(50 * time.Millisecond):
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			_, _ = e.js.Publish(ctx, e.subject, []byte("t"+strconv.Itoa(i)))
			cancel()
		}
	}()
	return func() { close(done) }
}

func (e *env) shared() (breaker.SharedState, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	st, _, err := e.kv.Load(ctx, breakerName)
	return st, err
}

// replica is a running replica process.
type replica struct {
	name  string
	cmd   *exec.Cmd
	stdin io.WriteCloser

	mu        sync.Mutex
	state     breaker.State
	connected bool
	closedAt  []time.Time // transitions to closed
	opens     int
	lines     map[string]bool
	exited    chan struct{}
}

func (e *env) startReplica(rc replicaConfig) *replica {
	t := e.t
	t.Helper()
	rc.URLs, rc.Bucket, rc.Stream, rc.Consumer = theCluster.urls(), e.bucket, e.stream, e.consumer
	raw, _ := json.Marshal(rc)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envReplica+"="+string(raw))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r := &replica{name: rc.Replica, cmd: cmd, stdin: stdin, lines: map[string]bool{}, exited: make(chan struct{})}
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		once := sync.Once{}
		for sc.Scan() {
			r.line(sc.Text(), func() { once.Do(func() { close(ready) }) })
		}
	}()
	go func() { _ = cmd.Wait(); close(r.exited) }()
	t.Cleanup(func() {
		_ = stdin.Close()
		select {
		case <-r.exited:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-r.exited
		}
	})
	select {
	case <-ready:
	case <-r.exited:
		t.Fatalf("replica %s exited before ready", rc.Replica)
	case <-time.After(20 * time.Second):
		t.Fatalf("replica %s not ready", rc.Replica)
	}
	return r
}

func (r *replica) line(s string, ready func()) {
	f := strings.Fields(s)
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case s == "ready":
		ready()
	case len(f) == 3 && f[0] == "T":
		ns, _ := strconv.ParseInt(f[2], 10, 64)
		switch f[1] {
		case "closed":
			r.closedAt = append(r.closedAt, time.Unix(0, ns))
		case "open":
			r.opens++
		}
	case len(f) == 3 && f[0] == "S":
		r.state = parseState(f[1])
		r.connected = f[2] == "true"
	default:
		r.lines[s] = true
	}
}

func parseState(s string) breaker.State {
	switch s {
	case "open":
		return breaker.StateOpen
	case "half-open":
		return breaker.StateHalfOpen
	}
	return breaker.StateClosed
}

func (r *replica) status() (breaker.State, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.state, r.connected
}

func (r *replica) lastClosed() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.closedAt) == 0 {
		return time.Time{}
	}
	return r.closedAt[len(r.closedAt)-1]
}

func (r *replica) opened() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.opens
}

func (r *replica) said(s string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lines[s]
}

func (r *replica) send(cmd string) { _, _ = fmt.Fprintln(r.stdin, cmd) }

func (r *replica) sigkill() {
	_ = r.cmd.Process.Signal(syscall.SIGKILL)
	<-r.exited
}

// eventually polls cond every 20 ms until it holds, failing after timeout.
func eventually(t *testing.T, timeout time.Duration, cond func() bool, msg string, args ...any) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", timeout, fmt.Sprintf(msg, args...))
		}
		time.Sleep(20 * time.Millisecond)
	}
}
