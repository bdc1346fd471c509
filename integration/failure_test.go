package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/internal/natstest"
	"github.com/floodgate-go/floodgate/retryqueue"
)

// consumerProcess is a consumer (or a service) in a separate process: this
// test binary re-executed with envConsumer (or envService).
type consumerProcess struct {
	cmd   *exec.Cmd
	stdin interface{ Close() error }
}

func startConsumerProcess(t *testing.T, cfg consumerConfig) *consumerProcess {
	t.Helper()
	return startProcess(t, envConsumer, cfg)
}

// startProcess re-executes this test binary with env set to cfg in JSON
// (TestMain picks the role from env) and waits for it to print "ready".
// The process ends when its standard input closes: at cleanup, or when this
// process dies; a cleanup kills it if it has not ended within a minute.
func startProcess(t *testing.T, env string, cfg any) *consumerProcess {
	t.Helper()
	raw, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env+"="+string(raw))
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
	cp := &consumerProcess{cmd: cmd, stdin: stdin}
	t.Cleanup(func() {
		_ = stdin.Close()
		if cmd.ProcessState == nil {
			done := make(chan struct{})
			go func() { _ = cmd.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(time.Minute):
				_ = cmd.Process.Kill()
				<-done
			}
		}
	})
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if strings.TrimSpace(sc.Text()) == "ready" {
				ready <- true
			}
		}
	}()
	select {
	case <-ready:
	case <-time.After(time.Minute):
		t.Fatalf("%s process not ready", env)
	}
	return cp
}

// kill sends SIGKILL and waits for the process to die.
func (cp *consumerProcess) kill(t *testing.T) {
	t.Helper()
	if err := cp.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cp.cmd.Wait()
	if ws, ok := cp.cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("consumer process ended with %v, want killed by SIGKILL", cp.cmd.ProcessState)
	}
}

// fill builds a backlog: with the partner down, n messages are published
// and all diverted to the retry stream by the consumer.
func fill(t *testing.T, ctx context.Context, url string, tp topics, p *partner, n int, backlogOf func() int) []string {
	t.Helper()
	p.down.Store(true)
	prod := newProducer(t, url, tp.Source)
	if err := prod.publish(ctx, n); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 2*time.Minute, func() bool { return backlogOf() == n }, "all %d diverted (backlog %d)", n, natstest.Now(func() any { return backlogOf() }))
	return prod.published()
}

