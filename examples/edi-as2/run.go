package main

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/google/uuid"
	"golang.org/x/time/rate"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/deliver/as2"
	"github.com/floodgate-go/floodgate/deliver/as2/as2partner"
	"github.com/floodgate-go/floodgate/deliver/as2/as2test"
	"github.com/floodgate-go/floodgate/internal/exampleutil"
	"github.com/floodgate-go/floodgate/internal/x12"
	"github.com/floodgate-go/floodgate/jsq"
	"github.com/floodgate-go/floodgate/middleware"
	"github.com/floodgate-go/floodgate/retryqueue"
)

//go:embed testdata/*.x12
var testdata embed.FS

const (
	ourAS2ID     = "FLOODGATE-SUPPLIER"
	partnerAS2ID = "NORTHWIND-RETAIL"
	idDomain     = "edi-as2.floodgate"

	// probeConcurrency is the breaker's cap on half-open probes in flight.
	probeConcurrency = 2
)

// run does the whole job and returns its summary. The summary is returned
// even with an error when the run got far enough to count anything.
func run(ctx context.Context, o options, out io.Writer) (*summary, error) {
	start := time.Now()
	// Errors only: a panic the router recovers, an unconfirmed diversion.
	logger := watermill.NewSlogLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})))
	runID := strings.ReplaceAll(uuid.NewString()[:8], "-", "")
	sourceTopic := "edi_orders_" + runID

	// 1. NATS JetStream: embedded unless -nats-url. On an external server
	// the streams made here are deleted at the end.
	nc, err := exampleutil.StartNATS(o.natsURL)
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	js, pub := nc.JetStream, nc.Publisher

	// 2. The AS2 partner, on a real HTTP server on loopback.
	// Throwaway keys and certificates for both sides: orders are signed
	// (SHA-256) and encrypted (AES-256-CBC), and the partner returns a signed
	// MDN whose MIC the sender checks (RFC 4130).
	pki, err := as2test.New(ourAS2ID, partnerAS2ID)
	if err != nil {
		return nil, fmt.Errorf("AS2 certificates: %w", err)
	}
	pcfg := pki.PartnerConfig()
	pcfg.Script = script(o)
	partner, err := as2partner.New(pcfg)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	httpSrv := &http.Server{Handler: partner, ReadHeaderTimeout: 5 * time.Second}
	go httpSrv.Serve(ln)
	defer httpSrv.Close()

	scfg := pki.SenderConfig("http://" + ln.Addr().String() + "/as2")
	scfg.Subject = "X12 850 purchase order"
	scfg.Timeout = 5 * time.Second
	scfg.MessageIDDomain = idDomain
	sender, err := as2.NewSender(scfg)
	if err != nil {
		return nil, err
	}

	// 3. Breaker, retry queue, middleware.
	var c exampleutil.Counters
	b, err := breaker.New(breaker.Config{
		Name:                 "northwind-as2",
		WindowSize:           20,
		MinimumCalls:         10,
		FailureRateThreshold: 0.5,
		SlowCallDuration:     2 * time.Second,
		BaseOpenWindow:       time.Second,
		MaxOpenWindow:        30 * time.Second,
		Jitter:               0.2,
		ProbeConcurrency:     probeConcurrency,
		SuccessesToClose:     5,
	})
	if err != nil {
		return nil, err
	}

	mctx, stopMetrics := context.WithCancel(ctx)
	defer stopMetrics()
	m, err := exampleutil.StartMetrics(mctx, o.metricsAddr) // nil when -metrics-addr is off
	if err != nil {
		return nil, err
	}

	qcfg := retryqueue.Config{
		Publisher:       pub,
		Source:          sourceTopic,
		Handler:         "as2-delivery",
		RetryTopic:      "floodgate_retry_" + runID,
		DeadLetterTopic: "floodgate_dead_" + runID,
	}
	if err := errors.Join(nc.ProvisionQueue(ctx, qcfg), nc.EnsureStreams(ctx, sourceTopic)); err != nil {
		return nil, err
	}
	queue, err := retryqueue.New(qcfg)
	if err != nil {
		return nil, err
	}
	// The drainer's adaptive control also watches live deliveries: the
	// partner's capacity is shared.
	var drainer *retryqueue.Drainer
	guard, err := middleware.New(middleware.Config{
		Breaker: b,
		Queue:   queue,
		Timeout: 10 * time.Second,
		OnEvent: func(ev middleware.Event) {
			c.OnEvent(ev)
			m.ObserveEvent(ev)
			if ev.Admitted {
				failed := ev.Action == middleware.Diverted && ev.Reason == string(retryqueue.ReasonFailure)
				drainer.Observe(ev.UUID, failed, ev.Latency)
			}
		},
		Logger: logger,
	})
	if err != nil {
		return nil, err
	}
	deliverAS2 := func(msg *message.Message) ([]*message.Message, error) {
		_, err := sender.Send(msg.Context(), msg.UUID, msg.Payload)
		return nil, err
	}
	guarded := guard(deliverAS2)

	// 4. The router consumes the source topic through the guarded handler.
	sub, err := jsq.NewSubscriber(jsq.SubscriberConfig{URL: nc.URL, Concurrency: 4, AckWait: 30 * time.Second})
	if err != nil {
		return nil, err
	}
	router, err := message.NewRouter(message.RouterConfig{CloseTimeout: 15 * time.Second}, logger)
	if err != nil {
		return nil, err
	}
	router.AddConsumerHandler("as2-delivery", sourceTopic, sub, func(msg *message.Message) error {
		_, err := guarded(msg)
		return err
	})

	// 5. The drainer feeds the backlog through the same guarded handler,
	// starting slow and seeking the partner's spare capacity (AIMD), judging
	// latency as the breaker does.
	drainer, err = retryqueue.NewDrainer(retryqueue.DrainerConfig{
		JetStream: js,
		Queue:     queue,
		Handler:   guarded,
		Gate:      middleware.DrainGate(b),
		Rate:      10,
		SlowCall:  b.Config().SlowCallDuration,
		Logger:    logger,
	})
	if err != nil {
		return nil, err
	}
	if err := errors.Join(m.WatchBreaker(queue.Partner(), b), m.WatchQueue(queue), m.WatchDrainer(queue.Partner(), drainer)); err != nil {
		return nil, err
	}
	var tl transitions
	remove := b.AddListener(func(t breaker.Transition) {
		c.OnTransition(t)
		tl.add(t.To, time.Now())
		drainer.Wake()
	})
	defer remove()

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	routerErr := make(chan error, 1)
	wg.Add(2)
	go func() { defer wg.Done(); routerErr <- router.Run(runCtx) }()
	go func() { defer wg.Done(); _ = drainer.Run(runCtx) }()
	select {
	case <-router.Running():
	case err := <-routerErr:
		return nil, fmt.Errorf("router: %w", err)
	}

	// 6. Produce X12 850 interchanges at the configured rate.
	docs, err := loadDocs()
	if err != nil {
		return nil, err
	}
	produceStart := time.Now()
	partner.StartAt(produceStart)
	produced := make(chan []string, 1)
	go func() { produced <- produce(runCtx, pub, sourceTopic, docs, o) }()

	// 7. Timeline until everything is accounted for or -settle runs out. The
	// backlog is sampled every 100 ms (for drain_s); a line is printed per
	// second.
	backlog := func() int {
		n, err := drainer.Backlog(runCtx)
		if err != nil {
			return -1
		}
		return int(n)
	}
	outageEnd := produceStart.Add(o.healthyFor + o.outage)
	sum := &summary{}
	var ids []string
	var prev snapshot
	var drainedAt time.Time // first empty backlog after recovery
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	lastLine := produceStart
	if !o.quiet {
		fmt.Fprintf(out, "%5s  %-9s  %8s  %8s  %7s  %8s  %9s  %8s  %s\n",
			"t", "breaker", "admitted", "diverted", "backlog", "drained", "rate(/s)", "p-errors", "partner")
	}
	var settleBy time.Time
	for done := false; !done; {
		select {
		case <-ctx.Done():
			done = true
		case ids = <-produced:
			settleBy = time.Now().Add(o.settle)
			produced = nil
		case now := <-tick.C:
			depth := backlog()
			sum.BacklogPeak = max(sum.BacklogPeak, depth)
			sum.DrainRatePeak = max(sum.DrainRatePeak, drainer.Rate())
			if rec, ok := tl.recovery(outageEnd); ok && depth == 0 && drainedAt.IsZero() {
				drainedAt = now
				if rec.After(now) {
					drainedAt = rec
				}
			}
			if depth > 0 {
				drainedAt = time.Time{} // refilled (a re-trip): measure to the final empty backlog
			}
			if now.Sub(lastLine) >= time.Second {
				lastLine = lastLine.Add(time.Second)
				cur := snapshot{
					admitted: c.Admitted.Load(), diverted: c.Diverted.Load(),
					drained: int64(drainer.Stats().Drained), errors: int64(partner.Stats().Errors),
				}
				if !o.quiet {
					fmt.Fprintf(out, "%4.0fs  %-9s  %8d  %8d  %7d  %8d  %9.0f  %8d  %s\n",
						now.Sub(produceStart).Seconds(), b.State(),
						cur.admitted-prev.admitted, cur.diverted-prev.diverted, depth,
						cur.drained-prev.drained, drainer.Rate(), cur.errors-prev.errors, partner.PhaseAt(now).Name)
				}
				prev = cur
			}
			if ids != nil && (accounted(ids, partner, &c) && depth == 0 || now.After(settleBy)) {
				done = true
			}
		}
	}
	cancel()
	if err := router.Close(); err != nil {
		fmt.Fprintln(out, "router close:", err)
	}
	wg.Wait()
	// What is still in a stream is queued, not lost: the retry backlog and
	// source messages not yet acked.
	queued := 0
	if n, err := drainer.Backlog(context.Background()); err == nil {
		queued += int(n)
	}
	if n, err := retryqueue.Depth(context.Background(), js, sourceTopic, jsq.DefaultConsumerName(sourceTopic)); err == nil {
		queued += int(n)
	}

	sum.RetripsAfterRecovery = tl.tripsAfterRecovery(outageEnd)
	sum.TimeToFullTrafficS, sum.DrainS = -1, -1
	if last, ok := tl.lastClose(); ok && b.State() == breaker.StateClosed {
		sum.TimeToFullTrafficS = round1(max(0, last.Sub(outageEnd).Seconds()))
	}
	if rec, ok := tl.recovery(outageEnd); ok && !drainedAt.IsZero() {
		sum.DrainS = round1(drainedAt.Sub(rec).Seconds())
	}
	sum.DrainRatePeak = math.Round(sum.DrainRatePeak)
	st := partner.Stats()
	received := partner.Received()
	sum.Account(ids, func(id string) int { return received[as2.MessageID(id, idDomain)] }, c.Dead)
	sum.Unsettled(queued)
	sum.Diverted = int(c.Diverted.Load())
	sum.DeadLettered = int(c.DeadLettered.Load())
	sum.Trips = int(c.Trips.Load())
	sum.PartnerErrors = st.Errors
	sum.SignedEncrypted = min(st.Signed, st.Encrypted)
	sum.SignedMDNs = st.SignedMDNs
	sum.Drained = int(drainer.Stats().Drained)
	sum.Elapsed(start)
	if !o.quiet {
		sum.print(out)
	}
	if ctx.Err() != nil {
		return sum, ctx.Err()
	}
	return sum, nil
}

