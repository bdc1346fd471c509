package main

import (
	"context"
	"crypto/rand"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/google/uuid"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/deliver/webhook"
	"github.com/floodgate-go/floodgate/deliver/webhook/webhooktest"
	"github.com/floodgate-go/floodgate/internal/exampleutil"
	"github.com/floodgate-go/floodgate/jsq"
	"github.com/floodgate-go/floodgate/middleware"
	"github.com/floodgate-go/floodgate/retryqueue"
)

//go:embed testdata/fences.geojson testdata/trace.geojson
var testdata embed.FS

const (
	// shards is the number of fix topics. A vehicle's fixes all go to one
	// shard, consumed by one loop, so they are evaluated in order.
	shards = 4
	// debounce is the number of consecutive fixes that confirm a change of
	// side at a fence.
	debounce = 2
	// deliveryConcurrency is the number of triggers delivered at once.
	deliveryConcurrency = 8
	// probeConcurrency and successesToClose are the design note's 2-probe
	// cap and 5 consecutive successes.
	probeConcurrency = 2
	successesToClose = 5
)

// loadData parses the embedded fences and trace.
func loadData() ([]*fence, []track, error) {
	fb, err := testdata.ReadFile("testdata/fences.geojson")
	if err != nil {
		return nil, nil, err
	}
	fences, err := parseFences(fb)
	if err != nil {
		return nil, nil, err
	}
	tb, err := testdata.ReadFile("testdata/trace.geojson")
	if err != nil {
		return nil, nil, err
	}
	tracks, err := parseTrace(tb)
	return fences, tracks, err
}

// transitionLog records the breaker's transitions for the timeline and the
// summary.
type transitionLog struct {
	mu  sync.Mutex
	all []breaker.Transition
	new []breaker.Transition // not printed yet
}

func (l *transitionLog) add(t breaker.Transition) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.all = append(l.all, t)
	l.new = append(l.new, t)
}

func (l *transitionLog) take() []breaker.Transition {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.new
	l.new = nil
	return out
}

func (l *transitionLog) snapshot() []breaker.Transition {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.all)
}

// latencies collects delivery latencies for the timeline's per-second P99.
type latencies struct {
	mu sync.Mutex
	d  []time.Duration
}

func (l *latencies) add(d time.Duration) {
	l.mu.Lock()
	l.d = append(l.d, d)
	l.mu.Unlock()
}

// takeP99 returns the P99 of the latencies since the last call, and resets.
func (l *latencies) takeP99() time.Duration {
	l.mu.Lock()
	d := l.d
	l.d = nil
	l.mu.Unlock()
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	return d[(len(d)*99+99)/100-1]
}

// emitted is the set of trigger ids the evaluator published.
type emitted struct {
	mu  sync.Mutex
	ids map[string]bool
	n   atomic.Int64 // publishes, with re-publishes
}

func (e *emitted) add(id string) {
	e.n.Add(1)
	e.mu.Lock()
	e.ids[id] = true
	e.mu.Unlock()
}

func (e *emitted) has(id string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.ids[id]
}

func (e *emitted) list() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]string, 0, len(e.ids))
	for id := range e.ids {
		out = append(out, id)
	}
	return out
}

