package fleet

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/breaker/natskv"
	"github.com/floodgate-go/floodgate/jsq"
	"github.com/floodgate-go/floodgate/retryqueue"
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
	t        testing.TB
	nc       *nats.Conn
	js       jetstream.JetStream
	pub      *jsq.Publisher
	kv       *natskv.Store
	topic    string // work topic: stream and subject of the same name
	consumer string
	retry    string
	dead     string
	bucket   string

	mu  sync.Mutex
	ids []string // published message UUIDs
}

var nameSeq int

// newEnv creates the test's work, retry and dead-letter streams and the KV
// bucket with 3 replicas each (the production settings of docs/fleet.md).
func newEnv(t testing.TB) *env {
	t.Helper()
	nameSeq++
	e := &env{t: t, topic: fmt.Sprintf("work%d", nameSeq), consumer: "workers",
		retry: fmt.Sprintf("retry%d", nameSeq), dead: fmt.Sprintf("dead%d", nameSeq), bucket: fmt.Sprintf("breakers%d", nameSeq)}
	nc, err := connect(theCluster.urls(), "test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	e.nc = nc
	e.js, _ = jetstream.New(nc)
	e.pub, err = jsq.NewPublisher(jsq.PublisherConfig{Conn: nc, PublishTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	work := jsq.StreamConfig(e.topic)
	work.Retention = jetstream.WorkQueuePolicy
	streams := []jetstream.StreamConfig{work, retryqueue.RetryStreamConfig(e.retry), retryqueue.DeadLetterStreamConfig(e.dead)}
	// A cluster just started (or a node just back) may need a moment
	// before it places R3 assets. Each attempt's deadline is a hang guard
	// for four R3 creations on a loaded machine, not a bound.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		for _, sc := range streams {
			if err == nil {
				sc.Replicas = 3
				_, err = e.js.CreateOrUpdateStream(ctx, sc)
			}
		}
		if err == nil {
			e.kv, err = natskv.New(ctx, e.js, natskv.Config{Bucket: e.bucket, Replicas: 3})
		}
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("create R3 streams and KV bucket: %v", err)
		}
		err = nil
		time.Sleep(200 * time.Millisecond)
	}
	return e
}

// send publishes one message with UUID id, retrying until JetStream
// confirmed it.
func (e *env) send(id string) {
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err := e.pub.PublishContext(ctx, e.topic, message.NewMessage(id, []byte("payload of "+id)))
		cancel()
		if err == nil {
			e.mu.Lock()
			e.ids = append(e.ids, id)
			e.mu.Unlock()
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
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
			e.send("m" + strconv.Itoa(i))
		}
	}()
	return done
}

// trickle publishes a message "t<i>" every 50 ms until the returned stop
// is called: a breaker closes only through probes, so the tests waiting for
// every replica to close after the load keep some traffic flowing.
func (e *env) trickle() (stop func()) {
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			case <-time.After(50 * time.Millisecond):
			}
			e.send("t" + strconv.Itoa(i))
		}
	}()
	return func() { close(done); <-stopped }
}

func (e *env) shared() (breaker.SharedState, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, _, err := e.kv.Load(ctx, breakerName)
	return st, err
}

// stored returns how many messages stream has ever stored (its last
// sequence): unlike its message count, it only grows, so a drain that
// empties the stream again does not hide that it took something.
func (e *env) stored(stream string) uint64 {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := e.js.Stream(ctx, stream)
	if err != nil {
		return 0
	}
	info, err := s.Info(ctx)
	if err != nil {
		return 0
	}
	return info.State.LastSeq
}

