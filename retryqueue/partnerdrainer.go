package retryqueue

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/floodgate-go/floodgate/jsq"
	"github.com/floodgate-go/floodgate/partner"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// PartnerDrainerConfig configures [NewPartnerDrainer].
type PartnerDrainerConfig struct {
	// JetStream is the JetStream context the partners' drainers consume
	// with and discovery reads the retry stream with.
	// Required.
	JetStream jetstream.JetStream
	// Queue is the retry queue drained: every partner of its service
	// ([Queue.Service]). Its diversions start their partner's drain at
	// once. A Queue with [Config.OrderingKey] is refused: its ordering
	// index is one per Queue, not per partner (use a [Drainer] with
	// [DrainerConfig.AllPartners]).
	// Required.
	Queue *Queue
	// Handler delivers a drained message, as [DrainerConfig.Handler]; it
	// finds the partner with [DrainedPartner].
	// Required.
	Handler message.HandlerFunc
	// Gate returns the gate of a partner's breaker (see [Gate]). It is
	// called when the partner's drain starts, and the gate it returns is
	// used until that drain stops. It must not return nil.
	// Required.
	Gate func(partnerKey string) Gate
	// Drainer is the template of every partner's [Drainer]: rates and
	// adaptive control, per-partner MaxInFlight, AckWait, PollInterval,
	// NakDelay, Logger. Its JetStream, Queue, Handler, Gate, Consumer and
	// AllPartners must be zero (they are set per partner); its Stream may
	// name the retry stream.
	// Optional. Default the [DrainerConfig] defaults.
	Drainer DrainerConfig
	// MaxInFlight bounds the drained messages fetched and not yet settled
	// across all partners at once (see [DrainerConfig.MaxInFlight]),
	// shared max-min fairly (see [PartnerDrainer]).
	// Optional. Default 1024. Valid range 1..100000.
	MaxInFlight int
	// MaxDraining bounds the partners that hold a consumer and fetch at
	// once (see [PartnerDrainer]): the others with a backlog wait for
	// their turn, round-robin. Every consumer on the work-queue retry
	// stream costs the server work on each ack of the stream's messages,
	// so this bound, not the number of partners, sets that cost; and the
	// lanes share MaxInFlight, so more lanes fetch smaller batches. A
	// partner's calls go on after its turn (see [PartnerDrainer]), so a
	// slow partner does not hold a lane for its calls. BENCHMARKS.md
	// ("Eighth step") measures the default against others.
	// Optional. Default 16. Valid range 1..10000.
	MaxDraining int
	// KeepConsumers bounds the partners whose consumer is kept from one
	// turn to the next while their backlog lasts (see [PartnerDrainer]):
	// their next turn fetches at once rather than creating the consumer
	// again, and the turn does not delete it. A kept consumer is deleted
	// when its partner's backlog is found empty or its drain stops (it
	// stays, and counts, while the partner's gate is closed); a
	// partner ending a turn while KeepConsumers others are kept deletes
	// its own, as every partner does with -1. Each consumer on the
	// work-queue retry stream costs the server work on every ack of the
	// stream's messages, so this bounds that cost with MaxDraining.
	// BENCHMARKS.md ("Eighth step") measures the default against others.
	// Optional. Default 8. Valid range -1..100000 (-1: none kept).
	KeepConsumers int
	// DiscoverInterval is how often the retry stream's per-subject counts
	// are read to find partners with a backlog that this process did not
	// divert (another replica's, or from before a restart). They are also
	// read when Run starts.
	// Optional. Default 10s. Valid range >= 10ms.
	DiscoverInterval time.Duration
	// ServiceConsumerFrom is the number of partners draining here at once
	// from which the service's backlog drains through one consumer, the
	// service consumer ([ServiceConsumerName]), rather than each partner
	// on its own. It happens only with gates that are [ClosedGate]s
	// (floodgate's are), once every partner draining here has been closed
	// for a quarter second, has seen no failure for 2s, and holds no
	// consumer with messages awaiting an ack. The partners then end their
	// turns, delete their consumers and wait; the service consumer reads
	// the stream in order (the oldest message first, whatever its partner,
	// rather than the partners' max-min fair shares) and hands each
	// message to Handler, where it meets its partner's breaker and
	// bulkhead as ever. Each partner keeps its own drain rate: a message
	// beyond it goes back to the backlog for a PollInterval, and the rate
	// adapts to the partner's calls (slow start included) as on its own
	// consumer; the service consumer fetches at the sum of the rates,
	// with the whole MaxInFlight (at most 10,000). The first call a
	// partner does not take (a failure, a slow call, a diversion, a
	// refusal), a failed live call, a partner's gate leaving closed, or a
	// tenth of a second in which more messages went back for their
	// partners' rates than were delivered (one partner's backlog ahead of
	// the others') ends it: the service consumer is deleted and the
	// partners go on from their own rates. A leave that did not drain the
	// backlog waits 0.5-1s (jittered), doubling per leave to 1 min, before
	// the next entry. Replicas share the one consumer (a leave deletes it
	// under the others, whose messages in flight are then delivered
	// again); while another replica's partners drain on their own
	// consumers the stream refuses it, and the partners go on theirs; a
	// partner refused beside another replica's joins it, or waits for it
	// to go. BENCHMARKS.md ("Ninth step") measures it.
	// Optional. Default MaxDraining+1: partners beyond the lanes, which
	// would take turns. Valid range -1 (never) or 2..100000.
	ServiceConsumerFrom int
}

