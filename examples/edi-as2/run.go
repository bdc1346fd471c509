package main

import (
	"cmp"
	"context"
	"crypto"
	"crypto/sha256"
	"crypto/x509"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/google/uuid"
	"golang.org/x/time/rate"

	"github.com/floodgate-go/floodgate"
	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/deliver"
	"github.com/floodgate-go/floodgate/deliver/as2"
	"github.com/floodgate-go/floodgate/deliver/as2/as2partner"
	"github.com/floodgate-go/floodgate/deliver/as2/as2test"
	"github.com/floodgate-go/floodgate/internal/exampleutil"
	"github.com/floodgate-go/floodgate/internal/x12"
	"github.com/floodgate-go/floodgate/jsq"
	"github.com/floodgate-go/floodgate/middleware"
	"github.com/floodgate-go/floodgate/partner"
	"github.com/floodgate-go/floodgate/retryqueue"
)

//go:embed testdata/*.x12
var testdata embed.FS

const (
	ourAS2ID = "FLOODGATE-SUPPLIER"
	idDomain = "edi-as2.floodgate"
	// deliveryHandler is the guarded handler's name: with the source topic
	// it names the retry queue's service (retryqueue.ServiceName).
	deliveryHandler = "as2-delivery"

	// probeConcurrency is the breaker's cap on half-open probes in flight.
	probeConcurrency = 2
	// maxRetailers bounds -retailers: the names below.
	maxRetailers = 8
)

// retailerIDs are the retailers' AS2 IDs, the partner keys.
var retailerIDs = [maxRetailers]string{
	"NORTHWIND-RETAIL", "CONTOSO-MARKETS", "FABRIKAM-STORES", "TAILSPIN-TRADERS",
	"WINGTIP-OUTLETS", "ADVENTURE-WORKS", "LITWARE-SUPPLY", "PROSEWARE-SHOPS",
}

// retailer is one AS2 partner: its receiver on a real HTTP server, the
// sender that signs and encrypts for it, and what the run counted for it.
type retailer struct {
	id       string // AS2 ID: the AS2-To of its orders, its partner key
	faulty   bool   // follows the fault script
	receiver *as2partner.Partner
	srv      *httptest.Server
	sender   *as2.Sender
	drain    exampleutil.DrainTimer
	ids      []string // orders produced for it
}

// identity is our AS2 certificate and private key, from -as2-cert and
// -as2-key; nil when they are not given.
type identity struct {
	cert *x509.Certificate
	key  crypto.Signer
}

// loadIdentity reads -as2-cert and -as2-key, with the as2 package's PEM
// readers; the error names the flag, never the key.
func loadIdentity(o options) (*identity, error) {
	if o.as2Cert == "" {
		return nil, nil
	}
	cert, err := as2.LoadCertificate(o.as2Cert)
	if err != nil {
		return nil, fmt.Errorf("-as2-cert: %w", err)
	}
	key, err := as2.LoadPrivateKey(o.as2Key)
	if err != nil {
		return nil, fmt.Errorf("-as2-key: %w", err)
	}
	if pub, ok := key.Public().(interface{ Equal(crypto.PublicKey) bool }); !ok || !pub.Equal(cert.PublicKey) {
		return nil, errors.New("-as2-key is not the private key of -as2-cert")
	}
	return &identity{cert: cert, key: key}, nil
}

// newRetailer starts retailer id's receiver and builds its sender. Each
// retailer has its own throwaway keys and certificates, and so do we for
// it unless ours is given (-as2-cert, -as2-key): orders are signed
// (SHA-256) and encrypted (AES-256-CBC) for it, and it returns a signed MDN
// whose MIC the sender checks (RFC 4130). Its receiver rejects an AS2-To
// other than its own.
func newRetailer(id string, faulty bool, o options, ours *identity, async *asyncReceipts) (*retailer, error) {
	pki, err := as2test.New(ourAS2ID, id)
	if err != nil {
		return nil, fmt.Errorf("AS2 certificates: %w", err)
	}
	pcfg := pki.PartnerConfig()
	scfg := pki.SenderConfig("")
	if ours != nil {
		pcfg.SenderCert = ours.cert
		scfg.SigningCert, scfg.SigningKey = ours.cert, ours.key
	}
	pcfg.Script = healthyScript()
	if faulty {
		pcfg.Script = script(o)
	}
	if async != nil {
		async.configure(&scfg, &pcfg)
	}
	receiver, err := as2partner.New(pcfg)
	if err != nil {
		return nil, err
	}
	srv := httptest.NewServer(receiver)
	scfg.URL = srv.URL + "/as2"
	scfg.Subject = "X12 850 purchase order"
	scfg.Timeout = 5 * time.Second
	scfg.MessageIDDomain = idDomain
	sender, err := as2.NewSender(scfg)
	if err != nil {
		srv.Close()
		if ours != nil {
			err = fmt.Errorf("-as2-cert, -as2-key: %w", err)
		}
		return nil, err
	}
	return &retailer{id: id, faulty: faulty, receiver: receiver, srv: srv, sender: sender}, nil
}

