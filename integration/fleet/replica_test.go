package fleet

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/breaker/natskv"
	"github.com/floodgate-go/floodgate/deliver"
	"github.com/floodgate-go/floodgate/deliver/webhook"
	"github.com/floodgate-go/floodgate/jsq"
	"github.com/floodgate-go/floodgate/middleware"
	"github.com/floodgate-go/floodgate/retryqueue"
)

// envReplica makes the test binary run as a consumer replica; its value is
// the JSON replicaConfig.
const envReplica = "FLOODGATE_FLEET_REPLICA"

// replicaConfig configures one replica process.
type replicaConfig struct {
	URLs      string // NATS server list
	Bucket    string // KV bucket of the breakers
	Topic     string // work topic (stream and subject)
	Consumer  string // its durable consumer, shared by the replicas
	Retry     string // retry topic
	Dead      string // dead-letter topic
	Partner   string // partner URL
	Replica   string
	Workers   int     // live messages in flight (router), and drained ones
	DrainRate float64 // the drainer's start rate, messages/s (max 4x)
	Shared    bool    // join the fleet (false: an independent breaker)
	Breaker   breakerSettings
	LeaseTTL  time.Duration
	// CallTimeout bounds each partner call (a probe too); 0: 1.5 s, or
	// 3/4 of LeaseTTL if less. Keep it below LeaseTTL.
	CallTimeout time.Duration
	// OpTimeout bounds each KV store call; 0: 500 ms. A call that times
	// out counts toward falling back to the local breaker.
	OpTimeout time.Duration
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
		SlowCallDuration: time.Second, MaxProbeWait: s.MaxProbeWait,
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

// runReplica is the replica process, composed as a production consumer is:
// a Watermill router consuming the work topic through a [jsq.Subscriber]
// (Workers pull loops), each message through floodgate's middleware
// ([middleware.New]) around a webhook delivery to the partner, a
// [retryqueue.Queue] taking the messages the breaker rejects or whose
// delivery failed, and a [retryqueue.Drainer] draining that backlog back
// through the same guarded handler. It prints "ready", then a line per
// transition ("T <state> <unix ns>") and a status line every 50 ms
// ("S <state> <connected> <unmarked probes>"). Commands on stdin: "cutkv"
// closes the KV connection, "rejoin" opens a new one. On end of input it
// closes the router, then the drainer, and leaves the fleet.
func runReplica(raw string) int {
	var cfg replicaConfig
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "replica:", err)
		return 2
	}
	fail := func(what string, err error) int {
		fmt.Fprintf(os.Stderr, "replica %s: %s: %v\n", cfg.Replica, what, err)
		return 1
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
		return fail("breaker", err)
	}
	var fleet *breaker.Fleet
	var kvConn atomic.Pointer[nats.Conn]
	sw := &switchStore{}
	opTimeout := 500 * time.Millisecond
	if cfg.OpTimeout > 0 {
		opTimeout = cfg.OpTimeout
	}
	if cfg.Shared {
		nc, s, err := kvStore(ctx, cfg.URLs, cfg.Bucket, cfg.Replica+"-kv")
		if err != nil {
			return fail("kv", err)
		}
		kvConn.Store(nc)
		sw.cur.Store(s)
		fleet, err = breaker.JoinFleet(b, breaker.FleetConfig{
			Store: sw, Replica: cfg.Replica, ProbeLeaseTTL: cfg.LeaseTTL,
			OpTimeout: opTimeout, ResyncInterval: 250 * time.Millisecond, FallbackAfter: time.Second,
		})
		if err != nil {
			return fail("join", err)
		}
		defer fleet.Leave()
	}

	nc, err := jsq.Connect(cfg.URLs, nats.Name(cfg.Replica), nats.ReconnectWait(50*time.Millisecond), nats.Timeout(2*time.Second))
	if err != nil {
		return fail("connect", err)
	}
	defer nc.Close() // after the router and the drainer: no diversion loses its publisher
	js, err := jetstream.New(nc)
	if err != nil {
		return fail("jetstream", err)
	}
	pub, err := jsq.NewPublisher(jsq.PublisherConfig{Conn: nc, PublishTimeout: 2 * time.Second})
	if err != nil {
		return fail("publisher", err)
	}
	qcfg := retryqueue.Config{
		Publisher: pub, Source: cfg.Topic, Handler: "deliver", RetryTopic: cfg.Retry, DeadLetterTopic: cfg.Dead,
		PublishTimeout: 2 * time.Second, MaxAttempts: 1000,
		Backoff: retryqueue.ExponentialBackoff(100*time.Millisecond, time.Second),
	}
	for {
		pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
		err = retryqueue.Provision(pctx, js, qcfg) // finds the R3 streams the test created
		pcancel()
		if err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	q, err := retryqueue.New(qcfg)
	if err != nil {
		return fail("queue", err)
	}

	// The call timeout stays below the probe lease TTL: a probe outliving
	// its lease would let another replica's probe take the slot.
	callTimeout := min(1500*time.Millisecond, cfg.LeaseTTL*3/4)
	if cfg.CallTimeout > 0 {
		callTimeout = cfg.CallTimeout
	}
	sender, err := webhook.NewSender(webhook.Config{
		URL: cfg.Partner, BodyFormat: webhook.FormatRaw, Timeout: callTimeout,
		Header: http.Header{"X-Replica": {cfg.Replica}},
	})
	if err != nil {
		return fail("sender", err)
	}
	// The partner counts probes by the X-Probe header, which the handler
	// sets when middleware.IsProbe says its call is one; OnEvent checks the
	// mark against the permit (Event.Probe) and counts probes that went
	// unmarked, which the tests require to be none (an unmarked probe would
	// hide from the partner's count of probes in flight).
	var marked sync.Map // UUID -> marked as a probe
	var unmarked atomic.Int64
	var drainer *retryqueue.Drainer
	guard, err := middleware.New(middleware.Config{
		Breaker: b, Queue: q, Timeout: callTimeout,
		OnEvent: func(ev middleware.Event) {
			if !ev.Admitted {
				return
			}
			if m, _ := marked.LoadAndDelete(ev.UUID); ev.Probe && m != true {
				unmarked.Add(1)
			}
			drainer.Observe(ev.UUID, ev.Action == middleware.Diverted && ev.Reason == string(retryqueue.ReasonFailure), ev.Latency)
		},
	})
	if err != nil {
		return fail("middleware", err)
	}
	client := &http.Client{}
	guarded := guard(func(m *message.Message) ([]*message.Message, error) {
		req, err := sender.NewRequest(m.Context(), m.UUID, m.Payload)
		if err != nil {
			return nil, &deliver.Error{Kind: deliver.ErrPermanent, Op: "send", Cause: err}
		}
		probe := middleware.IsProbe(m.Context())
		marked.Store(m.UUID, probe)
		if probe {
			req.Header.Set("X-Probe", "1")
		}
		if retryqueue.FromDrain(m.Context()) {
			req.Header.Set("X-Drained", "1")
		}
		resp, err := client.Do(req)
		if err != nil {
			return nil, &deliver.Error{Kind: deliver.ErrRetryable, Op: "send", Cause: err}
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		return nil, deliver.ClassifyHTTP(resp.StatusCode, resp.Header.Get("Retry-After"))
	})
	drainer, err = retryqueue.NewDrainer(retryqueue.DrainerConfig{
		JetStream: js, Queue: q, Handler: guarded, Gate: middleware.DrainGate(b),
		Rate: cfg.DrainRate, MaxRate: cfg.DrainRate * 4, MaxInFlight: cfg.Workers,
		SlowCall: b.Config().SlowCallDuration, AckWait: 5 * time.Second, PollInterval: 20 * time.Millisecond,
		NakDelay: func(uint64) time.Duration { return 150 * time.Millisecond },
	})
	if err != nil {
		return fail("drainer", err)
	}
	b.AddListener(func(t breaker.Transition) {
		say("T %s %d", t.To, t.At.UnixNano())
		drainer.Wake()
	})

	var wg sync.WaitGroup
	rctx, rcancel := context.WithCancel(ctx)
	defer rcancel()
	wg.Go(func() { _ = drainer.Run(rctx) })
	// The router runs once its subscription exists. Creating the durable
	// consumer on the R3 work stream is a JetStream API call with the
	// client's default 5 s timeout, which a loaded machine or a cluster
	// electing a leader can exceed: the router's Run then returns the error
	// and the replica starts a new router. The test's wait for "ready" is
	// the hang guard.
	var router *message.Router
	for {
		sub, err := jsq.NewSubscriber(jsq.SubscriberConfig{
			URL: cfg.URLs, ConnectOptions: []nats.Option{nats.Name(cfg.Replica + "-sub"), nats.ReconnectWait(50 * time.Millisecond)},
			ConsumerName: func(string) string { return cfg.Consumer },
			Concurrency:  cfg.Workers, AckWait: 5 * time.Second, FetchWait: 500 * time.Millisecond,
			NakDelay: func(uint64) time.Duration { return 150 * time.Millisecond },
		})
		if err != nil {
			return fail("subscriber", err)
		}
		router, err = message.NewRouter(message.RouterConfig{CloseTimeout: 5 * time.Second}, watermill.NopLogger{})
		if err != nil {
			return fail("router", err)
		}
		router.AddConsumerHandler("deliver", cfg.Topic, sub, func(m *message.Message) error {
			_, err := guarded(m)
			return err
		})
		runErr := make(chan error, 1)
		wg.Go(func() { runErr <- router.Run(rctx) })
		select {
		case <-router.Running():
		case err := <-runErr:
			fmt.Fprintf(os.Stderr, "replica %s: router: %v; starting another\n", cfg.Replica, err)
			_ = router.Close()
			_ = sub.Close()
			time.Sleep(100 * time.Millisecond)
			continue
		}
		break
	}
	wg.Go(func() {
		for rctx.Err() == nil {
			connected := fleet == nil || fleet.Connected()
			say("S %s %v %d", b.State(), connected, unmarked.Load())
			time.Sleep(50 * time.Millisecond)
		}
	})
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
				return fail("rejoin", err)
			}
			kvConn.Store(c)
			sw.cur.Store(s)
			fleet.Resync()
			say("rejoined")
		}
	}
	_ = router.Close()
	rcancel()
	wg.Wait()
	return 0
}