func (c *PartnerDrainerConfig) setDefaults() {
	if c.MaxInFlight == 0 {
		c.MaxInFlight = 1024
	}
	if c.DiscoverInterval == 0 {
		c.DiscoverInterval = 10 * time.Second
	}
	if c.MaxDraining == 0 {
		c.MaxDraining = 16
	}
	if c.KeepConsumers == 0 {
		c.KeepConsumers = 8
	}
	if c.ServiceConsumerFrom == 0 {
		c.ServiceConsumerFrom = c.MaxDraining + 1
	}
}

// Validate reports whether c, with defaults applied to its zero fields, is
// valid: the check [NewPartnerDrainer] makes. It does not modify c. The
// error wraps [ErrInvalidConfig] and names the field and its allowed range.
func (c PartnerDrainerConfig) Validate() error {
	c.setDefaults()
	t := c.Drainer
	switch {
	case c.JetStream == nil:
		return fmt.Errorf("%w: JetStream is required", ErrInvalidConfig)
	case c.Queue == nil:
		return fmt.Errorf("%w: Queue is required", ErrInvalidConfig)
	case c.Queue.Ordered():
		return fmt.Errorf("%w: Queue has an OrderingKey: per-key ordering needs one Drainer for the service (DrainerConfig.AllPartners), not a PartnerDrainer", ErrInvalidConfig)
	case c.Handler == nil:
		return fmt.Errorf("%w: Handler is required", ErrInvalidConfig)
	case c.Gate == nil:
		return fmt.Errorf("%w: Gate is required", ErrInvalidConfig)
	case c.MaxInFlight < 1 || c.MaxInFlight > 100000:
		return fmt.Errorf("%w: MaxInFlight must be in 1..100000, got %d", ErrInvalidConfig, c.MaxInFlight)
	case c.MaxDraining < 1 || c.MaxDraining > 10000:
		return fmt.Errorf("%w: MaxDraining must be in 1..10000, got %d", ErrInvalidConfig, c.MaxDraining)
	case c.KeepConsumers < -1 || c.KeepConsumers > 100000:
		return fmt.Errorf("%w: KeepConsumers must be in -1..100000, got %d", ErrInvalidConfig, c.KeepConsumers)
	case c.ServiceConsumerFrom != -1 && (c.ServiceConsumerFrom < 2 || c.ServiceConsumerFrom > 100000):
		return fmt.Errorf("%w: ServiceConsumerFrom must be -1 or in 2..100000, got %d", ErrInvalidConfig, c.ServiceConsumerFrom)
	case c.DiscoverInterval < 10*time.Millisecond:
		return fmt.Errorf("%w: DiscoverInterval must be >= 10ms, got %s", ErrInvalidConfig, c.DiscoverInterval)
	case t.JetStream != nil || t.Queue != nil || t.Handler != nil || t.Gate != nil:
		return fmt.Errorf("%w: Drainer.JetStream, Drainer.Queue, Drainer.Handler and Drainer.Gate must be unset: PartnerDrainerConfig sets them per partner", ErrInvalidConfig)
	case t.Consumer != "":
		return fmt.Errorf("%w: Drainer.Consumer must be empty: each partner's consumer is ConsumerName(service, partner key)", ErrInvalidConfig)
	case t.AllPartners:
		return fmt.Errorf("%w: Drainer.AllPartners must be false: a PartnerDrainer drains each partner on its own consumer", ErrInvalidConfig)
	}
	t.JetStream, t.Queue, t.Handler = c.JetStream, c.Queue, c.Handler
	t.Gate = GateFunc(func() int { return 0 })
	if err := t.Validate(); err != nil {
		return fmt.Errorf("%w: Drainer.%s", ErrInvalidConfig, strings.TrimPrefix(err.Error(), ErrInvalidConfig.Error()+": "))
	}
	return nil
}

