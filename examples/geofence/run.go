package main

import (
	"cmp"
	"context"
	"crypto/rand"
	"embed"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
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

	"github.com/floodgate-go/floodgate"
	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/deliver"
	"github.com/floodgate-go/floodgate/deliver/webhook"
	"github.com/floodgate-go/floodgate/deliver/webhook/webhooktest"
	"github.com/floodgate-go/floodgate/internal/exampleutil"
	"github.com/floodgate-go/floodgate/jsq"
	"github.com/floodgate-go/floodgate/middleware"
	"github.com/floodgate-go/floodgate/partner"
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
	// maxConsumers bounds -consumers.
	maxConsumers = 8
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

// emitted is the set of trigger ids the evaluator published, each with
// the consumer it was published for.
type emitted struct {
	mu  sync.Mutex
	ids map[string]string // trigger id -> partner key
	n   atomic.Int64      // publishes, with re-publishes
}

func (e *emitted) add(id, key string) {
	e.n.Add(1)
	e.mu.Lock()
	e.ids[id] = key
	e.mu.Unlock()
}

// to returns the consumer trigger id was published for.
func (e *emitted) to(id string) (string, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	key, ok := e.ids[id]
	return key, ok
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

// consumer is one downstream webhook consumer: its own endpoint (the
// partner key), secret, fault script and what the run counted for it.
type consumer struct {
	url      string // the webhook endpoint: the partner key
	faulty   bool   // has the outage (the P99 spike)
	hook     *webhooktest.Consumer
	sw       *recoverySwitch // the faulty consumer's; nil for the others
	srv      *httptest.Server
	sender   *webhook.Sender
	drain    exampleutil.DrainTimer
	ids      []string // triggers produced for it
	given    bool     // signs and verifies with the given secret (-webhook-secret-file)
	received map[string]int
}

// newConsumer starts consumer i (1-based) on a real HTTP server on
// loopback: it verifies the Standard Webhooks signature (and refuses
// replays) with a secret of its own, handed over in the "whsec_" form (or
// the one every consumer shares, -webhook-secret-file),
// records every idempotency key, and follows its fault script. The faulty
// one follows the design note's (healthy, then a P99 spike, then
// recovered); the others have a slow period of their own (-slow-at,
// -slow-for, -slow-latency), below the breaker's slow-call threshold.
func newConsumer(i int, o options) (*consumer, error) {
	secret := o.webhookSecret
	given := secret != nil
	if secret == nil {
		key := make([]byte, 32)
		if _, err := rand.Read(key); err != nil {
			return nil, err
		}
		// The endpoint's secret as a Standard Webhooks producer hands it to
		// its consumer, and as the consumer decodes it.
		var err error
		if secret, err = webhook.ParseSecret(webhook.FormatSecret(key)); err != nil {
			return nil, err
		}
	}
	c := &consumer{faulty: i == o.faulty, given: given}
	var err error
	degraded := o.degraded
	if o.degradedCalls > 0 {
		degraded = callHold
	}
	script := []webhooktest.Phase{{Name: "slow", Duration: o.slowFor, Latency: o.slowLatency}, {Name: "healthy", Latency: o.fast}}
	if o.slowAt > 0 {
		script = append([]webhooktest.Phase{{Name: "healthy", Duration: o.slowAt, Latency: o.fast}}, script...)
	}
	if c.faulty {
		script = webhooktest.Degraded(degraded, o.fast, o.spike, o.slowFraction)
		if o.healthyFor > 0 {
			script = append([]webhooktest.Phase{{Name: "healthy", Duration: o.healthyFor, Latency: o.fast}}, script...)
		}
	}
	if c.hook, err = webhooktest.New(webhooktest.Config{Secret: secret, Script: script}); err != nil {
		return nil, err
	}
	var h http.Handler = c.hook
	if c.faulty {
		c.sw = &recoverySwitch{consumer: c.hook, calls: o.degradedCalls, skip: o.healthyFor + degraded}
		h = c.sw
	}
	c.srv = httptest.NewServer(h)
	c.url = fmt.Sprintf("%s/hooks/consumer-%d", c.srv.URL, i)
	if c.sender, err = webhook.NewSender(webhook.Config{URL: c.url, Secret: secret, Timeout: o.timeout}); err != nil {
		c.srv.Close()
		return nil, err
	}
	return c, nil
}

// start starts the consumer's fault script at t.
func (c *consumer) start(t time.Time) {
	if c.sw != nil {
		c.sw.start(t)
		return
	}
	c.hook.StartAt(t)
}

// run does the whole job and returns its summary. The summary is returned
// even with an error when the run got far enough to count anything.
func run(ctx context.Context, o options, out io.Writer) (*summary, error) {
	start := time.Now()
	// Errors only (unless a test asks for more): a panic the router
	// recovers, an unconfirmed diversion.
	stderr := cmp.Or[io.Writer](o.stderr, os.Stderr)
	logger := watermill.NewSlogLogger(slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: cmp.Or[slog.Leveler](o.logLevel, slog.LevelError)})))
	runID := strings.ReplaceAll(uuid.NewString()[:8], "-", "")

	fences, tracks, err := loadData()
	if err != nil {
		return nil, err
	}
	tracks = tracks[:min(o.vehicles, len(tracks))]
	eval := &evaluator{fences: fences, dwell: o.dwell, debounce: debounce}

	// 1. NATS JetStream: embedded unless -nats-url.
	nc, err := exampleutil.StartNATS(o.nats)
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

	// 2. The webhook consumers, each with its own endpoint, secret and
	// fault script. A van's triggers go to one consumer (vans in turn).
	consumers := make([]*consumer, o.consumers)
	byURL := map[string]*consumer{}
	for i := range consumers {
		c, err := newConsumer(i+1, o)
		if err != nil {
			return nil, err
		}
		defer c.srv.Close()
		consumers[i], byURL[c.url] = c, c
	}
	if given := countGiven(consumers); given > 0 {
		fmt.Fprintf(out, "webhook: %d of %d consumers sign and verify with the given secret\n", given, len(consumers))
	}
	faulty := consumers[o.faulty-1]
	route := map[string]string{} // vehicle -> partner key
	for i, t := range tracks {
		route[t.Vehicle] = consumers[i%len(consumers)].url
	}

	// 3. One call: a breaker per consumer (latency-judged), the retry queue
	// and the per-partner drain, on the router.
	var pc exampleutil.PartnerCounters
	var trans transitionLog // the faulty consumer's
	var lat latencies       // the faulty consumer's
	calls := &callLog{slowCall: o.slowCall, before: map[string]int{}}
	mctx, stopMetrics := context.WithCancel(ctx)
	defer stopMetrics()
	reg, metricsAddr, err := o.metrics.Start(mctx) // nil when -metrics-addr is off
	if err != nil {
		return nil, err
	}
	exampleutil.PrintMetricsURL(out, o.metrics, metricsAddr)
	fixSub, err := jsq.NewSubscriber(jsq.SubscriberConfig{URL: nc.URL, ConnectOptions: nc.ConnectOptions, Concurrency: 1, AckWait: 30 * time.Second})
	if err != nil {
		return nil, err
	}
	trigSub, err := jsq.NewSubscriber(jsq.SubscriberConfig{URL: nc.URL, ConnectOptions: nc.ConnectOptions, Concurrency: deliveryConcurrency, AckWait: 30 * time.Second})
	if err != nil {
		return nil, err
	}
	router, err := message.NewRouter(message.RouterConfig{CloseTimeout: 15 * time.Second}, logger)
	if err != nil {
		return nil, err
	}
	retryTopic, deadTopic := "floodgate_retry_"+runID, "floodgate_dead_"+runID
	fg, err := floodgate.New(ctx, router, floodgate.Config{
		Name: "trigger-webhook", Topic: triggerTopic, Subscriber: trigSub, JetStream: nc.JetStream,
		PartnerKey: func(m *message.Message) string { return m.Metadata.Get("webhook") },
		Deliver: func(msg *message.Message) error {
			key := msg.Metadata.Get("webhook")
			c, ok := byURL[key]
			if !ok {
				return &deliver.Error{Kind: deliver.ErrPermanent, Op: "webhook send", Cause: fmt.Errorf("no consumer at %q", key)}
			}
			if c.faulty {
				_, recovered := c.sw.recoveredAt(time.Now())
				answered := calls.send(msg.UUID, !recovered, middleware.IsProbe(msg.Context()))
				defer answered()
			}
			err := c.sender.Send(msg.Context(), msg.UUID, msg.Payload)
			if err == nil && retryqueue.FromDrain(msg.Context()) {
				pc.Of(key).Drained.Add(1)
			}
			return err
		},
		Partner: partner.PartnerConfig{Breaker: breaker.Config{
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
		}},
		Timeout: o.timeout + 3*time.Second,
		Queue:   retryqueue.Config{RetryTopic: retryTopic, DeadLetterTopic: deadTopic},
		Drain:   retryqueue.PartnerDrainerConfig{Drainer: retryqueue.DrainerConfig{Rate: 50}},
		Metrics: reg,
		OnEvent: func(ev middleware.Event) {
			pc.OnEvent(ev)
			if ev.PartnerKey == faulty.url {
				calls.judged(ev, time.Now())
				if ev.Admitted {
					lat.add(ev.Latency)
				}
			}
		},
		OnTransition: func(p *partner.Partner, t breaker.Transition) {
			pc.OnTransition(p, t)
			if c := byURL[p.Key()]; c != nil {
				c.drain.Transition(t)
				if c == faulty {
					trans.add(t)
				}
			}
		},
		Logger: logger,
	})
	if err != nil {
		return nil, err
	}
	defer fg.Close()
	nc.Track(retryTopic, deadTopic)
	exampleutil.PrintStreams(out, nc, retryTopic, deadTopic)

	// 4. The evaluators, one per fix shard, on the same router.
	em := &emitted{ids: map[string]string{}}
	var fixesIn atomic.Int64
	for i, topic := range fixTopics {
		h := &shardHandler{eval: eval, pub: nc.Publisher, stderr: stderr, topic: triggerTopic, route: route, emitted: em, seen: &fixesIn,
			states: map[string]*vehicleState{}}
		router.AddConsumerHandler(fmt.Sprintf("geofence-eval-%d", i), topic, fixSub, h.handle)
	}

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	routerErr := make(chan error, 1)
	go func() { routerErr <- router.Run(runCtx) }()
	select {
	case <-router.Running():
	case err := <-routerErr:
		return nil, fmt.Errorf("router: %w", err)
	}

	// 5. Replay the trace: one publisher per van, at -speed.
	produceStart := time.Now()
	for _, c := range consumers {
		c.start(produceStart)
	}
	replayed := make(chan map[string]int, 1)
	go func() { replayed <- replay(runCtx, nc.Publisher, fixTopics, tracks, o) }()

	// 6. Timeline until everything is accounted for or -settle runs out.
	sum := &summary{}
	var published map[string]int // fixes published per vehicle
	var expected map[string]trigger
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	if !o.quiet {
		fmt.Fprintf(out, "consumers (faulty: %d): %s\n", o.faulty, strings.Join(urls(consumers), " "))
		fmt.Fprintf(out, "%5s  %-*s  %5s  %8s  %8s  %6s  %8s  %7s  %7s  %6s  %-*s  %s\n",
			"t", 10*len(consumers), "breakers", "fixes", "triggers", "admitted", "probes", "diverted", "backlog", "drained", "p99ms",
			9*len(consumers), "consumers", "transitions")
	}
	// backlogs reads each consumer's retry backlog (ok false when it
	// cannot be read).
	backlogs := func(ctx context.Context) (map[string]int, bool) { return exampleutil.Backlogs(ctx, fg.Drain()) }
	// unsettled counts the messages still in a stream: triggers in the
	// retry backlog, fixes and triggers not yet handled or acked (a fix may
	// still give a trigger). They are queued, not lost.
	unsettled := func(ctx context.Context) int {
		queued := 0
		if bl, ok := backlogs(ctx); ok {
			for _, n := range bl {
				queued += n
			}
		}
		for _, topic := range append(slices.Clone(fixTopics), triggerTopic) {
			if n, err := retryqueue.Depth(ctx, nc.JetStream, topic, jsq.DefaultConsumerName(topic)); err == nil {
				queued += int(n)
			}
		}
		return queued
	}
	state := func(c *consumer) breaker.State {
		if p, ok := fg.Partners().Lookup(c.url); ok {
			return p.Breaker().State()
		}
		return breaker.StateClosed
	}
	total := pc.Sum
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
			cur := snap{fixesIn.Load(), em.n.Load(),
				total(func(c *exampleutil.Counters) int64 { return c.Admitted.Load() }),
				total(func(c *exampleutil.Counters) int64 { return c.Probes.Load() }),
				total(func(c *exampleutil.Counters) int64 { return c.Diverted.Load() }),
				total(func(c *exampleutil.Counters) int64 { return c.Drained.Load() })}
			bl, ok := backlogs(runCtx)
			depth, closed := -1, true
			if ok {
				depth = 0
			}
			states, phases := make([]string, len(consumers)), make([]string, len(consumers))
			for i, c := range consumers {
				if ok {
					c.drain.Sample(now, bl[c.url])
					depth += bl[c.url]
				}
				st := state(c)
				closed = closed && st == breaker.StateClosed
				states[i], phases[i] = st.String(), c.hook.PhaseAt(now).Name
			}
			sum.BacklogPeak = max(sum.BacklogPeak, depth)
			recoverAt, isRecovered := faulty.sw.recoveredAt(now)
			if !o.quiet {
				if !recovered && isRecovered {
					fmt.Fprintf(out, "%4.1fs  ---- consumer %d recovered ----\n", recoverAt.Sub(produceStart).Seconds(), o.faulty)
				}
				fmt.Fprintf(out, "%4.0fs  %-*s  %5d  %8d  %8d  %6d  %8d  %7d  %7d  %6d  %-*s  %s\n",
					now.Sub(produceStart).Seconds(), 10*len(consumers), strings.Join(states, ","),
					cur.fixes-prev.fixes, cur.triggers-prev.triggers,
					cur.admitted-prev.admitted, cur.probes-prev.probes, cur.diverted-prev.diverted, depth,
					cur.drained-prev.drained, lat.takeP99().Milliseconds(), 9*len(consumers), strings.Join(phases, ","),
					describe(trans.take(), produceStart))
			}
			recovered = recovered || isRecovered
			prev = cur
			if expected != nil && (depth == 0 && closed && accounted(expected, route, byURL, &pc) &&
				unsettled(runCtx) == 0 || now.After(settleBy)) {
				done = true
			}
		}
	}
	cancel()
	if err := router.Close(); err != nil {
		fmt.Fprintln(out, "router close:", err)
	}

	// 7. Verify what each consumer received against what the fixes give.
	ids := em.list()
	for id := range expected {
		if _, ok := em.to(id); !ok {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	for _, c := range consumers {
		c.received = c.hook.Deliveries()
	}
	for _, id := range ids {
		key, ok := em.to(id)
		want, isExpected := expected[id]
		if !ok {
			key = route[want.Vehicle]
		}
		if c := byURL[key]; c != nil {
			c.ids = append(c.ids, id)
		}
		if !isExpected {
			sum.Unexpected++
			continue
		}
		if c := byURL[key]; c != nil {
			if body, ok := c.hook.Body(id); ok {
				var got trigger
				if json.Unmarshal(body, &got) != nil || !sameTrigger(got, want) {
					sum.ContentMismatches++
				}
			}
		}
	}
	bl, _ := backlogs(context.Background())
	account(sum, consumers, &pc, bl, unsettled(ctx))
	for _, n := range published {
		sum.Fixes += n
	}
	sum.TriggersExpected = len(expected)
	sum.Probes = int(total(func(c *exampleutil.Counters) int64 { return c.Probes.Load() }))
	for _, c := range consumers {
		st := c.hook.Stats()
		sum.SlowResponses += st.Slow
		sum.SignatureFailures += st.BadSignatures
		sum.PartnerErrors += st.Slow + st.Rejected + st.BadSignatures + st.Replays + st.BadRequests
	}
	graceEnd, slowAfter, maxProbes := calls.result()
	sum.SlowAfterRecovery, sum.MaxProbesInFlight = slowAfter, maxProbes
	recoverAt, ok := faulty.sw.recoveredAt(time.Now())
	if !ok {
		recoverAt = time.Time{} // -degraded-calls not reached
	}
	recovery(sum, trans.snapshot(), state(faulty), produceStart, recoverAt, graceEnd)
	sum.Elapsed(start)
	sum.print(out) // -quiet hides the timeline only
	if ctx.Err() != nil {
		return sum, ctx.Err()
	}
	return sum, nil
}

// urls lists the consumers' endpoints.
func urls(cs []*consumer) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.url
	}
	return out
}

