package fleet

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/breaker/natskv"
)

// envReplica makes the test binary run as a consumer replica; its value is
// the JSON replicaConfig.
const envReplica = "FLOODGATE_FLEET_REPLICA"

// replicaConfig configures one replica process.
type replicaConfig struct {
	URLs     string // NATS server list
	Bucket   string // KV bucket of the breakers
	Stream   string
	Consumer string
	Partner  string // partner URL
	Replica  string
	Workers  int  // messages in flight
	Shared   bool // join the fleet (false: an independent breaker)
	Breaker  breakerSettings
	LeaseTTL time.Duration
}

// breakerSettings are the breaker.Config fields the tests vary.
type breakerSettings struct {
	WindowSize, MinimumCalls           int
	BaseOpenWindow, MaxOpenWindow      time.Duration
	ProbeConcurrency, SuccessesToClose int
	MaxProbeWait                       time.Duration
}

func (s breakerSettings) config(name string) breaker.Config {
	return breaker.Config{
		Name: name, WindowSize: s.WindowSize, MinimumCalls: s.MinimumCalls,
		BaseOpenWindow: s.BaseOpenWindow, MaxOpenWindow: s.MaxOpenWindow,
		ProbeConcurrency: s.ProbeConcurrency, SuccessesToClose: s.SuccessesToClose,
		SlowCallDuration: time.Second, MaxProbeWait: s.MaxProbeWait, HalfOpenBound: 4 * s.MaxProbeWait,
	}
}

// switchStore is a breaker.Store whose backing store the replica replaces
// when it reconnects to KV after a cut ("rejoin").
type switchStore struct{ cur atomic.Pointer[natskv.Store] }

func (s *switchStore) Load(ctx context.Context, n string) (breaker.SharedState, uint64, error) {
	return s.cur.Load().Load(ctx, n)
}
func (s *switchStore) CompareAndSwap(ctx context.Context, n string, st breaker.SharedState, rev uint64) (uint64, error) {
	return s.cur.Load().CompareAndSwap(ctx, n, st, rev)
}
func (s *switchStore) Watch(ctx context.Context, n string, fn func(breaker.SharedState, uint64, error)) error {
	return s.cur.Load().Watch(ctx, n, fn)
}
func (s *switchStore) AcquireProbe(ctx context.Context, n string, slots int, ttl time.Duration, h string) (breaker.ProbeLease, error) {
	return s.cur.Load().AcquireProbe(ctx, n, slots, ttl, h)
}
func (s *switchStore) ReleaseProbe(ctx context.Context, l breaker.ProbeLease) error {
	return s.cur.Load().ReleaseProbe(ctx, l)
}

const breakerName = "partner"

func connect(urls, name string) (*nats.Conn, error) {
	return nats.Connect(urls, nats.Name(name), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond),
		nats.RetryOnFailedConnect(true), nats.Timeout(2*time.Second))
}