// PartnerStatus is one partner's drain, as [PartnerDrainer.Partners] and
// [PartnerDrainer.Status] report it.
type PartnerStatus struct {
	// Key is the partner key; "" when only its token is known (a hashed
	// token whose drain does not run here).
	Key string `json:"key"`
	// Token is [partner.Token] of Key: the last token of its subject.
	Token string `json:"token"`
	// Backlog is the partner's messages in the retry stream: read from the
	// server by Status; by Partners, as last seen (at discovery or the
	// drain's last empty fetch).
	Backlog uint64 `json:"backlog"`
	// Draining reports that this process runs the partner's drain.
	Draining bool `json:"draining"`
	// Paused reports that the partner's gate admitted nothing at its
	// drain's last look (its breaker is open, or half-open with every probe
	// slot taken).
	Paused bool `json:"paused"`
	// Rate is the drain's rate limit, in messages per second (0 when not
	// draining here).
	Rate float64 `json:"rate"`
	// DrainedPerSec is the measured drain rate, in messages per second,
	// over the last few seconds.
	DrainedPerSec float64 `json:"drained_per_s"`
	// Drained counts messages drained since this drain started.
	Drained uint64 `json:"drained"`
}

// PartnerDrainer drains every partner of one service, each under its own
// breaker's budget, so that an open partner's backlog never delays a
// healthy one's (no head-of-line blocking).
//
// Each partner with a backlog gets its own [Drainer]: a durable consumer
// ([ConsumerName](service, partner key)) filtered on the partner's route
// subject, the [Gate] PartnerDrainerConfig.Gate returns for it, and its own
// adaptive drain rate (the template's AIMD, per partner). An open
// partner's drainer fetches nothing, so its backlog is never read.
//
// The partners take turns: at most [PartnerDrainerConfig.MaxDraining] hold
// a consumer and fetch at once (lanes). A partner queues for a lane only
// while its gate admits messages and its rate has a batch ready (its token
// bucket full), creates its consumer (in server memory), fetches batches
// for a slice of 100ms (while its gate, its rate and its backlog allow;
// within the slice it waits for its own handlers to free slots), and, if
// another partner waits, gives the lane up and goes to the back of the
// queue: round-robin, one slice per turn, so every partner with a backlog
// gets a turn before any gets a second, and a partner's share is what it
// fetched in its slice per round of turns. Once its handlers are done, a
// partner whose backlog lasts keeps its consumer for its next turn (at
// most [PartnerDrainerConfig.KeepConsumers] partners do, so a turn does
// not pay for a consumer create and delete); otherwise it deletes the
// consumer (kept only while messages of it await an ack: a nak delay, or
// another replica's). While nobody waits, a partner keeps its lane and
// drains as a lone [Drainer] does. The bound exists because every consumer
// on a work-queue stream costs the server work on each ack of any of the
// stream's messages (it checks every consumer's interest), and a
// file-backed consumer writes its state to disk several times a second:
// with a consumer per partner with a backlog, 1,000 partners drained
// 10-30 times slower than one consumer reads (see BENCHMARKS.md), and
// even a few filtered consumers on a stream of many partners' interleaved
// messages each walk past the others' to find their own: while many
// closed partners drain, they do so through one service consumer instead
// (see [PartnerDrainerConfig.ServiceConsumerFrom]). A turn
// in turn costs the server a consumer create and delete, unless the
// partner's consumer was kept from its last turn. Drained messages
// in handlers are bounded across partners by
// [PartnerDrainerConfig.MaxInFlight], shared max-min fairly: free slots go
// to the waiting partners in turn, and a partner already holding its fair
// share (MaxInFlight / partners draining) waits behind those below it. A
// partner's lane is given up before its handlers finish, so slow partner
// calls do not hold the lanes; the consumers on the stream are at most
// MaxDraining plus the partners with messages in handlers (at most
// MaxInFlight) plus KeepConsumers, plus those kept for messages awaiting
// an ack.
//
// A partner's drain starts when the Queue diverts a message to it (at once,
// through a hook in the Queue), on [PartnerDrainer.Wake], or when
// discovery finds its subject non-empty in the retry stream (at Run and
// every DiscoverInterval: another replica's diversions, or a backlog from
// before a restart). It stops when its backlog is empty and its consumer
// deleted: its goroutine returns. So an idle partner costs no goroutine,
// no consumer and no poll loop; the PartnerDrainer itself runs one
// goroutine and one discovery timer per service. A partner with a backlog
// has a goroutine, which waits for its gate (polling it every
// PollInterval, or woken by Wake), its rate, or its turn. Deleting a
// consumer loses nothing: the work-queue retry stream keeps every unacked
// message, and a new deliver-all consumer gets them again; a replica whose
// consumer was deleted under it creates it again (a message it held
// unacked is delivered again: a duplicate, never a loss). A diversion that
// races the stop restarts the drain.
//
// Its methods are safe for concurrent use; Run runs once at a time.
type PartnerDrainer struct {
	cfg    PartnerDrainerConfig
	stream string
	share  *fairShare
	lanes  *lanes
	kick   chan struct{}

	running atomic.Bool

	mu      sync.Mutex
	ctx     context.Context // Run's; nil while not running
	parts   map[string]*drainPart
	kept    int              // the parts whose consumer is kept between turns
	pending map[string]route // woken before Run
	wg      sync.WaitGroup   // the partners' Run goroutines, and runServiceConsumer
	svc     svcState         // see serviceconsumer.go

	svcWant            atomic.Bool             // svc.phase != svcOff: the partners park
	svcJoin            atomic.Bool             // a partner's consumer was refused beside the service consumer
	svcW               atomic.Pointer[Drainer] // the service consumer's drainer while it drains
	svcRuns, svcLeaves atomic.Uint64
}