// account fills in the summary's per-consumer and total accounting: each
// consumer's receipts are checked against the triggers produced for it (a
// trigger another consumer received is misdelivered); backlog is each
// consumer's retry backlog at the end, queued everything still in a stream.
func account(sum *summary, consumers []*consumer, pc *exampleutil.PartnerCounters, backlog map[string]int, queued int) {
	sum.Partners = nil
	for i, c := range consumers {
		cnt := pc.Of(c.url)
		ps := exampleutil.PartnerSummary{Partner: c.url, Faulty: c.faulty}
		elsewhere := func(id string) int {
			n := 0
			for j, o := range consumers {
				if j != i {
					n += o.received[id]
				}
			}
			return n
		}
		ps.Account(c.ids, func(id string) int { return c.received[id] }, elsewhere, cnt.Dead)
		ps.Unsettled(backlog[c.url])
		ps.Diverted, ps.DeadLettered = int(cnt.Diverted.Load()), int(cnt.DeadLettered.Load())
		ps.Drained, ps.Trips, ps.DrainS = int(cnt.Drained.Load()), int(cnt.Trips.Load()), c.drain.Seconds()
		sum.AddPartner(ps)
		sum.Drained += ps.Drained
	}
	// Triggers and fixes still in a stream are not lost either.
	inBacklog := 0
	for _, c := range consumers {
		inBacklog += backlog[c.url]
	}
	sum.Queued = queued
	sum.Lost = max(0, sum.Lost-max(0, queued-inBacklog))
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

// accounted reports whether every expected trigger reached its consumer
// or was dead-lettered.
func accounted(expected map[string]trigger, route map[string]string, byURL map[string]*consumer, pc *exampleutil.PartnerCounters) bool {
	got := map[string]map[string]int{}
	for key, c := range byURL {
		got[key] = c.hook.Deliveries()
	}
	for id, tr := range expected {
		key := route[tr.Vehicle]
		if got[key][id] == 0 && !pc.Of(key).Dead(id) {
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
	stderr  io.Writer // where a dropped fix is reported
	topic   string
	route   map[string]string // vehicle -> consumer (partner key); read-only
	emitted *emitted
	seen    *atomic.Int64

	mu     sync.Mutex
	states map[string]*vehicleState
}

func (h *shardHandler) handle(msg *message.Message) error {
	var f fix
	if err := json.Unmarshal(msg.Payload, &f); err != nil || f.Vehicle == "" {
		// A fix that cannot be read never will be: drop it, loudly.
		fmt.Fprintf(h.stderr, "geofence: unreadable fix %s dropped: %v\n", msg.UUID, err)
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
		m.Metadata.Set("webhook", h.route[tr.Vehicle])
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
		h.emitted.add(tr.ID, h.route[tr.Vehicle])
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

// countGiven counts the consumers that use the given webhook secret.
func countGiven(cs []*consumer) int {
	n := 0
	for _, c := range cs {
		if c.given {
			n++
		}
	}
	return n
}