type snapshot struct{ admitted, diverted, drained, errors int64 }

func round1(x float64) float64 { return math.Round(x*10) / 10 }

// transitions records the breaker's state changes with their wall time.
type transitions struct {
	mu sync.Mutex
	to []breaker.State
	at []time.Time
}

func (t *transitions) add(to breaker.State, at time.Time) {
	t.mu.Lock()
	t.to, t.at = append(t.to, to), append(t.at, at)
	t.mu.Unlock()
}

// recovery is the first close at or after outageEnd.
func (t *transitions) recovery(outageEnd time.Time) (time.Time, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i, s := range t.to {
		if s == breaker.StateClosed && !t.at[i].Before(outageEnd) {
			return t.at[i], true
		}
	}
	return time.Time{}, false
}

// tripsAfterRecovery counts transitions to open after the recovery.
func (t *transitions) tripsAfterRecovery(outageEnd time.Time) int {
	rec, ok := t.recovery(outageEnd)
	if !ok {
		return 0
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for i, s := range t.to {
		if s == breaker.StateOpen && t.at[i].After(rec) {
			n++
		}
	}
	return n
}

// lastClose is the time of the last transition to closed.
func (t *transitions) lastClose() (time.Time, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i := len(t.to) - 1; i >= 0; i-- {
		if t.to[i] == breaker.StateClosed {
			return t.at[i], true
		}
	}
	return time.Time{}, false
}

// accounted reports whether every produced message reached the partner or was
// dead-lettered.
func accounted(ids []string, p *as2partner.Partner, c *exampleutil.Counters) bool {
	received := p.Received()
	for _, id := range ids {
		if received[as2.MessageID(id, idDomain)] == 0 && !c.Dead(id) {
			return false
		}
	}
	return true
}

// script is the partner's fault script: healthy, outage (503), fragile
// recovery with a capacity limit, then healthy for good.
func script(o options) []as2partner.Phase {
	var s []as2partner.Phase
	if o.healthyFor > 0 {
		s = append(s, as2partner.Phase{Name: "healthy", Duration: o.healthyFor, Mode: as2partner.Healthy})
	}
	if o.outage > 0 {
		s = append(s, as2partner.Phase{Name: "outage", Duration: o.outage, Mode: as2partner.Down})
	}
	if o.fragile > 0 {
		s = append(s, as2partner.Phase{Name: "fragile", Duration: o.fragile, Mode: as2partner.Fragile,
			Capacity: o.fragileCapacity, Excess: as2partner.Reject503})
	}
	if o.capacityAfter > 0 {
		return append(s, as2partner.Phase{Name: "recovered", Mode: as2partner.Fragile,
			Capacity: o.capacityAfter, Excess: as2partner.Reject503})
	}
	return append(s, as2partner.Phase{Name: "recovered", Mode: as2partner.Healthy})
}

// loadDocs parses the embedded X12 850 interchanges.
func loadDocs() ([]*x12.Interchange, error) {
	var docs []*x12.Interchange
	err := fs.WalkDir(testdata, "testdata", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := testdata.ReadFile(path)
		if err != nil {
			return err
		}
		ic, err := x12.Parse(data)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		docs = append(docs, ic)
		return nil
	})
	if err == nil && len(docs) == 0 {
		err = errors.New("no X12 documents in testdata")
	}
	return docs, err
}

// produce publishes renumbered copies of docs at o.rate for o.produceFor and
// returns the UUIDs it published (confirmed by JetStream).
func produce(ctx context.Context, pub message.Publisher, topic string, docs []*x12.Interchange, o options) []string {
	lim := rate.NewLimiter(rate.Limit(o.rate), 1)
	var ids []string
	deadline := time.Now().Add(o.produceFor)
	for n := 1; time.Now().Before(deadline); n++ {
		if err := lim.Wait(ctx); err != nil {
			break
		}
		doc := docs[n%len(docs)]
		msg := message.NewMessage(uuid.NewString(), doc.Renumber(100000000+n, 1000+n, 10000+n))
		msg.Metadata.Set("x12_control_number", fmt.Sprintf("%09d", 100000000+n))
		for {
			err := pub.Publish(topic, msg)
			if err == nil {
				ids = append(ids, msg.UUID)
				break
			}
			if ctx.Err() != nil {
				return ids
			}
			time.Sleep(100 * time.Millisecond) // broker hiccup: publish again
		}
	}
	return ids
}