// streamMessages returns the UUIDs of the messages in stream, with the
// value of header key (empty when key is empty or missing). It reads them
// one by one by sequence (a work-queue stream with 3 replicas takes no
// consumer besides the replicas' own). Each request has its own timeout
// and a timed-out one is retried, so a loaded machine makes the read
// slower, not failed; after two minutes it gives up.
func (e *env) streamMessages(stream, key string) (map[string]string, error) {
	giveUp := time.Now().Add(2 * time.Minute)
	// call runs op with a fresh 10 s timeout, again while it times out.
	call := func(op func(ctx context.Context) error) error {
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			err := op(ctx)
			cancel()
			if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, nats.ErrTimeout) || time.Now().After(giveUp) {
				return err
			}
		}
	}
	var s jetstream.Stream
	var info *jetstream.StreamInfo
	if err := call(func(ctx context.Context) (err error) {
		if s, err = e.js.Stream(ctx, stream); err != nil {
			return err
		}
		info, err = s.Info(ctx)
		return err
	}); err != nil {
		return nil, err
	}
	out := map[string]string{}
	if info.State.Msgs == 0 {
		return out, nil
	}
	// Up to the last sequence at the end, not at the start: a message
	// diverted again while this reads has a new copy at the end.
	last := info.State.LastSeq
	for seq := info.State.FirstSeq; ; seq++ {
		if seq > last {
			if err := call(func(ctx context.Context) (err error) { info, err = s.Info(ctx); return err }); err != nil {
				return nil, err
			}
			if seq > info.State.LastSeq {
				break
			}
			last = info.State.LastSeq
		}
		var m *jetstream.RawStreamMsg
		err := call(func(ctx context.Context) (err error) { m, err = s.GetMsg(ctx, seq); return err })
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue // acked off the work queue: moved downstream
		}
		if err != nil {
			return nil, fmt.Errorf("stream %s seq %d: %w", stream, seq, err)
		}
		id := m.Header.Get(jsq.UUIDHeader)
		if id == "" {
			return nil, fmt.Errorf("stream %s seq %d: no UUID header", stream, seq)
		}
		out[id] = ""
		if key != "" {
			out[id] = m.Header.Get(key)
		}
	}
	return out, nil
}

// account checks that no published message is lost: each was delivered to
// the partner, dead-lettered with a reason, or is still queued (in the
// work or retry stream). It returns the counts. It takes the published
// messages first, then reads in the direction messages move (work stream,
// retry stream, dead letters, partner), so a message moving on while it
// reads is seen downstream.
func (e *env) account(p *partner) (delivered, dead, queued int) {
	t := e.t
	t.Helper()
	e.mu.Lock()
	ids := slices.Clone(e.ids) // first: a message published later is not checked
	e.mu.Unlock()
	work, err := e.streamMessages(e.topic, "")
	if err != nil {
		t.Fatalf("read work stream: %v", err)
	}
	retry, err := e.streamMessages(e.retry, "")
	if err != nil {
		t.Fatalf("read retry queue: %v", err)
	}
	deadMsgs, err := e.streamMessages(e.dead, retryqueue.MetaDeadReason)
	if err != nil {
		t.Fatalf("read dead letters: %v", err)
	}
	p.mu.Lock()
	accepted := maps.Clone(p.accepted)
	p.mu.Unlock()
	var lost []string
	for _, id := range ids {
		_, inRetry := retry[id]
		_, inWork := work[id]
		reason, isDead := deadMsgs[id]
		switch {
		case accepted[id] > 0:
			delivered++
		case isDead:
			dead++
			if reason == "" {
				t.Errorf("message %s dead-lettered without a reason", id)
			}
		case inRetry || inWork:
			queued++
		default:
			lost = append(lost, id)
		}
	}
	if len(lost) > 0 {
		t.Errorf("%d of %d messages lost (neither delivered, dead-lettered nor queued): %v", len(lost), len(ids), lost[:min(len(lost), 10)])
	}
	return delivered, dead, queued
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
	trans     []stateAt   // every transition
	opens     int
	unmarked  int // probes the replica made without marking them X-Probe
	lines     map[string]bool
	exited    chan struct{}
}

func (e *env) startReplica(rc replicaConfig) *replica {
	t := e.t
	t.Helper()
	rc.URLs, rc.Bucket, rc.Topic, rc.Consumer, rc.Retry, rc.Dead = theCluster.urls(), e.bucket, e.topic, e.consumer, e.retry, e.dead
	if rc.DrainRate == 0 {
		rc.DrainRate = 20 // a third of 60/s
	}
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
	case <-time.After(time.Minute): // a hang guard: a -race child process starting on a loaded machine
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
		r.trans = append(r.trans, stateAt{parseState(f[1]), time.Unix(0, ns)})
		switch f[1] {
		case "closed":
			r.closedAt = append(r.closedAt, time.Unix(0, ns))
		case "open":
			r.opens++
		}
	case len(f) == 4 && f[0] == "S":
		r.state = parseState(f[1])
		r.connected = f[2] == "true"
		r.unmarked, _ = strconv.Atoi(f[3])
	default:
		r.lines[s] = true
	}
}

// stateAt is a transition of a replica's breaker.
type stateAt struct {
	to breaker.State
	at time.Time
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

func (r *replica) unmarkedProbes() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.unmarked
}

// entered returns how many times the replica's breaker went to st.
func (r *replica) entered(st breaker.State) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, tr := range r.trans {
		if tr.to == st {
			n++
		}
	}
	return n
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
func eventually(t testing.TB, timeout time.Duration, cond func() bool, msg string, args ...any) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", timeout, fmt.Sprintf(msg, args...))
		}
		time.Sleep(20 * time.Millisecond)
	}
}
