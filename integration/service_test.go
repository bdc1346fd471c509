package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/jsq"
	"github.com/floodgate-go/floodgate/middleware"
	"github.com/floodgate-go/floodgate/retryqueue"
)

// envService makes the test binary run as a service wired as the README's
// "Composing the parts yourself" shows: its value is the JSON serviceConfig. The
// process runs until its standard input closes or it is killed.
const envService = "FLOODGATE_IT_SERVICE"

// serviceHandler is the router handler name of a README service: with the
// source topic it makes the route's service, ServiceName(topic, "as2").
const serviceHandler = "as2"

// Headers a README service's delivery sets on its POST to the partner.
const (
	hdrMessageID = "Message-Id"
	hdrService   = "X-Service" // the sending service's source topic
)

// serviceConfig is what a README service process needs.
type serviceConfig struct {
	NATSURL, PartnerURL string
	// Topic is the source topic; every retry queue setting is left to its
	// default.
	Topic string
}

// runServiceProcess wires one service exactly as the README does, with
// every route default (retry and dead-letter topics, service name, partner,
// drainer consumer), and runs it until standard input closes. The one
// change is a shorter MaxOpenWindow (2 s, default 30 s), so the test's
// recovery does not wait out a long open window; it does not touch routes.
func runServiceProcess(raw string) int {
	var cfg serviceConfig
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "service:", err)
		return 2
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stop, err := startService(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "service:", err)
		return 1
	}
	fmt.Println("ready")
	_, _ = io.Copy(io.Discard, os.Stdin) // until the parent closes it
	stop()
	return 0
}

// startService is the README's wiring; stop closes the router and the
// drainer.
func startService(ctx context.Context, cfg serviceConfig) (stop func(), err error) {
	natsURL := cfg.NATSURL
	nc, err := jsq.Connect(natsURL)
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	pub, err := jsq.NewPublisher(jsq.PublisherConfig{Conn: nc})
	if err != nil {
		return nil, err
	}
	subscriber, err := jsq.NewSubscriber(jsq.SubscriberConfig{URL: natsURL, Concurrency: 4})
	if err != nil {
		return nil, err
	}
	qcfg := retryqueue.Config{Publisher: pub, Source: cfg.Topic, Handler: serviceHandler}
	if err := retryqueue.Provision(ctx, js, qcfg); err != nil {
		return nil, fmt.Errorf("provision: %w", err)
	}
	b, err := breaker.New(breaker.Config{Name: cfg.Topic, ProbeConcurrency: 2, SuccessesToClose: 5, SlowCallDuration: 2 * time.Second,
		MaxOpenWindow: 2 * time.Second})
	if err != nil {
		return nil, err
	}
	q, err := retryqueue.New(qcfg)
	if err != nil {
		return nil, err
	}
	guard, err := middleware.New(middleware.Config{Breaker: b, Queue: q, Timeout: 10 * time.Second})
	if err != nil {
		return nil, err
	}
	guarded := guard(deliverTo(cfg.PartnerURL, cfg.Topic))

	router, err := message.NewRouter(message.RouterConfig{}, watermill.NopLogger{})
	if err != nil {
		return nil, err
	}
	router.AddConsumerHandler(serviceHandler, cfg.Topic, subscriber, func(msg *message.Message) error {
		_, err := guarded(msg)
		return err
	})
	drainer, err := retryqueue.NewDrainer(retryqueue.DrainerConfig{
		JetStream: js, Queue: q, Handler: guarded, Gate: middleware.DrainGate(b),
	})
	if err != nil {
		return nil, err
	}
	b.AddListener(func(breaker.Transition) { drainer.Wake() })

	rctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		if err := drainer.Run(rctx); err != nil && !errors.Is(err, context.Canceled) {
			fmt.Fprintln(os.Stderr, "service: drainer:", err)
			os.Exit(1) // a route conflict is the bug this test looks for
		}
	}()
	go func() { defer wg.Done(); _ = router.Run(rctx) }()
	select {
	case <-router.Running():
	case <-time.After(time.Minute):
		cancel()
		return nil, errors.New("router did not start")
	}
	return func() {
		cancel()
		_ = router.Close()
		wg.Wait()
		nc.Close()
	}, nil
}

// deliverTo is the README's deliverToPartner: an HTTP POST of the payload
// to the partner, whose non-2xx answer is a retryable failure.
func deliverTo(url, service string) message.HandlerFunc {
	client := &http.Client{}
	return func(m *message.Message) ([]*message.Message, error) {
		req, err := http.NewRequestWithContext(m.Context(), http.MethodPost, url, bytes.NewReader(m.Payload))
		if err != nil {
			return nil, err
		}
		req.Header.Set(hdrMessageID, m.UUID)
		req.Header.Set(hdrService, service)
		resp, err := client.Do(req)
		if err != nil {
			return nil, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			return nil, fmt.Errorf("partner answered %s", resp.Status)
		}
		return nil, nil
	}
}

// endpoint is a README service's partner: an HTTP server in the test
// process that records every message it accepts (the service processes post
// to it), and answers 503 while down.
type endpoint struct {
	srv  *httptest.Server
	down atomic.Bool

	mu   sync.Mutex
	got  map[string]int // Message-Id -> deliveries accepted
	from map[string]int // sending service -> deliveries accepted
}

func newEndpoint(t testing.TB) *endpoint {
	e := &endpoint{got: map[string]int{}, from: map[string]int{}}
	e.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if e.down.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		e.mu.Lock()
		e.got[r.Header.Get(hdrMessageID)]++
		e.from[r.Header.Get(hdrService)]++
		e.mu.Unlock()
	}))
	t.Cleanup(e.srv.Close)
	return e
}

// tally counts ids delivered (once or more), their duplicates, and ids
// never delivered.
func (e *endpoint) tally(ids []string) (unique, dups, lost int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, id := range ids {
		switch n := e.got[id]; n {
		case 0:
			lost++
		default:
			unique++
			dups += n - 1
		}
	}
	return unique, dups, lost
}

// foreign counts the deliveries e accepted of messages produced on another
// topic than own (a producer's ids are "<topic>-<n>"), and those posted by
// another service than own's.
func (e *endpoint) foreign(own string) (messages, senders int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for id, n := range e.got {
		if !strings.HasPrefix(id, own+"-") {
			messages += n
		}
	}
	for s, n := range e.from {
		if s != own {
			senders += n
		}
	}
	return messages, senders
}