// drainPart is one partner's drain; its fields are guarded by
// PartnerDrainer.mu.
type drainPart struct {
	rt       route
	d        *Drainer
	stopping bool // the drain found nothing and is deleting its consumer
	again    bool // woken while stopping: run again
	kept     bool // its consumer is kept between turns (counted in PartnerDrainer.kept)
	backlog  uint64
	parked   bool          // waiting while the service consumer drains (counted in svc.parked)
	poke     chan struct{} // wakes it while parked (Wake)
	// failSeen is its drainer's failure count at runServiceConsumer's last
	// look, and failAt when that look found it changed (that goroutine's).
	failSeen uint64
	failAt   time.Time
	// closedAt is when runServiceConsumer's looks began to find its gate
	// closed (zero: not closed at the last look; that goroutine's).
	closedAt time.Time
}

// NewPartnerDrainer returns a [PartnerDrainer]. It returns an error
// wrapping "invalid config" and [ErrInvalidConfig] naming the field and its
// allowed range.
func NewPartnerDrainer(cfg PartnerDrainerConfig) (*PartnerDrainer, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("invalid config: %w", err)
	}
	cfg.Drainer.Queue = cfg.Queue // for the template's defaults
	cfg.Drainer.setDefaults()
	cfg.Drainer.Consumer = ""
	return &PartnerDrainer{
		cfg:     cfg,
		stream:  cfg.Drainer.Stream,
		share:   newFairShare(cfg.MaxInFlight),
		lanes:   newLanes(cfg.MaxDraining),
		kick:    make(chan struct{}, 1),
		parts:   map[string]*drainPart{},
		pending: map[string]route{},
	}, nil
}

// Run discovers the partners with a backlog and drains each until its
// backlog is empty, until ctx is done; then it waits for the partners'
// drainers to finish their handlers in flight and returns nil. It returns
// [ErrRunning] if already running. A partner's drainer that fails to start
// (its consumer refused: [ErrRouteConflict], a [*jsq.ConfigMismatchError])
// is logged and tried again at the next discovery; one refused beside
// another replica's service consumer joins it, or waits for it to go (see
// [PartnerDrainerConfig.ServiceConsumerFrom]).
func (p *PartnerDrainer) Run(ctx context.Context) error {
	if !p.running.CompareAndSwap(false, true) {
		return ErrRunning
	}
	defer p.running.Store(false)
	remove := p.cfg.Queue.hooks.add(p.diverted)
	defer remove()
	p.mu.Lock()
	p.ctx = ctx
	pending := p.pending
	p.pending = map[string]route{}
	p.mu.Unlock()
	for _, r := range pending {
		p.wakeRoute(r)
	}
	if p.cfg.ServiceConsumerFrom > 0 {
		p.wg.Add(1)
		go p.runServiceConsumer(ctx)
	}
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			p.mu.Lock()
			p.ctx = nil
			p.mu.Unlock()
			p.wg.Wait()
			return nil
		case <-p.kick:
		case <-t.C:
		}
		if err := p.discover(ctx); err != nil && ctx.Err() == nil {
			p.cfg.Drainer.Logger.Error("retryqueue: discover partners with a backlog", err, watermill.LogFields{"stream": p.stream, "service": p.cfg.Queue.Service()})
		}
		t.Reset(p.cfg.DiscoverInterval)
	}
}