// The consumer process is killed with SIGKILL in mid-drain and started
// again: every message still reaches the partner.
func TestConsumerKilledMidDrain(t *testing.T) {
	skipShort(t)
	srv := natstest.Server(t)
	url := srv.ClientURL()
	tp := newTopics(t)
	js := natstest.JetStream(t, natstest.Conn(t, url))
	p := newPartner(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cfg := consumerConfig{NATSURL: url, PartnerURL: p.srv.URL, Topics: tp, DrainRate: 40}
	cp := startConsumerProcess(t, cfg)
	depth := func() int {
		n, err := retryqueue.Depth(ctx, js, tp.Retry, retryqueue.ConsumerName(retryqueue.ServiceName(tp.Source, "deliver"), retryqueue.DefaultPartner))
		if err != nil {
			return -1
		}
		return int(n)
	}
	const n = 400
	ids := fill(t, ctx, url, tp, p, n, depth)

	p.setCapacity(80) // the drain takes a few seconds
	p.down.Store(false)
	natstest.Eventually(t, 2*time.Minute, func() bool { u, _, _ := p.tally(ids); return u >= n/4 }, "drain under way")
	cp.kill(t)
	unique, _, _ := p.tally(ids)
	left := depth()
	t.Logf("killed with %d delivered, backlog %d", unique, left)
	if left <= 0 || unique >= n {
		t.Fatalf("not mid-drain when killed: delivered %d, backlog %d", unique, left)
	}

	startConsumerProcess(t, cfg)
	natstest.Eventually(t, 2*time.Minute, func() bool { _, _, lost := p.tally(ids); return lost == 0 }, "all delivered after the restart")
	unique, dups, lost := p.tally(ids)
	t.Logf("produced %d, delivered %d unique, duplicates %d, lost %d", n, unique, dups, lost)
	natstest.Eventually(t, time.Minute, func() bool { return depth() == 0 }, "backlog empty")
}

// The NATS server is restarted in mid-drain: every message still reaches
// the partner.
func TestServerRestartedMidDrain(t *testing.T) {
	skipShort(t)
	srv := natstest.Server(t)
	url := srv.ClientURL()
	tp := newTopics(t)
	p := newPartner(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c, err := startConsumer(ctx, consumerConfig{NATSURL: url, PartnerURL: p.srv.URL, Topics: tp, DrainRate: 40})
	if err != nil {
		t.Fatal(err)
	}
	defer c.stop()
	const n = 400
	ids := fill(t, ctx, url, tp, p, n, func() int { return backlog(c) })

	p.setCapacity(80)
	p.down.Store(false)
	natstest.Eventually(t, 2*time.Minute, func() bool { u, _, _ := p.tally(ids); return u >= n/4 }, "drain under way")
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	unique, _, _ := p.tally(ids)
	t.Logf("server restarted with %d delivered", unique)
	if unique >= n {
		t.Fatal("not mid-drain at the restart")
	}
	natstest.Eventually(t, 2*time.Minute, func() bool { _, _, lost := p.tally(ids); return lost == 0 }, "all delivered after the restart")
	natstest.Eventually(t, time.Minute, func() bool { return backlog(c) == 0 }, "backlog empty")
	unique, dups, lost := p.tally(ids)
	t.Logf("produced %d, delivered %d unique, duplicates %d, lost %d; drainer %+v", n, unique, dups, lost, c.drainer.Stats())
}

// With MaxAckPending = 2 on the source consumer and the breaker open, 500
// published messages are all diverted, each once: diversion acks each
// source message at once, so the consumer never stalls.
func TestLowMaxAckPendingDivertsQuickly(t *testing.T) {
	skipShort(t)
	url := natstest.URL(t)
	tp := newTopics(t)
	js := natstest.JetStream(t, natstest.Conn(t, url))
	natstest.DeleteStreams(t, js, tp.Source, tp.Retry, tp.Dead)
	p := newPartner(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c, err := startConsumer(ctx, consumerConfig{NATSURL: url, PartnerURL: p.srv.URL, Topics: tp, MaxAckPending: 2, ForceOpen: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.stop()
	const n = 500
	prod := newProducer(t, url, tp.Source)
	if err := prod.publish(ctx, n); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	// A diversion that left its source message pending would stall the
	// consumer for an AckWait (5 s) per pair and divert the redelivered
	// copy again: the hang guard is far below 250 such stalls, and the count
	// must be exact.
	natstest.Eventually(t, 2*time.Minute, func() bool { return c.events.diverted.Load() >= n && backlog(c) >= n },
		"all %d diverted (diverted %d, backlog %d)", n, natstest.Now(func() any { return c.events.diverted.Load() }), natstest.Now(func() any { return backlog(c) }))
	if d, b := c.events.diverted.Load(), backlog(c); d != n || b != n {
		t.Errorf("diverted %d, backlog %d; want %d each: a message was diverted twice", d, b, n)
	}
	t.Logf("%d diverted %.2fs after publishing; partner saw %d requests", n, time.Since(start).Seconds(), p.as2.Stats().Requests)
	if p.as2.Stats().Requests != 0 {
		t.Fatalf("partner got %d requests while the breaker was forced open", p.as2.Stats().Requests)
	}
}

// With the partner back and no live traffic at all, half-open probes come
// from the backlog: the breaker closes and the backlog drains without a
// single new message.
func TestHalfOpenProbesFromBacklog(t *testing.T) {
	skipShort(t)
	url := natstest.URL(t)
	tp := newTopics(t)
	js := natstest.JetStream(t, natstest.Conn(t, url))
	natstest.DeleteStreams(t, js, tp.Source, tp.Retry, tp.Dead)
	p := newPartner(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c, err := startConsumer(ctx, consumerConfig{NATSURL: url, PartnerURL: p.srv.URL, Topics: tp})
	if err != nil {
		t.Fatal(err)
	}
	defer c.stop()
	ids := fill(t, ctx, url, tp, p, 100, func() int { return backlog(c) })
	live := c.events.delivered.Load()
	up := time.Now()
	p.down.Store(false)
	natstest.Eventually(t, time.Minute, func() bool { _, ok := c.closedSince(up); return ok }, "breaker closed on backlog probes")
	natstest.Eventually(t, time.Minute, func() bool { _, _, lost := p.tally(ids); return lost == 0 }, "backlog delivered")
	natstest.Eventually(t, time.Minute, func() bool { return c.drainer.Stats().Drained >= 100 && backlog(c) == 0 },
		"drained %d, want >= 100: the probes and the drain come from the backlog", natstest.Now(func() any { return c.drainer.Stats().Drained }))
	t.Logf("closed %.2fs after the partner came back; %d deliveries (live before: %d)", time.Since(up).Seconds(), c.events.delivered.Load(), live)
}

// Closing the consumer while it diverts acks nothing without a durable
// copy: after a second consumer takes over, every message is in the retry
// stream (some perhaps twice), none lost to a closed publisher.
func TestShutdownMidDiversionLosesNothing(t *testing.T) {
	skipShort(t)
	url := natstest.URL(t)
	tp := newTopics(t)
	js := natstest.JetStream(t, natstest.Conn(t, url))
	natstest.DeleteStreams(t, js, tp.Source, tp.Retry, tp.Dead)
	p := newPartner(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cfg := consumerConfig{NATSURL: url, PartnerURL: p.srv.URL, Topics: tp, ForceOpen: true}
	c, err := startConsumer(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	const n = 1000
	prod := newProducer(t, url, tp.Source)
	if err := prod.publish(ctx, n); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, time.Minute, func() bool { return c.events.diverted.Load() >= 50 }, "diverting")
	c.stop()
	first := c.events.diverted.Load()
	t.Logf("closed after %d diversions (%d nacked)", first, c.events.nacked.Load())
	if first >= n {
		t.Log("all diverted before the close; the close raced nothing")
	}
	c2, err := startConsumer(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.stop()
	want := map[string]bool{}
	for _, id := range prod.published() {
		want[id] = true
	}
	natstest.Eventually(t, 2*time.Minute, func() bool {
		got := map[string]bool{}
		for _, m := range natstest.StreamMsgs(t, js, tp.Retry) {
			got[m.UUID] = true
		}
		for id := range want {
			if !got[id] {
				return false
			}
		}
		return true
	}, "every message in the retry stream")
}