func kvStore(ctx context.Context, urls, bucket, name string) (*nats.Conn, *natskv.Store, error) {
	nc, err := connect(urls, name)
	if err != nil {
		return nil, nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	s, err := natskv.New(ctx, js, natskv.Config{Bucket: bucket, Bind: true})
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return nc, s, nil
}

// runReplica is the replica process: it consumes the work stream with
// Workers goroutines, calls the partner through the breaker for each
// message, acks on success and naks with a delay otherwise (a rejected
// message waits in JetStream: nothing is lost). It prints "ready", then a
// line per transition ("T <state> <unix ns>") and a status line every 50 ms
// ("S <state> <connected>"). Commands on stdin: "cutkv" closes the KV
// connection, "rejoin" opens a new one.
func runReplica(raw string) int {
	var cfg replicaConfig
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "replica:", err)
		return 2
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var outMu sync.Mutex
	say := func(format string, args ...any) {
		outMu.Lock()
		fmt.Printf(format+"\n", args...)
		outMu.Unlock()
	}

	b, err := breaker.New(cfg.Breaker.config(breakerName))
	if err != nil {
		fmt.Fprintln(os.Stderr, "replica:", err)
		return 1
	}
	b.AddListener(func(t breaker.Transition) { say("T %s %d", t.To, t.At.UnixNano()) })

	var fleet *breaker.Fleet
	var kvConn atomic.Pointer[nats.Conn]
	sw := &switchStore{}
	if cfg.Shared {
		nc, s, err := kvStore(ctx, cfg.URLs, cfg.Bucket, cfg.Replica+"-kv")
		if err != nil {
			fmt.Fprintln(os.Stderr, "replica: kv:", err)
			return 1
		}
		kvConn.Store(nc)
		sw.cur.Store(s)
		fleet, err = breaker.JoinFleet(b, breaker.FleetConfig{
			Store: sw, Replica: cfg.Replica, ProbeLeaseTTL: cfg.LeaseTTL,
			OpTimeout: 500 * time.Millisecond, ResyncInterval: 250 * time.Millisecond, FallbackAfter: time.Second,
		})
		if err != nil {
			fmt.Fprintln(os.Stderr, "replica: join:", err)
			return 1
		}
		defer fleet.Leave()
	}

	nc, err := connect(cfg.URLs, cfg.Replica)
	if err != nil {
		fmt.Fprintln(os.Stderr, "replica:", err)
		return 1
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		fmt.Fprintln(os.Stderr, "replica:", err)
		return 1
	}
	var cons jetstream.Consumer
	for {
		cctx, ccancel := context.WithTimeout(ctx, 2*time.Second)
		cons, err = js.Consumer(cctx, cfg.Stream, cfg.Consumer)
		ccancel()
		if err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The call timeout stays below the probe lease TTL: a probe outliving
	// its lease would let another replica's probe take the slot.
	client := &http.Client{Timeout: min(5*time.Second, cfg.LeaseTTL*3/4)}
	var wg sync.WaitGroup
	for range cfg.Workers {
		wg.Go(func() {
			for ctx.Err() == nil {
				batch, err := cons.Fetch(1, jetstream.FetchMaxWait(500*time.Millisecond))
				if err != nil {
					time.Sleep(50 * time.Millisecond)
					continue
				}
				for m := range batch.Messages() {
					handle(ctx, b, client, cfg, m)
				}
			}
		})
	}
	go func() {
		for ctx.Err() == nil {
			connected := fleet == nil || fleet.Connected()
			say("S %s %v", b.State(), connected)
			time.Sleep(50 * time.Millisecond)
		}
	}()
	say("ready")
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		switch strings.TrimSpace(in.Text()) {
		case "cutkv":
			if c := kvConn.Load(); c != nil {
				c.Close()
			}
			say("cut")
		case "rejoin":
			c, s, err := kvStore(ctx, cfg.URLs, cfg.Bucket, cfg.Replica+"-kv2")
			if err != nil {
				fmt.Fprintln(os.Stderr, "replica: rejoin:", err)
				return 1
			}
			kvConn.Store(c)
			sw.cur.Store(s)
			fleet.Resync()
			say("rejoined")
		}
	}
	cancel()
	wg.Wait()
	return 0
}

func handle(ctx context.Context, b *breaker.Breaker, client *http.Client, cfg replicaConfig, m jetstream.Msg) {
	p, err := b.Allow()
	if err != nil {
		_ = m.NakWithDelay(150 * time.Millisecond)
		return
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, cfg.Partner, strings.NewReader(string(m.Data())))
	req.Header.Set("X-Msg-Id", string(m.Data()))
	req.Header.Set("X-Replica", cfg.Replica)
	if p.IsProbe() {
		req.Header.Set("X-Probe", "1")
	}
	resp, err := client.Do(req)
	if err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			err = fmt.Errorf("partner: HTTP %d", resp.StatusCode)
		}
	}
	if errors.Is(err, context.Canceled) {
		p.Cancel()
		return
	}
	p.Done(err)
	if err != nil {
		_ = m.NakWithDelay(150 * time.Millisecond)
		return
	}
	_ = m.Ack()
}