// diverted is the Queue's diversion hook.
func (p *PartnerDrainer) diverted(r route) {
	if !r.known {
		p.Discover()
		return
	}
	p.wakeRoute(r)
}

// Discover makes Run read the retry stream's per-partner counts now rather
// than at the next DiscoverInterval. It never blocks.
func (p *PartnerDrainer) Discover() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// Wake starts the drain of partner partnerKey if it is not running (it
// stops again at once if the partner's backlog is empty), or makes its
// waiting drainer look at its gate now: call it when the partner's breaker
// changes state. Before Run it is remembered until Run starts. It never
// blocks on I/O.
func (p *PartnerDrainer) Wake(partnerKey string) {
	p.wakeRoute(p.cfg.Queue.routeOf(partnerKey))
}

// wakeRoute is Wake for a route whose key is known.
func (p *PartnerDrainer) wakeRoute(r route) {
	p.mu.Lock()
	if p.ctx == nil {
		p.pending[r.partnerToken] = r
		p.mu.Unlock()
		return
	}
	if e := p.parts[r.partnerToken]; e != nil {
		if e.stopping {
			e.again = true
		}
		d := e.d
		p.mu.Unlock()
		d.Wake()
		select {
		case e.poke <- struct{}{}: // parked: look at the gate
		default:
		}
		return
	}
	p.mu.Unlock()
	// Built without the lock: Gate is the caller's code (a registry
	// lookup, which may ask HasBacklog).
	e := &drainPart{rt: r, poke: make(chan struct{}, 1)}
	d, err := p.newDrainer(e)
	if err != nil {
		p.cfg.Drainer.Logger.Error("retryqueue: partner drainer", err, watermill.LogFields{"stream": p.stream, "partner_token": r.partnerToken})
		return
	}
	e.d = d
	p.mu.Lock()
	if p.ctx == nil || p.parts[r.partnerToken] != nil {
		// Run ended, or another wake started it meanwhile: drop this one.
		p.mu.Unlock()
		p.wakeRoute(r)
		return
	}
	p.parts[r.partnerToken] = e
	ctx := p.ctx
	p.wg.Add(1)
	p.mu.Unlock()
	go p.runPart(ctx, e)
}

// newDrainer builds e's drainer from the template.
func (p *PartnerDrainer) newDrainer(e *drainPart) (*Drainer, error) {
	c := p.cfg.Drainer
	c.JetStream, c.Queue, c.Handler = p.cfg.JetStream, p.cfg.Queue, p.cfg.Handler
	c.Consumer = consumerPrefix + p.cfg.Queue.service + "~" + e.rt.partnerToken
	if c.Gate = p.cfg.Gate(e.rt.partnerKey); c.Gate == nil {
		return nil, fmt.Errorf("%w: Gate returned nil for partner token %q", ErrInvalidConfig, e.rt.partnerToken)
	}
	d, err := NewDrainer(c)
	if err != nil {
		return nil, err
	}
	d.setRoute(e.rt)
	d.share, d.lanes = p.share, p.lanes
	d.idle = func(ctx context.Context) bool { return p.stop(ctx, e) }
	d.park = func(ctx context.Context) { p.park(ctx, e) }
	d.parking = p.svcWant.Load
	d.retire = func(ctx context.Context, t turnEnd) (bool, bool) { return p.retire(ctx, e, t) }
	return d, nil
}