// run does the whole job and returns its summary. The summary is returned
// even with an error when the run got far enough to count anything.
func run(ctx context.Context, o options, out io.Writer) (*summary, error) {
	start := time.Now()
	// Errors only (unless a test asks for more): a panic the router
	// recovers, an unconfirmed diversion.
	logger := watermill.NewSlogLogger(slog.New(slog.NewTextHandler(cmp.Or[io.Writer](o.stderr, os.Stderr), &slog.HandlerOptions{Level: cmp.Or[slog.Leveler](o.logLevel, slog.LevelError)})))
	runID := strings.ReplaceAll(uuid.NewString()[:8], "-", "")
	sourceTopic := "edi_orders_" + runID

	// 1. NATS JetStream: embedded unless -nats-url. On an external server
	// the streams made here are deleted at the end.
	nc, err := exampleutil.StartNATS(o.nats)
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	js, pub := nc.JetStream, nc.Publisher

	// 2. The retailers: AS2 partners on real HTTP servers on loopback. Only
	// the -faulty one follows the fault script.
	var async *asyncReceipts // -mdn async: the receipt endpoint and the pending receipts
	if o.mdn == as2.MDNAsync {
		// The records name the queue's service: floodgate derives it from
		// the source topic and the handler's name (below).
		if async, err = newAsyncReceipts(ctx, js, runID, retryqueue.ServiceName(sourceTopic, deliveryHandler)); err != nil {
			return nil, err
		}
		defer async.srv.Close()
		nc.Track("KV_" + async.bucket)
	}
	ours, err := loadIdentity(o)
	if err != nil {
		return nil, err
	}
	retailers := make([]*retailer, o.retailers)
	byID := map[string]*retailer{}
	for i := range retailers {
		r, err := newRetailer(retailerIDs[i], i+1 == o.faulty, o, ours, async)
		if err != nil {
			return nil, err
		}
		if ours != nil && i == 0 {
			// Public: the fingerprint of the certificate the senders sign
			// with says which identity is in use.
			c := r.sender.Config().SigningCert
			sum := sha256.Sum256(c.Raw)
			fmt.Fprintf(out, "as2: orders signed with %s sha256:%s (-as2-cert)\n", c.Subject, hex.EncodeToString(sum[:8]))
		}
		defer r.srv.Close()
		defer r.receiver.Close() // first: its pending MDN posts end
		retailers[i], byID[r.id] = r, r
	}
	faulty := retailers[o.faulty-1]

	// 3. One call: a breaker per retailer (keyed by the order's AS2-To),
	// the retry queue and the per-partner drain, on the router.
	mctx, stopMetrics := context.WithCancel(ctx)
	defer stopMetrics()
	reg, metricsAddr, err := o.metrics.Start(mctx) // nil when -metrics-addr is off
	if err != nil {
		return nil, err
	}
	exampleutil.PrintMetricsURL(out, o.metrics, metricsAddr)
	if err := nc.EnsureStreams(ctx, sourceTopic); err != nil {
		return nil, err
	}
	sub, err := jsq.NewSubscriber(jsq.SubscriberConfig{URL: nc.URL, ConnectOptions: nc.ConnectOptions, Concurrency: 4, AckWait: 30 * time.Second})
	if err != nil {
		return nil, err
	}
	router, err := message.NewRouter(message.RouterConfig{CloseTimeout: 15 * time.Second}, logger)
	if err != nil {
		return nil, err
	}
	var pc exampleutil.PartnerCounters
	var tl transitions       // the faulty retailer's
	var backlog backlogCount // all retailers'
	var drainPeak peakRate   // the faulty retailer's
	var fg *floodgate.Floodgate
	// faultyRate is the faulty retailer's drain rate limit (0 when it is
	// not draining).
	faultyRate := func() float64 {
		for _, s := range fg.Drain().Partners() {
			if s.Key == faulty.id {
				return s.Rate
			}
		}
		return 0
	}
	retryTopic, deadTopic := "floodgate_retry_"+runID, "floodgate_dead_"+runID
	fg, err = floodgate.New(ctx, router, floodgate.Config{
		Name: deliveryHandler, Topic: sourceTopic, Subscriber: sub, JetStream: js,
		PartnerKey: func(m *message.Message) string { return m.Metadata.Get("AS2-To") },
		Deliver: func(msg *message.Message) error {
			key := msg.Metadata.Get("AS2-To")
			r, ok := byID[key]
			if !ok {
				return &deliver.Error{Kind: deliver.ErrPermanent, Op: "as2 send", Cause: fmt.Errorf("no retailer with AS2 ID %q", key)}
			}
			ctx := msg.Context()
			if async != nil { // the pending receipt carries the order, for a dead letter
				ctx = as2.WithOriginal(ctx, key, msg.Metadata)
			}
			_, err := r.sender.Send(ctx, msg.UUID, msg.Payload)
			if err == nil && async != nil {
				async.sent(msg.UUID)
			}
			if err == nil && retryqueue.FromDrain(msg.Context()) {
				pc.Of(key).Drained.Add(1)
				backlog.settled(msg.UUID)
				if r == faulty { // its drain is running: its rate is set
					drainPeak.see(faultyRate())
				}
			}
			return err
		},
		Partner: partner.PartnerConfig{Breaker: breaker.Config{
			WindowSize:           20,
			MinimumCalls:         10,
			FailureRateThreshold: 0.5,
			SlowCallDuration:     2 * time.Second,
			BaseOpenWindow:       time.Second,
			MaxOpenWindow:        30 * time.Second,
			Jitter:               0.2,
			ProbeConcurrency:     probeConcurrency,
			SuccessesToClose:     5,
		}},
		Timeout: 10 * time.Second,
		Queue:   retryqueue.Config{RetryTopic: retryTopic, DeadLetterTopic: deadTopic},
		// Each retailer's drain starts slow and seeks its spare capacity
		// (AIMD), judging latency as the breaker does; the live deliveries
		// count too: the capacity is shared.
		Drain:   retryqueue.PartnerDrainerConfig{Drainer: retryqueue.DrainerConfig{Rate: 10, SlowCall: 2 * time.Second}},
		Metrics: reg,
		OnEvent: func(ev middleware.Event) {
			pc.OnEvent(ev)
			backlog.event(ev)
		},
		OnTransition: func(p *partner.Partner, t breaker.Transition) {
			pc.OnTransition(p, t)
			if r := byID[p.Key()]; r != nil {
				r.drain.Transition(t)
				if r == faulty {
					tl.add(t.To, t.At)
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
	if async != nil {
		senders := make([]*as2.Sender, len(retailers))
		for i, r := range retailers {
			senders[i] = r.sender
		}
		if err := async.start(mctx, senders, fg.Queue()); err != nil {
			return nil, err
		}
	}
	exampleutil.PrintStreams(out, nc, retryTopic, deadTopic)

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	routerErr := make(chan error, 1)
	go func() { routerErr <- router.Run(runCtx) }()
	select {
	case <-router.Running():
	case err := <-routerErr:
		return nil, fmt.Errorf("router: %w", err)
	}

	// 4. Produce X12 850 interchanges at the configured rate, each to the
	// next retailer in turn.
	docs, err := loadDocs()
	if err != nil {
		return nil, err
	}
	produceStart := time.Now()
	for _, r := range retailers {
		r.receiver.StartAt(produceStart)
	}
	produced := make(chan map[string][]string, 1)
	// The producer goes on past -produce-for until the faulty retailer is
	// in its last phase with its breaker closed, so that its recovery has
	// traffic to close on however late the outage ended.
	last := len(faulty.receiver.Script()) - 1
	recovered := func() bool {
		ch := faulty.receiver.PhaseChanges()
		p, ok := fg.Partners().Lookup(faulty.id)
		return ch[len(ch)-1].Phase == last && (!ok || p.Breaker().State() == breaker.StateClosed)
	}
	go func() { produced <- produce(runCtx, pub, sourceTopic, docs, retailers, o, recovered) }()

	// 5. Timeline until everything is accounted for or -settle runs out. The
	// backlogs are sampled every 100 ms (for drain_s); a line is printed per
	// second.
	backlogs := func(ctx context.Context) (map[string]int, bool) { return exampleutil.Backlogs(ctx, fg.Drain()) }
	states := func() string {
		parts := make([]string, len(retailers))
		for i, r := range retailers {
			parts[i] = "-"
			if p, ok := fg.Partners().Lookup(r.id); ok {
				parts[i] = p.Breaker().State().String()
			}
		}
		return strings.Join(parts, ",")
	}
	total := func(f func(*exampleutil.Counters) int64) int64 { return pc.Sum(f) }
	sum := &summary{}
	var idsByRetailer map[string][]string
	var prev snapshot
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	lastLine := produceStart
	if !o.quiet {
		fmt.Fprintf(out, "breakers: %s (faulty: %s)\n", strings.Join(retailerIDs[:len(retailers)], ","), faulty.id)
		fmt.Fprintf(out, "%5s  %-*s  %8s  %8s  %7s  %8s  %9s  %8s  %s\n",
			"t", 10*len(retailers), "breakers", "admitted", "diverted", "backlog", "drained", "rate(/s)", "p-errors", "faulty")
	}
	var settleBy time.Time
	for done := false; !done; {
		select {
		case <-ctx.Done():
			done = true
		case idsByRetailer = <-produced:
			settleBy = time.Now().Add(o.settle)
			produced = nil
			for _, r := range retailers {
				r.ids = idsByRetailer[r.id]
			}
		case now := <-tick.C:
			bl, ok := backlogs(runCtx)
			depth := -1
			if ok {
				depth = 0
				for _, r := range retailers {
					r.drain.Sample(now, bl[r.id])
					depth += bl[r.id]
				}
			}
			sum.BacklogPeak = max(sum.BacklogPeak, depth)
			drainPeak.see(faultyRate())
			if now.Sub(lastLine) >= time.Second {
				lastLine = lastLine.Add(time.Second)
				cur := snapshot{
					admitted: total(func(c *exampleutil.Counters) int64 { return c.Admitted.Load() }),
					diverted: total(func(c *exampleutil.Counters) int64 { return c.Diverted.Load() }),
					drained:  total(func(c *exampleutil.Counters) int64 { return c.Drained.Load() }),
					errors:   int64(faulty.receiver.Stats().Errors),
				}
				if !o.quiet {
					fmt.Fprintf(out, "%4.0fs  %-*s  %8d  %8d  %7d  %8d  %9.0f  %8d  %s\n",
						now.Sub(produceStart).Seconds(), 10*len(retailers), states(),
						cur.admitted-prev.admitted, cur.diverted-prev.diverted, depth,
						cur.drained-prev.drained, faultyRate(), cur.errors-prev.errors, faulty.receiver.PhaseAt(now).Name)
				}
				prev = cur
			}
			if idsByRetailer != nil && (depth == 0 && accounted(retailers, &pc) && async.settled() || now.After(settleBy)) {
				done = true
			}
		}
	}
	cancel()
	if err := router.Close(); err != nil {
		fmt.Fprintln(out, "router close:", err)
	}
	// What is still in a stream is queued, not lost: the retry backlog and
	// source messages not yet acked.
	bl, _ := backlogs(context.Background())
	sourceQueued := 0
	if n, err := retryqueue.Depth(context.Background(), js, sourceTopic, jsq.DefaultConsumerName(sourceTopic)); err == nil {
		sourceQueued = int(n)
	}

	// The outage ended when the partner left it, which -outage-calls (or a
	// starved machine) can make later than -healthy + -outage.
	sum.TimeToFullTrafficS, sum.DrainS = -1, faulty.drain.Seconds()
	if outageEnd, ok := outageEnd(faulty.receiver.PhaseChanges(), o); ok {
		sum.RetripsAfterRecovery = tl.tripsAfterRecovery(outageEnd)
		if last, ok := tl.lastClose(); ok && tl.last() == breaker.StateClosed {
			sum.TimeToFullTrafficS = round1(max(0, last.Sub(outageEnd).Seconds()))
		}
	}
	sum.BacklogPeak = max(sum.BacklogPeak, backlog.highest())
	sum.DrainRatePeak = math.Round(drainPeak.get())
	account(sum, retailers, &pc, bl, sourceQueued)
	st := faulty.receiver.Stats()
	sum.PartnerErrors = st.Errors
	for _, r := range retailers {
		st := r.receiver.Stats()
		sum.SignedEncrypted += min(st.Signed, st.Encrypted)
		sum.SignedMDNs += st.SignedMDNs
	}
	if async != nil {
		sum.AsyncStored, sum.AsyncResolved, sum.AsyncDead = int(async.stored.Load()), int(async.resolved.Load()), int(async.dead.Load())
	}
	sum.Elapsed(start)
	sum.print(out) // -quiet hides the timeline only
	if ctx.Err() != nil {
		return sum, ctx.Err()
	}
	return sum, nil
}

// account fills in the summary's per-retailer and total accounting:
// each retailer's receipts are checked against the orders produced for it
// (an order received by another retailer is misdelivered); backlog is each
// retailer's retry backlog at the end, sourceQueued the source messages
// not yet acked.
func account(sum *summary, retailers []*retailer, pc *exampleutil.PartnerCounters, backlog map[string]int, sourceQueued int) {
	received := make([]map[string]int, len(retailers))
	for i, r := range retailers {
		received[i] = r.receiver.Received()
	}
	sum.Partners = nil
	for i, r := range retailers {
		c := pc.Of(r.id)
		ps := exampleutil.PartnerSummary{Partner: r.id, Faulty: r.faulty}
		own := func(id string) int { return received[i][as2.MessageID(id, idDomain)] }
		elsewhere := func(id string) int {
			n := 0
			for j := range received {
				if j != i {
					n += received[j][as2.MessageID(id, idDomain)]
				}
			}
			return n
		}
		ps.Account(r.ids, own, elsewhere, c.Dead)
		ps.Unsettled(backlog[r.id])
		ps.Diverted, ps.DeadLettered = int(c.Diverted.Load()), int(c.DeadLettered.Load())
		ps.Drained, ps.Trips, ps.DrainS = int(c.Drained.Load()), int(c.Trips.Load()), r.drain.Seconds()
		sum.AddPartner(ps)
		sum.Drained += ps.Drained
	}
	sum.Queued += sourceQueued
	sum.Lost = max(0, sum.Lost-sourceQueued)
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

// last is the state of the last transition (closed when there was none).
func (t *transitions) last() breaker.State {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.to) == 0 {
		return breaker.StateClosed
	}
	return t.to[len(t.to)-1]
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

// accounted reports whether every order produced reached its retailer or
// was dead-lettered.
func accounted(retailers []*retailer, pc *exampleutil.PartnerCounters) bool {
	for _, r := range retailers {
		received := r.receiver.Received()
		for _, id := range r.ids {
			if received[as2.MessageID(id, idDomain)] == 0 && !pc.Of(r.id).Dead(id) {
				return false
			}
		}
	}
	return true
}

// outageEnd returns when the faulty retailer's outage ended, from its
// partner's phase changes: when the phase after the outage began (with no
// outage, when the healthy phase ended). ok is false if that phase has not
// begun.
func outageEnd(changes []as2partner.PhaseChange, o options) (time.Time, bool) {
	next := 0 // the index of the phase after the outage in script(o)
	if o.healthyFor > 0 {
		next++
	}
	if o.outage > 0 {
		next++
	}
	for _, c := range changes {
		if c.Phase == next {
			return c.At, true
		}
	}
	return time.Time{}, false
}

// script is the partner's fault script: healthy, outage (503), fragile
// recovery with a capacity limit, then healthy for good.
func script(o options) []as2partner.Phase {
	var s []as2partner.Phase
	if o.healthyFor > 0 {
		s = append(s, as2partner.Phase{Name: "healthy", Duration: o.healthyFor, Mode: as2partner.Healthy})
	}
	if o.outage > 0 {
		s = append(s, as2partner.Phase{Name: "outage", Duration: o.outage, MinRequests: o.outageCalls, Mode: as2partner.Down})
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

// healthyScript is a healthy retailer's script: no fault, no capacity
// limit.
func healthyScript() []as2partner.Phase {
	return []as2partner.Phase{{Name: "healthy", Mode: as2partner.Healthy}}
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

// produce publishes renumbered copies of docs at o.rate for o.produceFor,
// and after that until recovered reports true (at most o.settle more),
// each to the next retailer in turn (its AS2 ID in the AS2-To metadata),
// and returns the UUIDs it published (confirmed by JetStream) per retailer.
func produce(ctx context.Context, pub message.Publisher, topic string, docs []*x12.Interchange, retailers []*retailer, o options, recovered func() bool) map[string][]string {
	lim := rate.NewLimiter(rate.Limit(o.rate), 1)
	ids := map[string][]string{}
	deadline := time.Now().Add(o.produceFor)
	more := func(now time.Time) bool {
		return now.Before(deadline) || now.Before(deadline.Add(o.settle)) && !recovered()
	}
	for n := 1; more(time.Now()); n++ {
		if err := lim.Wait(ctx); err != nil {
			break
		}
		doc := docs[n%len(docs)]
		to := retailers[n%len(retailers)].id
		msg := message.NewMessage(uuid.NewString(), doc.Renumber(100000000+n, 1000+n, 10000+n))
		msg.Metadata.Set("x12_control_number", fmt.Sprintf("%09d", 100000000+n))
		msg.Metadata.Set("AS2-To", to)
		for {
			err := pub.Publish(topic, msg)
			if err == nil {
				ids[to] = append(ids[to], msg.UUID)
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