// run does the whole job and returns its summary. The summary is returned
// even with an error when the run got far enough to count anything.
func run(ctx context.Context, o options, out io.Writer) (*summary, error) {
	start := time.Now()
	// Errors only: a panic the router recovers, an unconfirmed diversion.
	logger := watermill.NewSlogLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})))
	runID := strings.ReplaceAll(uuid.NewString()[:8], "-", "")

	fences, tracks, err := loadData()
	if err != nil {
		return nil, err
	}
	tracks = tracks[:min(o.vehicles, len(tracks))]
	eval := &evaluator{fences: fences, dwell: o.dwell, debounce: debounce}

	// 1. NATS JetStream: embedded unless -nats-url.
	nc, err := exampleutil.StartNATS(o.natsURL)
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	fixTopics := make([]string, shards)
	for i := range fixTopics {
		fixTopics[i] = fmt.Sprintf("geofence_fixes_%s_%d", runID, i)
	}
	triggerTopic := "geofence_triggers_" + runID
	if err := nc.EnsureStreams(ctx, append(slices.Clone(fixTopics), triggerTopic)...); err != nil {
		return nil, err
	}

	// 2. The webhook consumer, on a real HTTP server on loopback: it verifies
	// the HMAC signature, records every idempotency key, and follows the
	// design note's script: healthy, then a P99 spike, then recovered.
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return nil, err
	}
	degraded := o.degraded
	if o.degradedCalls > 0 {
		degraded = callHold
	}
	script := webhooktest.Degraded(degraded, o.fast, o.spike, o.slowFraction)
	if o.healthyFor > 0 {
		script = append([]webhooktest.Phase{{Name: "healthy", Duration: o.healthyFor, Latency: o.fast}}, script...)
	}
	consumer, err := webhooktest.New(webhooktest.Config{Secret: secret, Script: script})
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	partner := &recoverySwitch{consumer: consumer, calls: o.degradedCalls, skip: o.healthyFor + degraded}
	httpSrv := &http.Server{Handler: partner, ReadHeaderTimeout: 5 * time.Second}
	go httpSrv.Serve(ln)
	defer httpSrv.Close()
	sender, err := webhook.NewSender(webhook.Config{
		URL:     "http://" + ln.Addr().String() + "/hooks/geofence",
		Secret:  secret,
		Timeout: o.timeout,
	})
	if err != nil {
		return nil, err
	}

	// 3. Breaker (latency-judged), retry queue, middleware, drainer.
	b, err := breaker.New(breaker.Config{
		Name:                  "geofence-webhook",
		Seed:                  o.seed,
		WindowSize:            20,
		MinimumCalls:          10,
		FailureRateThreshold:  0.5,
		SlowCallDuration:      o.slowCall,
		SlowCallRateThreshold: 0.2,
		BaseOpenWindow:        time.Second,
		MaxOpenWindow:         30 * time.Second,
		BackoffFactor:         2,
		Jitter:                0.2,
		ProbeConcurrency:      probeConcurrency,
		SuccessesToClose:      successesToClose,
	})
	if err != nil {
		return nil, err
	}
	defer b.Stop()
	var trans transitionLog
	var lat latencies
	calls := &callLog{slowCall: o.slowCall, before: map[string]int{}}
	mctx, stopMetrics := context.WithCancel(ctx)
	defer stopMetrics()
	m, err := exampleutil.StartMetrics(mctx, o.metricsAddr) // nil when -metrics-addr is off
	if err != nil {
		return nil, err
	}
	guard, err := exampleutil.NewGuard(ctx, exampleutil.GuardConfig{
		NATS:            nc,
		Breaker:         b,
		Source:          triggerTopic,
		Handler:         "trigger-webhook",
		RetryTopic:      "floodgate_retry_" + runID,
		DeadLetterTopic: "floodgate_dead_" + runID,
		Timeout:         o.timeout + 3*time.Second,
		DrainRate:       50,
		Logger:          logger,
		Deliver: func(msg *message.Message) ([]*message.Message, error) {
			_, recovered := partner.recoveredAt(time.Now())
			answered := calls.send(msg.UUID, !recovered, middleware.IsProbe(msg.Context()))
			defer answered()
			return nil, sender.Send(msg.Context(), msg.UUID, msg.Payload)
		},
		OnEvent: func(ev middleware.Event) {
			calls.judged(ev, time.Now())
			m.ObserveEvent(ev)
			if ev.Admitted {
				lat.add(ev.Latency)
			}
		},
		OnTransition: trans.add,
	})
	if err != nil {
		return nil, err
	}
	defer guard.Close()
	if err := errors.Join(m.WatchBreaker(guard.Queue.Partner(), b), m.WatchQueue(guard.Queue), m.WatchDrainer(guard.Queue.Partner(), guard.Drainer)); err != nil {
		return nil, err
	}

	// 4. The router: one evaluator per fix shard, and the guarded delivery
	// of triggers.
	fixSub, err := jsq.NewSubscriber(jsq.SubscriberConfig{URL: nc.URL, Concurrency: 1, AckWait: 30 * time.Second})
	if err != nil {
		return nil, err
	}
	trigSub, err := jsq.NewSubscriber(jsq.SubscriberConfig{URL: nc.URL, Concurrency: deliveryConcurrency, AckWait: 30 * time.Second})
	if err != nil {
		return nil, err
	}
	router, err := message.NewRouter(message.RouterConfig{CloseTimeout: 15 * time.Second}, logger)
	if err != nil {
		return nil, err
	}
	em := &emitted{ids: map[string]bool{}}
	var fixesIn atomic.Int64
	for i, topic := range fixTopics {
		h := &shardHandler{eval: eval, pub: nc.Publisher, topic: triggerTopic, emitted: em, seen: &fixesIn,
			states: map[string]*vehicleState{}}
		router.AddConsumerHandler(fmt.Sprintf("geofence-eval-%d", i), topic, fixSub, h.handle)
	}
	router.AddConsumerHandler("trigger-webhook", triggerTopic, trigSub, func(msg *message.Message) error {
		_, err := guard.Handler(msg)
		return err
	})

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	routerErr := make(chan error, 1)
	wg.Add(2)
	go func() { defer wg.Done(); routerErr <- router.Run(runCtx) }()
	go func() { defer wg.Done(); _ = guard.Drainer.Run(runCtx) }()
	select {
	case <-router.Running():
	case err := <-routerErr:
		return nil, fmt.Errorf("router: %w", err)
	}

	// 5. Replay the trace: one publisher per van, at -speed.
	produceStart := time.Now()
	partner.start(produceStart)
	replayed := make(chan map[string]int, 1)
	go func() { replayed <- replay(runCtx, nc.Publisher, fixTopics, tracks, o) }()

	// 6. Timeline until everything is accounted for or -settle runs out.
	sum := &summary{}
	var published map[string]int // fixes published per vehicle
	var expected map[string]trigger
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	if !o.quiet {
		fmt.Fprintf(out, "%5s  %-9s  %5s  %8s  %8s  %6s  %8s  %7s  %7s  %6s  %-9s  %s\n",
			"t", "breaker", "fixes", "triggers", "admitted", "probes", "diverted", "backlog", "drained", "p99ms", "consumer", "transitions")
	}
	// unsettled counts the messages still in a stream: triggers in the
	// retry backlog, fixes and triggers not yet handled or acked (a fix may
	// still give a trigger). They are queued, not lost.
	unsettled := func(ctx context.Context) int {
		queued := guard.Backlog(ctx)
		for _, topic := range append(slices.Clone(fixTopics), triggerTopic) {
			if n, err := retryqueue.Depth(ctx, nc.JetStream, topic, jsq.DefaultConsumerName(topic)); err == nil {
				queued += int(n)
			}
		}
		return queued
	}
	type snap struct{ fixes, triggers, admitted, probes, diverted, drained int64 }
	var prev snap
	var settleBy time.Time
	recovered := false
	for done := false; !done; {
		select {
		case <-ctx.Done():
			done = true
		case published = <-replayed:
			settleBy = time.Now().Add(o.settle)
			replayed = nil
			expected = eval.evaluateAll(tracks, published)
		case now := <-tick.C:
			c := guard.Counters
			cur := snap{fixesIn.Load(), em.n.Load(), c.Admitted.Load(), c.Probes.Load(), c.Diverted.Load(), int64(guard.Drainer.Stats().Drained)}
			depth := guard.Backlog(runCtx)
			sum.BacklogPeak = max(sum.BacklogPeak, depth)
			recoverAt, isRecovered := partner.recoveredAt(now)
			if !o.quiet {
				if !recovered && isRecovered {
					fmt.Fprintf(out, "%4.1fs  ---- consumer recovered ----\n", recoverAt.Sub(produceStart).Seconds())
				}
				fmt.Fprintf(out, "%4.0fs  %-9s  %5d  %8d  %8d  %6d  %8d  %7d  %7d  %6d  %-9s  %s\n",
					now.Sub(produceStart).Seconds(), b.State(), cur.fixes-prev.fixes, cur.triggers-prev.triggers,
					cur.admitted-prev.admitted, cur.probes-prev.probes, cur.diverted-prev.diverted, depth,
					cur.drained-prev.drained, lat.takeP99().Milliseconds(), consumer.PhaseAt(now).Name,
					describe(trans.take(), produceStart))
			}
			recovered = recovered || isRecovered
			prev = cur
			if expected != nil && (depth == 0 && b.State() == breaker.StateClosed && accounted(expected, consumer, guard.Counters) &&
				unsettled(runCtx) == 0 || now.After(settleBy)) {
				done = true
			}
		}
	}
	cancel()
	if err := router.Close(); err != nil {
		fmt.Fprintln(out, "router close:", err)
	}
	wg.Wait()

	// 7. Verify what the consumer received against what the fixes give.
	ids := em.list()
	for id := range expected {
		if !em.has(id) {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	deliveries := consumer.Deliveries()
	sum.Account(ids, func(id string) int { return deliveries[id] }, guard.Counters.Dead)
	sum.Unsettled(unsettled(ctx))
	for _, id := range ids {
		want, ok := expected[id]
		if !ok {
			sum.Unexpected++
			continue
		}
		if body, ok := consumer.Body(id); ok {
			var got trigger
			if json.Unmarshal(body, &got) != nil || !sameTrigger(got, want) {
				sum.ContentMismatches++
			}
		}
	}
	for _, n := range published {
		sum.Fixes += n
	}
	st := consumer.Stats()
	sum.TriggersExpected = len(expected)
	sum.Diverted = int(guard.Counters.Diverted.Load())
	sum.DeadLettered = int(guard.Counters.DeadLettered.Load())
	sum.Trips = int(guard.Counters.Trips.Load())
	sum.Probes = int(guard.Counters.Probes.Load())
	sum.Drained = int(guard.Drainer.Stats().Drained)
	sum.SlowResponses = st.Slow
	sum.SignatureFailures = st.BadSignatures
	sum.PartnerErrors = st.Slow + st.Rejected + st.BadSignatures + st.BadRequests
	graceEnd, slowAfter, maxProbes := calls.result()
	sum.SlowAfterRecovery, sum.MaxProbesInFlight = slowAfter, maxProbes
	recoverAt, ok := partner.recoveredAt(time.Now())
	if !ok {
		recoverAt = time.Time{} // -degraded-calls not reached
	}
	recovery(sum, trans.snapshot(), b.State(), produceStart, recoverAt, graceEnd)
	sum.Elapsed(start)
	if !o.quiet {
		sum.print(out)
	}
	if ctx.Err() != nil {
		return sum, ctx.Err()
	}
	return sum, nil
}

// recovery fills in the summary's recovery figures from the transitions.
// recoverAt is the consumer's recovery (zero if it never recovered), t0 the
// script's start. graceEnd is the last judgement of a call sent before
// recoverAt (see callLog): a trip after it judges calls the recovered
// consumer answered, so it is a re-trip.
func recovery(sum *summary, ts []breaker.Transition, final breaker.State, t0, recoverAt, graceEnd time.Time) {
	sum.RecoverAtS, sum.ClosedAfterRecoveryS = -1, -1
	for _, t := range ts {
		switch t.To {
		case breaker.StateOpen:
			sum.OpenWindowsS = append(sum.OpenWindowsS, round2(t.Window.Seconds()))
		case breaker.StateClosed:
			sum.Closes++
		}
	}
	if recoverAt.IsZero() {
		return
	}
	sum.RecoverAtS = round2(recoverAt.Sub(t0).Seconds())
	grace := max(graceEnd.Sub(recoverAt), 0)
	sum.RecoveryGraceS = round2(grace.Seconds())
	var lastClose time.Time
	for _, t := range ts {
		switch t.To {
		case breaker.StateOpen:
			switch {
			case t.At.After(recoverAt.Add(grace)):
				sum.RetripsAfterRecovery++
			case t.At.After(recoverAt):
				sum.TripsInRecoveryGrace++
			}
		case breaker.StateClosed:
			lastClose = t.At
		}
	}
	switch {
	case final != breaker.StateClosed:
	case lastClose.After(recoverAt):
		sum.ClosedAfterRecoveryS = round2(lastClose.Sub(recoverAt).Seconds())
	default:
		sum.ClosedAfterRecoveryS = 0
	}
}

// round2 rounds to hundredths, for the summary.
func round2(f float64) float64 { return math.Round(f*100) / 100 }

// describe formats transitions for the timeline, each at its time from t0:
// "5.4:open(1.1s) 6.5:half-open".
func describe(ts []breaker.Transition, t0 time.Time) string {
	var parts []string
	for _, t := range ts {
		s := t.To.String()
		if t.To == breaker.StateOpen {
			s += fmt.Sprintf("(%.1fs)", t.Window.Seconds())
		}
		parts = append(parts, fmt.Sprintf("%.1f:%s", t.At.Sub(t0).Seconds(), s))
	}
	return strings.Join(parts, " ")
}

// sameTrigger compares what identifies a trigger and its position.
func sameTrigger(a, b trigger) bool {
	return a.ID == b.ID && a.Vehicle == b.Vehicle && a.Fence == b.Fence && a.Event == b.Event &&
		a.Time.Equal(b.Time) && a.Lon == b.Lon && a.Lat == b.Lat && a.FenceKind == b.FenceKind
}

// accounted reports whether every expected trigger reached the consumer or
// was dead-lettered.
func accounted(expected map[string]trigger, consumer *webhooktest.Consumer, c *exampleutil.Counters) bool {
	got := consumer.Deliveries()
	for id := range expected {
		if got[id] == 0 && !c.Dead(id) {
			return false
		}
	}
	return true
}

// shardHandler evaluates the fixes of one shard, in order, and publishes
// the triggers they give. It keeps each vehicle's state in memory and
// commits a fix's state only after its triggers are confirmed by JetStream,
// so a fix whose publish failed is evaluated again, to the same triggers
// with the same ids. Its topic is consumed by one loop at a time.
type shardHandler struct {
	eval    *evaluator
	pub     message.Publisher
	topic   string
	emitted *emitted
	seen    *atomic.Int64

	mu     sync.Mutex
	states map[string]*vehicleState
}

func (h *shardHandler) handle(msg *message.Message) error {
	var f fix
	if err := json.Unmarshal(msg.Payload, &f); err != nil || f.Vehicle == "" {
		// A fix that cannot be read never will be: drop it, loudly.
		fmt.Fprintf(os.Stderr, "geofence: unreadable fix %s dropped: %v\n", msg.UUID, err)
		return nil
	}
	h.seen.Add(1)
	h.mu.Lock()
	st := h.states[f.Vehicle]
	h.mu.Unlock()
	next, trs, ok := h.eval.step(st, f)
	if !ok {
		return nil // a redelivered fix, already evaluated
	}
	msgs := make([]*message.Message, 0, len(trs))
	for _, tr := range trs {
		b, err := json.Marshal(tr)
		if err != nil {
			return err
		}
		m := message.NewMessage(tr.ID, b)
		m.Metadata.Set("vehicle", tr.Vehicle)
		m.Metadata.Set("fence", tr.Fence)
		m.Metadata.Set("event", tr.Event)
		msgs = append(msgs, m)
	}
	for len(msgs) > 0 {
		err := h.pub.Publish(h.topic, msgs...)
		if err == nil {
			break
		}
		select { // broker hiccup: publish again, keeping the shard's order
		case <-msg.Context().Done():
			return err // nacked: the fix comes back and is evaluated again
		case <-time.After(100 * time.Millisecond):
		}
	}
	for _, tr := range trs {
		h.emitted.add(tr.ID)
	}
	h.mu.Lock()
	h.states[f.Vehicle] = next
	h.mu.Unlock()
	return nil
}

// replay publishes each track's fixes at -speed, one goroutine per vehicle,
// to the vehicle's shard, until the trace or -produce-for ends, and returns
// how many fixes of each vehicle JetStream confirmed (always a prefix).
func replay(ctx context.Context, pub message.Publisher, topics []string, tracks []track, o options) map[string]int {
	t0 := tracks[0].Fixes[0].Time
	for _, t := range tracks {
		if t.Fixes[0].Time.Before(t0) {
			t0 = t.Fixes[0].Time
		}
	}
	start := time.Now()
	deadline := start.Add(o.produceFor)
	var mu sync.Mutex
	counts := map[string]int{}
	var wg sync.WaitGroup
	for i, t := range tracks {
		topic := topics[i%len(topics)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := 0
			defer func() { mu.Lock(); counts[t.Vehicle] = n; mu.Unlock() }()
			for _, f := range t.Fixes {
				due := start.Add(time.Duration(float64(f.Time.Sub(t0)) / o.speed))
				if due.After(deadline) {
					return
				}
				if d := time.Until(due); d > 0 {
					select {
					case <-ctx.Done():
						return
					case <-time.After(d):
					}
				}
				b, _ := json.Marshal(f)
				id := uuid.NewSHA1(triggerNamespace, []byte("fix|"+f.Vehicle+"|"+f.Time.Format(time.RFC3339Nano))).String()
				for {
					err := pub.Publish(topic, message.NewMessage(id, b))
					if err == nil {
						break
					}
					select { // broker hiccup: publish again
					case <-ctx.Done():
						return
					case <-time.After(100 * time.Millisecond):
					}
				}
				n++
			}
		}()
	}
	wg.Wait()
	return counts
}