// runPart runs e's drainer until its backlog is empty or ctx is done.
func (p *PartnerDrainer) runPart(ctx context.Context, e *drainPart) {
	defer p.wg.Done()
	for {
		err := e.d.Run(ctx)
		switch {
		case err == nil:
		case errors.Is(err, ErrRouteConflict) && p.serviceConsumerExists(ctx):
			// Another replica drains the service through its service
			// consumer: join it, or wait for it to go.
			p.cfg.Drainer.Logger.Debug("retryqueue: partner drains through another replica's service consumer", watermill.LogFields{"stream": p.stream, "consumer": e.d.Consumer()})
			p.svcJoin.Store(true)
			p.awaitService(ctx, e)
			if ctx.Err() == nil {
				continue
			}
		default:
			p.cfg.Drainer.Logger.Error("retryqueue: partner drainer", err, watermill.LogFields{"stream": p.stream, "consumer": e.d.Consumer()})
		}
		p.mu.Lock()
		if err == nil && ctx.Err() == nil && e.again {
			e.stopping, e.again = false, false
			p.mu.Unlock()
			continue
		}
		delete(p.parts, e.rt.partnerToken)
		kept := p.unkeepLocked(e)
		p.mu.Unlock()
		if kept && !errors.Is(err, ErrRouteConflict) && !errors.Is(err, jsq.ErrConfigMismatch) {
			// Run ended with the consumer kept for the next turn: delete
			// it (the work-queue stream keeps every unacked message),
			// whatever Run returned, with a context that outlives ctx.
			// Not after a refusal: Run refuses only when its consumer is
			// gone and the name is held by one that is not this route's
			// (or another overlaps it), which is not ours to delete.
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.cfg.Queue.cfg.PublishTimeout)
			_ = p.cfg.JetStream.DeleteConsumer(dctx, p.stream, e.d.Consumer())
			cancel()
		}
		return
	}
}

// awaitService holds e, whose consumer the stream refused beside another
// replica's service consumer, until this one drains through it too (then
// e parks until it leaves) or for DiscoverInterval (then e tries its own
// consumer again). Meanwhile e stays a partner draining here
// ([PartnerDrainer.HasBacklog]).
func (p *PartnerDrainer) awaitService(ctx context.Context, e *drainPart) {
	deadline := time.Now().Add(p.cfg.DiscoverInterval)
	for ctx.Err() == nil && time.Now().Before(deadline) {
		if p.svcWant.Load() {
			p.park(ctx, e)
			return
		}
		sleepCtx(ctx, svcCheck)
	}
}

// keep counts e's consumer among those kept between turns, if it is
// already or fewer than KeepConsumers are; it reports whether it is.
func (p *PartnerDrainer) keep(e *drainPart) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !e.kept && p.kept < p.cfg.KeepConsumers {
		e.kept = true
		p.kept++
	}
	return e.kept
}

// unkeepLocked takes e's consumer out of those kept between turns and
// reports whether it was. Requires p.mu held.
func (p *PartnerDrainer) unkeepLocked(e *drainPart) bool {
	if !e.kept {
		return false
	}
	e.kept = false
	p.kept--
	return true
}

// stop is e's drainer's idle check, made after a fetch found nothing: it
// deletes the consumer and reports true when the consumer has nothing
// pending or awaiting an ack.
func (p *PartnerDrainer) stop(ctx context.Context, e *drainPart) bool {
	p.mu.Lock()
	e.stopping, e.again = true, false
	p.mu.Unlock()
	done, deleted := p.emptyDeleted(ctx, e, false)
	p.mu.Lock()
	if deleted {
		p.unkeepLocked(e)
	}
	if !done {
		e.stopping, e.again = false, false
	}
	p.mu.Unlock()
	return done
}

// retire is the end of a turn of e's drainer. After a clean turn on a
// consumer of its own whose backlog lasts, it keeps the consumer for the
// next turn (no request) while fewer than KeepConsumers are kept.
// Otherwise it deletes the consumer unless messages of it are awaiting an
// ack (waiting out a nak delay, or held by another replica), and reports
// the backlog empty (idle: the drain ends as with stop) and the consumer
// deleted. A clean turn on a consumer of its own knows that much without
// asking the server (one request, the deletion); otherwise it reads the
// consumer's info first.
func (p *PartnerDrainer) retire(ctx context.Context, e *drainPart, t turnEnd) (idle, deleted bool) {
	if t.clean && !t.shared && !t.empty && !p.svcWant.Load() && p.keep(e) {
		e.d.keptClean = true
		return false, false
	}
	p.mu.Lock()
	e.stopping, e.again = true, false
	p.unkeepLocked(e)
	p.mu.Unlock()
	if t.clean && !t.shared {
		err := p.cfg.JetStream.DeleteConsumer(ctx, p.stream, e.d.Consumer())
		deleted = err == nil || errors.Is(err, jetstream.ErrConsumerNotFound)
		idle = deleted && t.empty
		if idle {
			p.mu.Lock()
			e.backlog = 0
			p.mu.Unlock()
		}
	} else {
		idle, deleted = p.emptyDeleted(ctx, e, true)
	}
	if !idle {
		p.mu.Lock()
		e.stopping, e.again = false, false
		p.mu.Unlock()
	}
	return idle, deleted
}

// emptyDeleted looks at e's consumer: it reports empty when the consumer
// has nothing pending or awaiting an ack, or, with no consumer, the
// partner's subject holds nothing; it deletes the consumer when it is
// empty, or, with yield, when nothing of it awaits an ack.
func (p *PartnerDrainer) emptyDeleted(ctx context.Context, e *drainPart, yield bool) (empty, deleted bool) {
	name := e.d.Consumer()
	c, err := p.cfg.JetStream.Consumer(ctx, p.stream, name)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		// Between turns (or deleted by another replica): the stream says.
		n, err := p.subjectCount(ctx, e.rt)
		if err != nil {
			return false, false
		}
		p.mu.Lock()
		e.backlog = n
		p.mu.Unlock()
		return n == 0, false
	}
	if err != nil {
		return false, false
	}
	info := c.CachedInfo() // fresh: the lookup just read it
	n := info.NumPending + uint64(info.NumAckPending)
	p.mu.Lock()
	e.backlog = n
	p.mu.Unlock()
	if n > 0 && !(yield && info.NumAckPending == 0) {
		return false, false
	}
	err = p.cfg.JetStream.DeleteConsumer(ctx, p.stream, name)
	deleted = err == nil || errors.Is(err, jetstream.ErrConsumerNotFound)
	return n == 0 && deleted, deleted
}

// subjectCount returns the messages stored under r's subject.
func (p *PartnerDrainer) subjectCount(ctx context.Context, r route) (uint64, error) {
	st, err := p.cfg.JetStream.Stream(ctx, p.stream)
	if err != nil {
		return 0, err
	}
	subj := r.subject(p.stream)
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(subj))
	if err != nil {
		return 0, err
	}
	return info.State.Subjects[subj], nil
}

// discover starts the drain of every partner of the service whose subject
// holds messages.
func (p *PartnerDrainer) discover(ctx context.Context) error {
	st, counts, err := p.counts(ctx)
	if err != nil {
		return err
	}
	for subject, n := range counts {
		r, ok := routeFromSubject(p.stream, subject)
		if !ok || r.service != p.cfg.Queue.service || n == 0 {
			continue
		}
		p.mu.Lock()
		e := p.parts[r.partnerToken]
		if e != nil {
			e.backlog = n
		}
		p.mu.Unlock()
		if e != nil {
			continue
		}
		if !r.known {
			k, err := lastKey(ctx, st, subject, r.partnerToken)
			if err != nil {
				p.cfg.Drainer.Logger.Error("retryqueue: partner key of a hashed token", err, watermill.LogFields{"stream": p.stream, "subject": subject})
				continue
			}
			r.partnerKey, r.known = k, true
		}
		p.wakeRoute(r)
	}
	return nil
}

// counts returns the message count of each of the service's subjects.
func (p *PartnerDrainer) counts(ctx context.Context) (jetstream.Stream, map[string]uint64, error) {
	st, err := p.cfg.JetStream.Stream(ctx, p.stream)
	if err != nil {
		return nil, nil, err
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(ServiceSubjects(p.stream, p.cfg.Queue.Service())))
	if err != nil {
		return nil, nil, err
	}
	return st, info.State.Subjects, nil
}

// lastKey recovers the partner key of a hashed token from the last message
// stored under subject ([PartnerKey]), checked against token.
func lastKey(ctx context.Context, st jetstream.Stream, subject, token string) (string, error) {
	raw, err := st.GetLastMsgForSubject(ctx, subject)
	if err != nil {
		return "", err
	}
	m := message.NewMessage(raw.Header.Get(jsq.UUIDHeader), nil)
	for k, v := range raw.Header {
		if !jsq.Reserved(k) && len(v) > 0 {
			m.Metadata.Set(k, v[0])
		}
	}
	k, ok := PartnerKey(m)
	if !ok || partner.Token(k) != token {
		return "", fmt.Errorf("%w: message %s under %q carries no partner key of token %q", ErrRouteMismatch, m.UUID, subject, token)
	}
	return k, nil
}

// HasBacklog reports whether partner partnerKey's drain runs here (it has
// a backlog, or is finding out that it has none), or is due to start.
// Use it as the partner registry's HasBacklog, so a partner is not evicted
// while its backlog drains. It does no I/O.
func (p *PartnerDrainer) HasBacklog(partnerKey string) bool {
	tok := partner.Token(partnerKey)
	p.mu.Lock()
	defer p.mu.Unlock()
	_, running := p.parts[tok]
	_, pending := p.pending[tok]
	return running || pending
}

// Observe reports the outcome of one live delivery to partner partnerKey
// to that partner's adaptive drain rate, as [Drainer.Observe] does; it is
// ignored while the partner's drain does not run. A failed one ends the
// service consumer, if it drains (see
// [PartnerDrainerConfig.ServiceConsumerFrom]). Call it from the
// middleware's event hook for admitted calls. It never blocks on I/O.
func (p *PartnerDrainer) Observe(partnerKey, uuid string, failed bool, latency time.Duration) {
	p.mu.Lock()
	e := p.parts[partner.Token(partnerKey)]
	p.mu.Unlock()
	if w := p.svcW.Load(); w != nil && w.inflight.has(uuid) {
		return // the service consumer's own call: serviceOutcome counts it
	}
	if e != nil {
		e.d.Observe(uuid, failed, latency)
	}
	if failed && p.svcWant.Load() {
		p.leaveService("a live call to partner " + partner.Token(partnerKey) + " failed")
	}
}

// InFlight returns the drained messages in handlers (or fetched and not
// yet settled) across all partners: at most
// [PartnerDrainerConfig.MaxInFlight].
func (p *PartnerDrainer) InFlight() int { return p.share.inUse() }

// Partners returns the partners whose drain runs here, sorted by token,
// without asking the server (Backlog as last seen). It suits metrics.
func (p *PartnerDrainer) Partners() []PartnerStatus {
	p.mu.Lock()
	out := make([]PartnerStatus, 0, len(p.parts))
	ds := make([]*Drainer, 0, len(p.parts))
	for _, e := range p.parts {
		out = append(out, PartnerStatus{Key: e.rt.partnerKey, Token: e.rt.partnerToken, Backlog: e.backlog, Draining: true})
		ds = append(ds, e.d)
	}
	p.mu.Unlock()
	now := time.Now()
	for i, d := range ds {
		out[i].Paused = d.paused.Load()
		out[i].Rate = d.Rate()
		out[i].DrainedPerSec = d.measured(now)
		out[i].Drained = d.drained.Load()
	}
	slices.SortFunc(out, func(a, b PartnerStatus) int { return strings.Compare(a.Token, b.Token) })
	return out
}

// Status returns every partner of the service with a backlog in the retry
// stream, whichever replica diverted it, and every partner whose drain runs
// here, sorted by token; Backlog is read from the server (one stream info
// request). The Key of a hashed token whose drain does not run here is "".
func (p *PartnerDrainer) Status(ctx context.Context) ([]PartnerStatus, error) {
	_, counts, err := p.counts(ctx)
	if err != nil {
		return nil, err
	}
	byToken := map[string]PartnerStatus{}
	for _, s := range p.Partners() {
		s.Backlog = 0
		byToken[s.Token] = s
	}
	for subject, n := range counts {
		r, ok := routeFromSubject(p.stream, subject)
		if !ok || r.service != p.cfg.Queue.service {
			continue
		}
		s, ok := byToken[r.partnerToken]
		if !ok {
			s = PartnerStatus{Key: r.partnerKey, Token: r.partnerToken}
		}
		s.Backlog = n
		byToken[r.partnerToken] = s
	}
	out := make([]PartnerStatus, 0, len(byToken))
	for _, s := range byToken {
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b PartnerStatus) int { return strings.Compare(a.Token, b.Token) })
	return out, nil
}

// errDrainIdle ends a [PartnerDrainer]'s partner drainer's Run: its
// backlog is empty and its consumer deleted.
var errDrainIdle = errors.New("retryqueue: partner backlog empty")

// consumerGone reports whether a fetch failed because the consumer no
// longer exists: deleted under the drainer (a pull request to a missing
// consumer gets no responder).
func consumerGone(err error) bool {
	return errors.Is(err, jetstream.ErrConsumerNotFound) || errors.Is(err, jetstream.ErrConsumerDeleted) || errors.Is(err, nats.ErrNoResponders)
}
