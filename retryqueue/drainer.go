package retryqueue

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/floodgate-go/floodgate/internal/lazyctx"
	"github.com/floodgate-go/floodgate/internal/pull"
	"github.com/floodgate-go/floodgate/jsq"
	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/time/rate"
)

// ErrRunning is returned by [Drainer.Run] when the drainer is already running.
var ErrRunning = errors.New("retryqueue: drainer already running")

// DrainerConfig configures [NewDrainer].
type DrainerConfig struct {
	// JetStream is the JetStream context the drainer consumes with.
	// Required.
	JetStream jetstream.JetStream
	// Queue is the retry queue drained; the drainer dead-letters malformed
	// messages through it and takes its clock, retry topic and ordering key.
	// Required.
	Queue *Queue
	// Stream is the retry stream.
	// Optional. Default Queue.RetryTopic().
	Stream string
	// AllPartners makes the drainer drain every partner of the Queue's
	// service: its consumer filters on Stream.<service token>.>
	// ([ServiceSubjects]) instead of the Queue's route subject
	// ([Queue.RetrySubject]). The work-queue retry stream then refuses a
	// per-partner drainer of the same service beside it, and the other
	// way round ([ErrRouteConflict]).
	// Optional. Default false: the Queue's route only.
	AllPartners bool
	// Consumer is the durable pull consumer's name on Stream. It filters on
	// the drainer's route (see AllPartners), so it receives only its
	// route's messages; replicas of one service share it. A consumer of
	// that name with another filter (another route's) is refused by Run
	// ([ErrRouteConflict]), never taken over.
	// Optional. Default [ConsumerName](Queue.Service(), Queue.Partner()), or
	// "floodgate_drainer~" + the service token alone with AllPartners.
	Consumer string
	// Handler delivers a drained message: the breaker-guarded handler (the
	// middleware-wrapped delivery). Returning nil means the message's
	// outcome is durable (delivered, diverted again, or dead-lettered) and
	// the drainer acks it; an error makes the drainer nak it with a delay,
	// so JetStream redelivers it. A message the handler diverts for a
	// reason other than [ReasonFailure] and [ReasonNotAttempted] (the
	// breaker turned it away) is not acked but left in the backlog (see
	// [Queue.Divert]). Messages it returns are ignored.
	// Required.
	Handler message.HandlerFunc
	// Gate says how many messages the breaker admits now; the drainer
	// runs at most that many calls of its own at once (see [Gate]).
	// Required.
	Gate Gate
	// Rate is the drain rate, in messages per second, the drainer starts
	// with (a token bucket). Unless FixedRate is set, the rate then adapts
	// between MinRate and MaxRate (see [Drainer]). [Drainer.SetRate]
	// changes it at run time.
	// Optional. Default 50. Valid range > 0, finite.
	Rate float64
	// MinRate is the lowest rate the adaptive control backs off to.
	// Optional. Default min(1, Rate). Valid range (0, Rate].
	MinRate float64
	// MaxRate bounds the drain rate, in messages per second.
	// Optional. Default 0: no bound but the partner's measured capacity.
	// Valid range 0 or >= Rate.
	MaxRate float64
	// FixedRate turns the adaptive control off: the rate stays Rate (or
	// what [Drainer.SetRate] sets).
	// Optional. Default false.
	FixedRate bool
	// AdjustInterval is how often the adaptive control looks at the
	// outcomes since its last look and changes the rate. In slow start it
	// looks sooner, once it has seen 8 outcomes: after 100ms,
	// AdjustInterval/5 or twice the slowest of those calls, whichever is
	// longest, if that is shorter (see [Drainer]).
	// Optional. Default 500ms. Valid range >= 10ms.
	AdjustInterval time.Duration
	// Increase is the additive increase, in messages per second, applied
	// per clean AdjustInterval once the control has seen a failure (before
	// that, and again after each pause, the rate grows by half per clean
	// AdjustInterval, or doubles per clean early look: slow start, see
	// AdjustInterval).
	// Optional. Default 5 % of the rate after the last decrease, at least
	// 1 (max(1, Rate/20) before the first). Valid range > 0.
	Increase float64
	// Decrease is the multiplicative decrease factor applied when an
	// interval saw a failed or slow call.
	// Optional. Default 0.7. Valid range (0, 1).
	Decrease float64
	// SlowCall is the latency from which a successful delivery counts as a
	// failure for the adaptive control, as the breaker's slow-call
	// threshold does. Set it to the breaker's SlowCallDuration.
	// Optional. Default 0: latency is not judged.
	SlowCall time.Duration
	// MaxInFlight bounds the drained messages fetched and not yet settled
	// (waiting for the gate's room, in the handler, or awaiting their ack's
	// confirmation). In FIFO mode the drainer fetches the next batch while
	// earlier messages are still in the handler, so a slow partner call
	// does not idle the drain; with per-key ordering each batch is
	// finished before the next. The gate bounds the calls further
	// (half-open: the free probe slots), so with a fast partner most of
	// these messages await their ack's confirmation, one round trip each.
	// Optional. Default 256. Valid range 1..10000.
	MaxInFlight int
	// Burst is the token bucket's size: the largest batch fetched at once.
	// Optional. Default ceil(rate/10), at least 1, following the rate as it
	// adapts; for a [PartnerDrainer]'s partner while other partners wait
	// for a lane, ceil(rate): one second of the rate, which it accrued
	// while it waited its turn. Valid range >= 1.
	Burst int
	// AckWait is the consumer's ack wait: a fetched message not acked or
	// nakked within it is redelivered.
	// Optional. Default 30s. Valid range >= 1s.
	AckWait time.Duration
	// HandlerTimeout is the deadline of the context of each message given to
	// Handler.
	// Optional. Default AckWait/2. Valid range > 0 and < AckWait.
	HandlerTimeout time.Duration
	// PollInterval is how long the drainer waits before looking again when
	// the gate admits nothing or the backlog has nothing eligible, unless
	// [Drainer.Wake] is called first.
	// Optional. Default 100ms. Valid range > 0.
	PollInterval time.Duration
	// NakDelay is the redelivery delay after Handler failed on a message's
	// deliveries-th delivery.
	// Optional. Default 500ms doubling to 30s.
	NakDelay func(deliveries uint64) time.Duration
	// Logger receives errors of acks, naks, fetches and consumer creation.
	// Optional. Default watermill.NopLogger.
	Logger watermill.LoggerAdapter
}

func (c *DrainerConfig) setDefaults() {
	if c.Stream == "" && c.Queue != nil {
		c.Stream = c.Queue.RetryTopic()
	}
	if c.Consumer == "" && c.Queue != nil {
		c.Consumer = consumerPrefix + c.Queue.service // AllPartners: the service's
		if !c.AllPartners {
			c.Consumer = ConsumerName(c.Queue.cfg.Service, c.Queue.cfg.Partner)
		}
	}
	if c.Rate == 0 {
		c.Rate = 50
	}
	if c.MinRate == 0 {
		c.MinRate = min(1, c.Rate)
	}
	if c.MaxInFlight == 0 {
		c.MaxInFlight = 256
	}
	if c.AdjustInterval == 0 {
		c.AdjustInterval = 500 * time.Millisecond
	}
	if c.Decrease == 0 {
		c.Decrease = 0.7
	}
	if c.AckWait == 0 {
		c.AckWait = 30 * time.Second
	}
	if c.HandlerTimeout == 0 {
		c.HandlerTimeout = c.AckWait / 2
	}
	if c.PollInterval == 0 {
		c.PollInterval = 100 * time.Millisecond
	}
	if c.NakDelay == nil {
		c.NakDelay = jsq.ExponentialDelay{}.WaitTime
	}
	if c.Logger == nil {
		c.Logger = watermill.NopLogger{}
	}
}

// Validate reports whether c, with defaults applied to its zero fields, is
// valid: the check [NewDrainer] makes. It does not modify c. The error wraps
// [ErrInvalidConfig] and names the field and its allowed range.
func (c DrainerConfig) Validate() error {
	c.setDefaults()
	return c.validate()
}

// validate requires defaults set.
func (c *DrainerConfig) validate() error {
	switch {
	case c.JetStream == nil:
		return fmt.Errorf("%w: JetStream is required", ErrInvalidConfig)
	case c.Queue == nil:
		return fmt.Errorf("%w: Queue is required", ErrInvalidConfig)
	case c.Handler == nil:
		return fmt.Errorf("%w: Handler is required", ErrInvalidConfig)
	case c.Gate == nil:
		return fmt.Errorf("%w: Gate is required", ErrInvalidConfig)
	case !(c.Rate > 0) || math.IsInf(c.Rate, 0):
		return fmt.Errorf("%w: Rate must be > 0 and finite, got %v", ErrInvalidConfig, c.Rate)
	case !(c.MinRate > 0) || c.MinRate > c.Rate:
		return fmt.Errorf("%w: MinRate must be in (0, Rate=%v], got %v", ErrInvalidConfig, c.Rate, c.MinRate)
	case c.MaxRate != 0 && (c.MaxRate < c.Rate || math.IsInf(c.MaxRate, 0) || math.IsNaN(c.MaxRate)):
		return fmt.Errorf("%w: MaxRate must be 0 or a finite value >= Rate (%v), got %v", ErrInvalidConfig, c.Rate, c.MaxRate)
	case c.MaxInFlight < 1 || c.MaxInFlight > 10000:
		return fmt.Errorf("%w: MaxInFlight must be in 1..10000, got %d", ErrInvalidConfig, c.MaxInFlight)
	case c.AdjustInterval < 10*time.Millisecond:
		return fmt.Errorf("%w: AdjustInterval must be >= 10ms, got %s", ErrInvalidConfig, c.AdjustInterval)
	case c.Increase < 0 || math.IsInf(c.Increase, 0) || math.IsNaN(c.Increase):
		return fmt.Errorf("%w: Increase must be > 0 and finite, got %v", ErrInvalidConfig, c.Increase)
	case !(c.Decrease > 0 && c.Decrease < 1):
		return fmt.Errorf("%w: Decrease must be in (0, 1), got %v", ErrInvalidConfig, c.Decrease)
	case c.SlowCall < 0:
		return fmt.Errorf("%w: SlowCall must be >= 0, got %s", ErrInvalidConfig, c.SlowCall)
	case c.Burst < 0:
		return fmt.Errorf("%w: Burst must be >= 1, got %d", ErrInvalidConfig, c.Burst)
	case c.AckWait < time.Second:
		return fmt.Errorf("%w: AckWait must be >= 1s, got %s", ErrInvalidConfig, c.AckWait)
	case c.HandlerTimeout <= 0 || c.HandlerTimeout >= c.AckWait:
		return fmt.Errorf("%w: HandlerTimeout must be > 0 and < AckWait (%s), got %s", ErrInvalidConfig, c.AckWait, c.HandlerTimeout)
	case c.PollInterval <= 0:
		return fmt.Errorf("%w: PollInterval must be > 0, got %s", ErrInvalidConfig, c.PollInterval)
	}
	if err := jsq.ValidateStreamName(c.Stream); err != nil {
		return fmt.Errorf("%w: Stream: %w", ErrInvalidConfig, err)
	}
	if err := jsq.ValidateStreamName(c.Consumer); err != nil {
		return fmt.Errorf("%w: Consumer: %w", ErrInvalidConfig, err)
	}
	return nil
}

// DrainStats are the drainer's counters since [NewDrainer].
type DrainStats struct {
	// Fetched counts messages fetched from the retry stream.
	Fetched uint64
	// Drained counts messages the handler returned nil for and whose ack the
	// server confirmed.
	Drained uint64
	// Redelivered counts messages the handler failed (error or panic) and
	// the drainer nakked with a delay.
	Redelivered uint64
	// Deferred counts fetches of messages whose [MetaNotBefore] had not come
	// yet, whose ordering key was held back behind an earlier message, or
	// that the breaker turned away (see [Queue.Divert]), nakked with a
	// delay. They do not count as attempts.
	Deferred uint64
	// DeadLettered counts malformed messages the drainer dead-lettered
	// itself instead of handing them to the handler.
	DeadLettered uint64
	// AckErrors counts acks and naks the server did not confirm; those
	// messages are redelivered after AckWait (a duplicate, not a loss).
	AckErrors uint64
	// GateClosed counts looks at the gate that found no budget.
	GateClosed uint64
	// Failures counts failed or slow deliveries the adaptive control saw
	// (drained ones, and live ones passed to [Drainer.Observe]).
	Failures uint64
	// Backoffs counts multiplicative decreases of the drain rate.
	Backoffs uint64
}

// DrainStatus is what [Drainer.Status] reports: the backlog and how fast
// it is going.
type DrainStatus struct {
	// Backlog is the retry backlog (see [Depth]).
	Backlog uint64 `json:"backlog"`
	// Paused reports that the gate admitted nothing at the drainer's last
	// look: the breaker is open, or half-open with every probe slot taken.
	Paused bool `json:"paused"`
	// Rate is the current drain rate limit, in messages per second.
	Rate float64 `json:"rate"`
	// DrainedPerSec is the measured drain rate, in messages per second,
	// over the last few seconds.
	DrainedPerSec float64 `json:"drained_per_s"`
	// Drained counts messages drained since [NewDrainer].
	Drained uint64 `json:"drained"`
	// DeadLettered counts the queue's dead letters since [New] (diversions
	// and drains alike).
	DeadLettered uint64 `json:"dead_lettered"`
	// ETA is the estimated time to an empty backlog at DrainedPerSec: 0
	// with an empty backlog, -1 when unknown (nothing drained recently).
	ETA time.Duration `json:"eta_ns"`
	// HeldKeys is [Queue.HeldKeys]: the ordering index's counters in use,
	// about the number of ordering keys with messages in the backlog
	// (per-key ordering only).
	HeldKeys int `json:"held_keys"`
}

// Drainer moves the retry backlog back through the breaker-guarded handler,
// only as fast as the breaker admits and the drain rate allows, seeking the
// partner's spare capacity.
//
// Each round it asks the [Gate] for a budget (waiting PollInterval, or until
// [Drainer.Wake], while it is 0: the drain pauses at once when the breaker
// leaves closed), takes tokens from a token bucket at the drain rate, and
// fetches that many messages from its durable pull consumer without
// waiting (a no-wait pull request): up to four budgets at first, then
// from one to sixteen, as many as the gate starts within half of the time
// a message may wait for room at the calls' latency (see below), less its
// messages the gate does not count yet, so the next batch is on hand while
// the current one runs. In FIFO mode, when a batch comes back full, it sends
// the next request before it hands the batch to the workers, so the
// server answers it meanwhile (one request at a time; a [PartnerDrainer]
// partner's turn reads it before it ends, and sends none ahead while
// another partner waits for a lane). It runs the handler on the eligible
// ones concurrently, at most [DrainerConfig.MaxInFlight] fetched and
// unsettled at once, each call starting only when the gate has room for
// it, so a bulkhead's or the probe slots' budget is never exceeded by its
// own calls. A message that
// gets no room within half of what AckWait leaves past HandlerTimeout, or
// while the gate admits nothing and none of its calls runs (the breaker
// opened), or after the breaker turned another away, goes back to the
// backlog (nakked with PollInterval's delay, no attempt, counted as
// Deferred): nothing sits fetched while the breaker is open, and AckWait
// never runs out on a message waiting here. It does not wait for the
// calls (nor their acks) before the next round; with per-key ordering
// it fetches at most the budget and does wait. A message
// whose [MetaNotBefore] is in the future is nakked with a delay until then,
// without running the handler or using a token. A message is acked (and
// the ack confirmed) only after the handler returned nil for it. Every
// drained message goes through the breaker-guarded handler, so live and
// drained messages together never exceed what the breaker admits.
//
// # Adaptive drain rate
//
// Unless [DrainerConfig.FixedRate], the drain rate follows AIMD, the
// control the breaker's adaptive recovery uses: every AdjustInterval it
// looks at the deliveries since its last look. If any failed (a retryable
// error: the message was diverted again with [ReasonFailure]) or was slower
// than [DrainerConfig.SlowCall], the rate backs off: to 90 % of the
// goodput the drain achieved in that interval (what the partner did take),
// but at least to rate × Decrease (so a collapse halves it, not zeroes
// it), never up. If all
// were clean and the drainer used at least 80 % of its rate (so the rate,
// not the backlog or the gate, was the limit), the rate grows: by half per
// AdjustInterval until the first failure (slow start, again after every pause,
// since the partner's capacity is unknown after an outage; a pause also
// lifts the rate back to at least the configured Rate), then by Increase.
// In slow start the control also looks early, as soon as the interval has
// seen 8 outcomes and lasted 100ms, AdjustInterval/5 or twice the slowest
// of those calls, whichever is longest, and a clean early look doubles the
// rate (as TCP's slow start doubles its window per round trip): a fast
// partner's rate grows at the pace of its answers (from the default 50/s
// past 10,000/s in about a second), while a partner that answers slowly,
// or that the rate reaches fewer than 8 times per early look, grows by
// half per AdjustInterval. Slow start does not wait for a look to stop:
// its first failed or slow call ends it at once, and the rate falls back
// to at most the one before its last increase, the last known clean (as
// TCP halves its window on a loss), so an overshoot lasts only as long as
// the calls already in flight.
// It stays within [MinRate, MaxRate]. The drainer sees its own deliveries' outcomes
// (the queue reports re-diversions back to it through the message's
// context); live traffic shares the partner, so feed live outcomes to
// [Drainer.Observe] for the control to back off when live calls fail too.
//
// # Per-key ordering
//
// With [Config.OrderingKey] set on the queue, the drainer delivers the
// messages of one key one at a time in stream order (different keys and
// unkeyed messages still run concurrently). When a key's message waits out
// its [MetaNotBefore], or is diverted again, the key is held: its later
// messages are nakked with a delay (Deferred) until that message is
// delivered or dead-lettered. The hold is kept in memory; after a restart
// the stream order alone applies.
//
// Its methods are safe for concurrent use; Run runs once at a time.
type Drainer struct {
	cfg       DrainerConfig
	lim       *rate.Limiter
	burstAuto bool
	wide      bool // the bucket holds a second of the rate (guarded by mu; see widen)
	wake      chan struct{}
	slots     chan struct{}  // one per message in a handler (FIFO mode)
	handlers  sync.WaitGroup // FIFO-mode handlers in flight
	work      chan item      // the worker pool's queue (see dispatch; Run's goroutine only)
	workers   int            // the worker pool's workers (Run's goroutine only)
	// puller pulls from the consumer through one inbox for the whole Run
	// (Run's goroutine only; closed when Run returns), msgs is its batch;
	// finishing: finishAhead is receiving what was sent ahead.
	puller    *pull.Puller
	msgs      []jetstream.Msg
	finishing bool
	running   atomic.Bool
	paused    atomic.Bool
	turned    atomic.Bool // the breaker turned a drained message away
	pausedAt  time.Time   // when the gate last closed (guarded by mu)

	// inflight holds the UUIDs being drained, so Observe skips them.
	inflight uuidSet

	mu      sync.Mutex // guards ctl, iv, samples
	ctl     aimd
	iv      interval
	ivStart time.Time
	samples []sample

	order keyOrder // per-key ordering state

	// rt is the route drained (not AllPartners): the Queue's own, or a
	// [PartnerDrainer]'s partner.
	rt route
	// filter is rt's subject and filterRoute what routeFromSubject reads
	// from it (not AllPartners; set with rt by setRoute): owns need not
	// parse the subject of every message.
	filter      string
	filterRoute route
	// Set by a [PartnerDrainer] only: the shared in-flight bound, and the
	// check made when a fetch found nothing, which ends Run when it
	// reports true.
	share *fairShare
	idle  func(context.Context) bool
	// Set by a [PartnerDrainer] only: the lanes its partners take turns
	// on (see runTurns), and the end of a turn, which deletes the
	// consumer unless messages of it wait out a delay (deleted) and
	// reports the backlog empty (idle).
	lanes  *lanes
	retire func(context.Context, turnEnd) (idle, deleted bool)
	// keptClean: the consumer was kept at the end of the last turn, clean
	// (nothing of it awaiting an ack; runTurns only).
	keptClean bool
	// left is the consumer's pending count after the last message of the
	// turn's last fetch (runTurns only; math.MaxUint64 before one).
	left uint64
	// sliceEnd is when the current turn's slice ends (runTurns only; see
	// turnSlice).
	sliceEnd time.Time
	// Set by a [PartnerDrainer] only, for its partners: park waits, between
	// turns and holding no consumer, while the service consumer drains
	// (see serviceconsumer.go), and parking reports that it wants the
	// partners' turns to end.
	park    func(context.Context)
	parking func() bool
	// holding: between turns, the partner holds a consumer it did not
	// keep clean (messages of it await an ack), so it cannot park.
	holding atomic.Bool
	// Set by a [PartnerDrainer] only, for its service consumer: svc marks
	// that drainer (its consumer lives in server memory and is removed
	// after an idle spell, and Run ends when it is gone), and outcome hears
	// each handled message's route, what became of its call and how long
	// it took.
	svc     bool
	outcome func(r route, v verdict, latency time.Duration)
	// partnerRate reports whether r's partner's own drain rate has a
	// token for one more message now (the service consumer's only): one
	// without goes back to the backlog for a poll interval.
	partnerRate func(r route) bool

	// calling counts the messages dispatched to the worker pool whose
	// handler call has not returned yet (FIFO mode); waiting counts those
	// of them waiting for the gate to have room (see admitCall), and
	// unadmitted those whose call started and that the gate's budget does
	// not count yet: neither returned nor [Admitted].
	calling, waiting, unadmitted atomic.Int32
	// admitted wakes the message waiting in admitCall when a call
	// returns or the drainer is woken; admitTurn is held by the one
	// waiting message that looks at the gate.
	admitted  signal
	admitTurn chan struct{}
	// pace is the recent latency of the drainer's calls, in nanoseconds
	// (0 until one returned): see fetchBound.
	pace atomic.Int64

	fetched, drained, redelivered, deferred, dead, ackErrors, gateClosed, failures, backoffs atomic.Uint64

	// paced counts the messages sent back for their partner's own rate
	// (the service consumer's).
	paced atomic.Uint64
}

// verdict is what became of a call the service consumer handed over (see
// Drainer.outcome).
type verdict int

const (
	took    verdict = iota // delivered (however long it took)
	failed                 // the call failed: diverted for it, or dead-lettered after its last attempt, or the handler's error
	refused                // never reached the partner: the breaker, its bulkhead, a diversion for another reason
)

// interval counts outcomes since the control's last look; drainedBad are
// the drainer's own among bad; slowest is the longest latency among them.
type interval struct {
	ok, bad, drainedBad int
	slowest             time.Duration
}

// Early looks in slow start (see [Drainer]): the interval must have seen
// earlyLookOutcomes outcomes and lasted earlyLookMin (or AdjustInterval/5,
// or twice its slowest call, if longer).
const (
	earlyLookOutcomes = 8
	earlyLookMin      = 100 * time.Millisecond
)

// lookAfterLocked returns how long the current interval must last before
// the control looks, and whether that is an early look: AdjustInterval;
// in slow start, once the interval has seen earlyLookOutcomes outcomes,
// earlyLookMin, AdjustInterval/5 or twice its slowest call, whichever is
// longest, if that is shorter. So a fast partner's rate grows at the pace
// of its answers, while a slow or little-used one's grows per
// AdjustInterval. Requires d.mu held.
func (d *Drainer) lookAfterLocked() (time.Duration, bool) {
	look := d.cfg.AdjustInterval
	if d.ctl.slowStart && !d.cfg.FixedRate && d.iv.ok+d.iv.bad >= earlyLookOutcomes {
		if early := max(earlyLookMin, d.cfg.AdjustInterval/5, 2*d.iv.slowest); early < look {
			return early, true
		}
	}
	return look, false
}

// sample is the drained count at a time, for the measured rate.
type sample struct {
	at      time.Time
	drained uint64
}

// NewDrainer returns a [Drainer]. It returns an error wrapping "invalid
// config" and [ErrInvalidConfig] naming the field and its allowed range.
func NewDrainer(cfg DrainerConfig) (*Drainer, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("invalid config: %w", err)
	}
	d := &Drainer{
		cfg:       cfg,
		burstAuto: cfg.Burst == 0,
		wake:      make(chan struct{}, 1),
		slots:     make(chan struct{}, cfg.MaxInFlight),
		admitTurn: make(chan struct{}, 1),
		order:     keyOrder{holds: map[string]hold{}, pending: map[string]map[uint64]time.Time{}},
		ctl: aimd{
			rate: cfg.Rate, min: cfg.MinRate, max: cfg.MaxRate,
			inc: cfg.Increase, dec: cfg.Decrease, slowStart: true,
			autoInc: cfg.Increase == 0,
		},
	}
	if d.ctl.autoInc {
		d.ctl.inc = max(1, autoIncShare*cfg.Rate)
	}
	d.setRoute(cfg.Queue.routeOf(cfg.Queue.cfg.Partner))
	d.lim = rate.NewLimiter(rate.Limit(cfg.Rate), d.burstFor(cfg.Rate))
	return d, nil
}

// burstFor returns the token bucket's size at rate r. Requires d.mu held
// (or d not yet shared).
func (d *Drainer) burstFor(r float64) int {
	if !d.burstAuto {
		return d.cfg.Burst
	}
	if d.wide {
		return max(1, int(math.Ceil(r)))
	}
	return max(1, int(math.Ceil(r/10)))
}

// widen sets the token bucket to one second of the rate while other
// partners of a [PartnerDrainer] wait for a lane (wide), else to a tenth
// of a second: a partner that drains between others' turns may fetch in
// one turn what its rate allowed while it waited, so the turns, not its
// rate, do not bound it (and a turn's consumer is not made for a message
// or two). Only with an automatic Burst.
func (d *Drainer) widen(wide bool) {
	if !d.burstAuto {
		return
	}
	d.mu.Lock()
	if d.wide != wide {
		d.wide = wide
		d.applyLocked()
	}
	d.mu.Unlock()
}

// ConsumerConfig returns the durable consumer the drainer creates on its
// stream, or requires of an existing one ([jsq.CheckConsumer]): explicit
// ack, deliver all, AckWait, MaxDeliver unlimited (giving up is the
// queue's decision: MaxAttempts, MaxAge), MaxAckPending
// unlimited (messages waiting out their not-before are ack-pending on the
// server and must not stall the drain).
func (d *Drainer) ConsumerConfig() jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Name:          d.cfg.Consumer,
		Durable:       d.cfg.Consumer,
		AckPolicy:     jetstream.AckExplicitPolicy,
		DeliverPolicy: jetstream.DeliverAllPolicy,
		AckWait:       d.cfg.AckWait,
		MaxDeliver:    -1,
		MaxAckPending: -1,
		FilterSubject: d.FilterSubject(),
		// A partner's consumer lives for a turn: its state in the server's
		// memory (no file written per ack). The work-queue stream keeps
		// every unacked message, so a consumer lost with a server restart
		// loses nothing; the drainer creates it again.
		MemoryStorage: d.lanes != nil || d.svc,
		// A service consumer outlives a crashed replica by this much at
		// most: until then its filter holds every partner of the service.
		InactiveThreshold: d.inactiveThreshold(),
	}
}

// inactiveThreshold is the service consumer's InactiveThreshold: twice
// AckWait, at least svcInactive; 0 (none) for any other drainer.
func (d *Drainer) inactiveThreshold() time.Duration {
	if !d.svc {
		return 0
	}
	return max(svcInactive, 2*d.cfg.AckWait)
}

// FilterSubject returns the consumer's filter subject: the Queue's route
// subject under Stream, or every partner of its service with
// [DrainerConfig.AllPartners].
func (d *Drainer) FilterSubject() string {
	if d.cfg.AllPartners {
		return d.cfg.Stream + "." + d.cfg.Queue.service + ".>"
	}
	return d.rt.subject(d.cfg.Stream)
}

// setRoute sets the route drained, before Run.
func (d *Drainer) setRoute(r route) {
	d.rt = r
	if !d.cfg.AllPartners {
		f := d.FilterSubject()
		if r, ok := routeFromSubject(d.cfg.Stream, f); ok {
			d.filter, d.filterRoute = f, r
		}
	}
}

// owns returns the route of subject if the drainer drains it.
func (d *Drainer) owns(subject string) (route, bool) {
	if subject == d.filter && d.filter != "" {
		return d.filterRoute, true
	}
	r, ok := routeFromSubject(d.cfg.Stream, subject)
	if !ok || r.service != d.cfg.Queue.service {
		return route{}, false
	}
	if !d.cfg.AllPartners && r.partnerToken != d.rt.partnerToken {
		return route{}, false
	}
	return r, true
}

// JetStream API error codes of a work-queue stream refusing an overlapping
// consumer (nats-server JSConsumerWQMultipleUnfilteredErr,
// JSConsumerWQConsumerNotUniqueErr).
const (
	errCodeWQMultipleUnfiltered jetstream.ErrorCode = 10099
	errCodeWQNotUnique          jetstream.ErrorCode = 10100
)

// openConsumer creates the durable consumer if it is missing and binds an
// existing one through [jsq.EnsureConsumer], which never updates it. It
// returns an error wrapping
// [ErrRouteConflict] when the consumer belongs to another route or the
// stream refuses it for an overlapping filter: a configuration error,
// which Run returns rather than retrying.
func (d *Drainer) openConsumer(ctx context.Context) (jetstream.Consumer, error) {
	want := d.ConsumerConfig()
	if d.lanes != nil {
		// A partner's turn creates its consumer: one request when it is
		// missing or the same (another replica's); anything else takes the
		// checks below.
		if c, err := d.cfg.JetStream.CreateConsumer(ctx, d.cfg.Stream, want); err == nil {
			return c, nil
		}
	}
	if c, err := d.cfg.JetStream.Consumer(ctx, d.cfg.Stream, d.cfg.Consumer); err == nil {
		got := c.CachedInfo().Config
		if got.FilterSubject != want.FilterSubject || len(got.FilterSubjects) > 0 {
			return nil, fmt.Errorf("%w: consumer %q on stream %q filters %q, not this drainer's route %q: set DrainerConfig.Consumer, or the Queue's Config.Service, apart from the other route's (a consumer of the previous release: run retryqueue.Migrate)",
				ErrRouteConflict, d.cfg.Consumer, d.cfg.Stream, append([]string{got.FilterSubject}, got.FilterSubjects...), want.FilterSubject)
		}
	}
	c, err := jsq.EnsureConsumer(ctx, d.cfg.JetStream, d.cfg.Stream, want)
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && (apiErr.ErrorCode == errCodeWQMultipleUnfiltered || apiErr.ErrorCode == errCodeWQNotUnique) {
		return nil, fmt.Errorf("%w: stream %q refuses consumer %q filtering %q: another consumer's filter overlaps it (DrainerConfig.AllPartners beside a per-partner drainer of the same service, or an unfiltered consumer of the previous release: run retryqueue.Migrate): %w",
			ErrRouteConflict, d.cfg.Stream, d.cfg.Consumer, want.FilterSubject, err)
	}
	return c, err
}

// Stream returns the retry stream name.
func (d *Drainer) Stream() string { return d.cfg.Stream }

// Consumer returns the durable consumer name.
func (d *Drainer) Consumer() string { return d.cfg.Consumer }

// Wake makes a waiting drainer look at the gate again now; call it from a
// breaker state listener. It never blocks.
func (d *Drainer) Wake() {
	d.admitted.broadcast()
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// SetRate changes the drain rate to r messages per second (r > 0 and
// finite; other values are ignored), clamped to [MinRate, MaxRate]. The
// adaptive control, unless off, goes on from there.
func (d *Drainer) SetRate(r float64) {
	if !(r > 0) || math.IsInf(r, 0) {
		return
	}
	d.mu.Lock()
	d.ctl.rate = d.ctl.clamp(r)
	d.applyLocked()
	d.mu.Unlock()
}

// applyLocked sets the limiter to the control's rate. Requires d.mu held.
func (d *Drainer) applyLocked() {
	now := time.Now()
	d.lim.SetLimitAt(now, rate.Limit(d.ctl.rate))
	d.lim.SetBurstAt(now, d.burstFor(d.ctl.rate))
}

// Rate returns the current drain rate limit in messages per second.
func (d *Drainer) Rate() float64 { return float64(d.lim.Limit()) }

// Observe reports the outcome of one live delivery to the partner (failed:
// a retryable error; latency: how long it took) to the adaptive control,
// which backs off when the partner struggles whoever's call it was. A
// message the drainer is delivering right now (by uuid) is ignored: the
// drainer counts its own. Call it from the middleware's event hook for
// admitted calls. It never blocks on I/O and is safe for concurrent use.
func (d *Drainer) Observe(uuid string, failed bool, latency time.Duration) {
	if d.inflight.has(uuid) {
		return
	}
	d.observe(failed, latency, false)
}

// observe counts one outcome for the control; drained marks the drainer's
// own deliveries.
func (d *Drainer) observe(failed bool, latency time.Duration, drained bool) {
	bad := failed || (d.cfg.SlowCall > 0 && latency >= d.cfg.SlowCall)
	if bad {
		d.failures.Add(1)
	}
	d.mu.Lock()
	d.iv.slowest = max(d.iv.slowest, latency)
	switch {
	case bad && drained:
		d.iv.bad++
		d.iv.drainedBad++
	case bad:
		d.iv.bad++
	default:
		d.iv.ok++
	}
	// Slow start doubles the rate per early look, so it must not wait for
	// a look to stop: the first failure ends it now (and backs off), and
	// the overshoot stays within the calls already in flight.
	stop := bad && d.ctl.slowStart
	d.mu.Unlock()
	if stop {
		d.tickAt(time.Now(), true)
	}
}

// Stats returns the counters.
func (d *Drainer) Stats() DrainStats {
	return DrainStats{
		Fetched:      d.fetched.Load(),
		Drained:      d.drained.Load(),
		Redelivered:  d.redelivered.Load(),
		Deferred:     d.deferred.Load(),
		DeadLettered: d.dead.Load(),
		AckErrors:    d.ackErrors.Load(),
		GateClosed:   d.gateClosed.Load(),
		Failures:     d.failures.Load(),
		Backoffs:     d.backoffs.Load(),
	}
}

// Backlog returns the retry backlog: messages on the drainer's consumer not
// yet delivered plus delivered and not yet acked (see [Depth]). It fails if
// the consumer does not exist yet (before the first Run).
func (d *Drainer) Backlog(ctx context.Context) (uint64, error) {
	return Depth(ctx, d.cfg.JetStream, d.cfg.Stream, d.cfg.Consumer)
}

// Status returns the backlog, the drain rate limit and the measured drain
// rate, the dead letters and the estimated time to an empty backlog. It
// asks the server for the backlog (one round trip) and fails as
// [Drainer.Backlog] does.
func (d *Drainer) Status(ctx context.Context) (DrainStatus, error) {
	n, err := d.Backlog(ctx)
	if err != nil {
		return DrainStatus{}, err
	}
	s := DrainStatus{
		Backlog:       n,
		Paused:        d.paused.Load(),
		Rate:          d.Rate(),
		DrainedPerSec: d.measured(time.Now()),
		Drained:       d.drained.Load(),
		DeadLettered:  d.cfg.Queue.Stats().DeadLettered,
		HeldKeys:      d.cfg.Queue.HeldKeys(),
	}
	switch {
	case n == 0:
	case s.DrainedPerSec > 0:
		s.ETA = time.Duration(float64(n) / s.DrainedPerSec * float64(time.Second))
	default:
		s.ETA = -1
	}
	return s, nil
}

// measuredWindow is how far back the measured drain rate looks.
const measuredWindow = 5 * time.Second

// measured returns the drained messages per second over the last
// measuredWindow, counting up to now.
func (d *Drainer) measured(now time.Time) float64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.samples) == 0 {
		return 0
	}
	first := d.samples[0]
	span := now.Sub(first.at)
	if span < 100*time.Millisecond {
		return 0
	}
	return float64(d.drained.Load()-first.drained) / span.Seconds()
}

// tick records a rate sample and runs the adaptive control once per
// AdjustInterval. Run calls it after every round.
func (d *Drainer) tick(now time.Time) { d.tickAt(now, false) }

// tickAt is tick; failed looks now, whatever the interval's length, because
// a failure ended slow start (see observe).
func (d *Drainer) tickAt(now time.Time, failed bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.ivStart.IsZero() {
		d.ivStart = now
		d.samples = append(d.samples, sample{now, d.drained.Load()})
		return
	}
	elapsed := now.Sub(d.ivStart)
	look, early := d.lookAfterLocked()
	if failed && d.ctl.slowStart && d.iv.bad > 0 {
		look, early = 0, false
	}
	if elapsed < look {
		return
	}
	drained := d.drained.Load()
	served := drained - d.samples[len(d.samples)-1].drained
	d.samples = append(d.samples, sample{now, drained})
	for len(d.samples) > 2 && now.Sub(d.samples[1].at) >= measuredWindow {
		d.samples = d.samples[1:]
	}
	iv := d.iv
	d.iv, d.ivStart = interval{}, now
	if d.cfg.FixedRate || d.paused.Load() {
		return
	}
	before := d.ctl.rate
	good := max(0, float64(served)-float64(iv.drainedBad))
	switch d.ctl.step(iv.ok, iv.bad, float64(served), good, elapsed, early) {
	case decreased:
		d.backoffs.Add(1)
	case unchanged:
		return
	}
	if d.ctl.rate != before {
		d.applyLocked()
	}
}

// Run creates the durable consumer if it is missing (retrying while the
// server is unreachable or the stream missing) and drains until ctx is done.
// It never updates an existing consumer. It logs and returns, once the
// handlers in flight are done, an error wrapping [ErrRouteConflict] when the
// consumer belongs to another route or overlaps another consumer's filter,
// and a [*jsq.ConfigMismatchError] when it differs from
// [Drainer.ConsumerConfig] in a field jsq compares (left unchanged). With
// per-key ordering it first rebuilds the queue's key index from the retry
// stream. It then waits for the handlers in flight (bounded by
// HandlerTimeout) and their acks, and returns nil. It returns [ErrRunning]
// if already running.
func (d *Drainer) Run(ctx context.Context) error {
	if !d.running.CompareAndSwap(false, true) {
		return ErrRunning
	}
	defer d.running.Store(false)
	defer d.closePuller()
	if d.lanes != nil {
		return d.runTurns(ctx)
	}
	var cons jetstream.Consumer
	indexed := !d.cfg.Queue.Ordered()
	for ctx.Err() == nil {
		if cons == nil {
			c, err := d.openConsumer(ctx)
			if errors.Is(err, jsq.ErrConfigMismatch) || errors.Is(err, ErrRouteConflict) {
				d.cfg.Logger.Error("retryqueue: drain consumer refused", err, watermill.LogFields{"stream": d.cfg.Stream, "consumer": d.cfg.Consumer})
				d.waitHandlers()
				return err
			}
			if err != nil {
				if ctx.Err() == nil {
					d.cfg.Logger.Error("retryqueue: create drain consumer", err, watermill.LogFields{"stream": d.cfg.Stream, "consumer": d.cfg.Consumer})
				}
				d.sleep(ctx, d.cfg.PollInterval)
				continue
			}
			cons = c
		}
		if !indexed {
			if err := d.rebuildKeys(ctx); err != nil {
				if ctx.Err() == nil {
					d.cfg.Logger.Error("retryqueue: rebuild ordering index", err, watermill.LogFields{"stream": d.cfg.Stream})
				}
				d.sleep(ctx, d.cfg.PollInterval)
				continue
			}
			indexed = true
		}
		if err := d.round(ctx); err != nil {
			if errors.Is(err, errDrainIdle) {
				break
			}
			if consumerGone(err) {
				if d.svc {
					// Another replica left the service consumer: so
					// does this one.
					d.waitHandlers()
					return err
				}
				// Deleted under it (another replica's [PartnerDrainer]
				// found the route empty): create it again. Work-queue
				// retention kept every unacked message, and a new
				// deliver-all consumer gets them again.
				cons = nil
			}
			if ctx.Err() == nil {
				d.cfg.Logger.Error("retryqueue: fetch", err, watermill.LogFields{"stream": d.cfg.Stream, "consumer": d.cfg.Consumer})
			}
			d.sleep(ctx, d.cfg.PollInterval)
		}
		d.tick(time.Now())
	}
	d.waitHandlers()
	return nil
}

// drained is the context key marking a drained message's context.
type drainedKey struct{}

// FromDrain reports whether ctx is the context of a message the drainer
// handed to its handler (as opposed to live traffic). The drainer hands
// over only messages whose metadata it found well formed
// ([Queue.Malformed]), so the handler need not check them again.
func FromDrain(ctx context.Context) bool {
	if ctx == nil {
		return false
	}
	v, _ := ctx.Value(drainedKey{}).(bool)
	return v
}

// closePuller ends the pull subscription, if any; it naks what reached
// it unread (nothing, as every request is a no-wait one that round reads
// to its end, unless ctx ended one or the drain ended with a request sent
// ahead unread), and gives back the shared in-flight slots such a request
// held.
func (d *Drainer) closePuller() {
	if d.puller != nil {
		d.releaseShare(d.puller.Asked())
		d.puller.Close()
		d.puller = nil
	}
}

// item is one fetched message.
type item struct {
	jm  jetstream.Msg
	wm  *message.Message
	key string // ordering key, "" for none
	seq uint64 // stream sequence (keyed messages only)
	n   uint64 // deliveries so far, this one included (keyed messages only)
	// counted: the message is in Drainer.calling until its handler call
	// returns (FIFO mode).
	counted bool
}

// round does one gate-budget-fetch-handle round. It sleeps itself when there
// is nothing to do and returns only fetch errors.
func (d *Drainer) round(ctx context.Context) error {
	if d.puller != nil && d.puller.Asked() > 0 {
		return d.receive(ctx) // a request sent ahead (FIFO): its answer first
	}
	// The drainer's calls not counted by the gate yet are read before the
	// budget: a call admitted in between is then counted twice (a smaller
	// fetch), never missed.
	ahead := int(d.waiting.Load() + d.unadmitted.Load())
	budget := d.cfg.Gate.Budget()
	calls := int(d.calling.Load())
	if budget <= 0 && calls > 0 {
		// The drainer's own calls may hold the whole budget (a partner's
		// bulkhead, the probe slots): wait for one to return (it wakes the
		// round) before taking the gate for closed.
		return d.restSlots(ctx, d.cfg.PollInterval)
	}
	if budget <= 0 {
		if d.gatePaused(ctx) {
			return errDrainIdle // woken for a paused partner with no backlog
		}
		return d.rest(ctx, d.cfg.PollInterval)
	}
	d.unpause()
	if d.turned.Swap(false) {
		// The gate admitted more than the breaker did (another replica
		// holds the fleet's probe slots, or the state moved): look again
		// after a poll interval rather than at the drain rate.
		return d.rest(ctx, d.cfg.PollInterval)
	}
	tokens := d.lim.Tokens()
	if tokens < 1 {
		wait := time.Duration((1 - tokens) / float64(d.lim.Limit()) * float64(time.Second))
		return d.rest(ctx, max(wait, time.Millisecond))
	}
	free := cap(d.slots) - len(d.slots)
	if free <= 0 {
		return d.restSlots(ctx, d.cfg.PollInterval) // a finishing handler wakes it
	}
	n := min(d.fetchBound(budget, ahead), d.lim.Burst(), int(tokens))
	if n <= 0 {
		return d.restSlots(ctx, d.cfg.PollInterval) // a returning call wakes it
	}
	if free < n && free < max(1, cap(d.slots)/4) {
		// Handlers hold most slots: wait for a quarter of them to free up
		// (a finishing handler wakes it), so that a fetch, one round trip
		// to the server, brings a batch rather than a message or two.
		return d.restSlots(ctx, d.cfg.PollInterval)
	}
	n = min(n, free)
	if d.share != nil {
		// The shared in-flight bound: wait for a fair share of it, then
		// look at the gate again (it may have closed meanwhile).
		got, err := d.share.acquire(ctx, d, n)
		if err != nil {
			return nil // ctx done
		}
		if n = min(got, d.fetchBound(d.cfg.Gate.Budget(), ahead)); n < got { // ahead only fell since it was read
			d.share.release(d, got-n)
		}
		if n <= 0 {
			return nil
		}
	}
	gen := d.cfg.Queue.keysGeneration()
	if d.puller == nil {
		p, err := pull.New(d.cfg.JetStream, d.cfg.Stream, d.cfg.Consumer, cap(d.slots), nil)
		if err != nil {
			d.releaseShare(n)
			return err
		}
		d.puller = p
	}
	if !d.cfg.Queue.Ordered() {
		if err := d.puller.Send(n, 0); err != nil {
			d.releaseShare(n)
			return err
		}
		return d.receive(ctx)
	}
	sent := time.Now()
	msgs := d.msgs[:0]
	_, ferr := d.puller.Fetch(ctx, n, 0, func(m jetstream.Msg) { msgs = append(msgs, m) })
	d.msgs = msgs
	// Slots for messages the fetch did not bring back go back at once;
	// each fetched one's goes back once it is settled.
	d.releaseShare(n - len(msgs))
	if ferr != nil && len(msgs) == 0 {
		if ctx.Err() != nil {
			return nil
		}
		return ferr
	}
	if len(msgs) < n && ferr == nil && time.Since(sent) < time.Second {
		// The server had nothing more to deliver (a no-wait request is
		// taken as lost, silently, after a second without its answer).
		d.order.caughtUp(sent)
	}
	return d.take(ctx, msgs, gen)
}

// unpause ends a pause of the gate, if any: the rate control starts again
// from slow start, as after an outage.
func (d *Drainer) unpause() {
	if !d.paused.Swap(false) {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	// The ordering holds and pending entries did not age while nothing
	// was fetched (the breaker open): an outage longer than their
	// expiry must not let a key's later messages pass its head.
	if !d.pausedAt.IsZero() {
		d.order.extend(time.Since(d.pausedAt))
	}
	d.iv, d.ivStart = interval{}, time.Now() // outcomes while paused say nothing about the rate
	d.pace.Store(0)                          // nor the calls' latency before: four budgets again
	if !d.cfg.FixedRate {
		d.ctl.resume(d.cfg.Rate)
		d.applyLocked()
	}
}

// receive reads the answer of the pull request sent and not yet received
// (FIFO mode), sends the next request before it hands the batch to the
// workers when the batch came back full (see sendAhead), and hands it
// over.
func (d *Drainer) receive(ctx context.Context) error {
	gen := d.cfg.Queue.keysGeneration()
	before := d.puller.Asked()
	msgs := d.msgs[:0]
	_, ferr := d.puller.Receive(ctx, func(m jetstream.Msg) { msgs = append(msgs, m) })
	d.msgs = msgs
	asked := before - d.puller.Asked() // the request received
	// Slots for messages the request did not bring back go back at once;
	// each fetched one's goes back once it is settled.
	d.releaseShare(asked - len(msgs))
	if ferr != nil && len(msgs) == 0 {
		if ctx.Err() != nil {
			return nil
		}
		return ferr
	}
	if ferr == nil && len(msgs) == asked && !d.finishing {
		d.sendAhead(len(msgs))
	}
	return d.take(ctx, msgs, gen)
}

// sendAhead sends the next pull request while the batch just received
// (received messages, not yet handed to the workers) is handled, so the
// server has it at hand when that batch is done: a fetch's round trip no
// longer idles the drain. It sends nothing while another partner waits
// for a lane (the turn may end), after the breaker turned a message away,
// while the gate admits nothing, or for less than half a budget; it counts
// what was received and asked for ahead against the same bounds as a
// round (fetchBound, the free in-flight slots, the rate's tokens, the
// shared bound, without waiting for it).
func (d *Drainer) sendAhead(received int) {
	if d.yielding() || d.turned.Load() {
		return
	}
	asked := received + d.puller.Asked()
	ahead := int(d.waiting.Load()+d.unadmitted.Load()) + asked
	budget := d.cfg.Gate.Budget()
	if budget <= 0 {
		return
	}
	tokens := d.lim.Tokens() - float64(asked)
	free := cap(d.slots) - len(d.slots) - asked
	n := min(d.fetchBound(budget, ahead), d.lim.Burst(), int(tokens), free)
	if n < max(1, min(budget, cap(d.slots))/2) {
		return
	}
	if d.share != nil {
		if n = d.share.tryAcquire(d, n); n <= 0 {
			return
		}
	}
	if d.puller.Send(n, 0) != nil {
		d.releaseShare(n) // the next round's request meets the error
	}
}

// finishAhead receives the request sent ahead, if any, and hands its
// messages to the workers, sending no more: a turn ends with nothing in
// flight on the server.
func (d *Drainer) finishAhead(ctx context.Context) {
	d.finishing = true
	defer func() { d.finishing = false }()
	for d.puller != nil && d.puller.Asked() > 0 && ctx.Err() == nil {
		if d.receive(ctx) != nil {
			return
		}
	}
}

// take hands the messages of one fetch to the handlers: a FIFO batch to
// the worker pool, a per-key ordered one by key, waiting for it. With no
// message it rests, or ends the drain when its partner's backlog is
// empty.
func (d *Drainer) take(ctx context.Context, msgs []jetstream.Msg, gen uint64) error {
	if len(msgs) == 0 {
		if d.finishing || d.puller != nil && d.puller.Asked() > 0 {
			return nil // the next request's answer is due now
		}
		d.clearKeysIfEmpty(ctx, gen)
		if d.idle != nil && d.handlersIdle() && d.idle(ctx) {
			return errDrainIdle
		}
		return d.rest(ctx, d.cfg.PollInterval)
	}
	d.fetched.Add(uint64(len(msgs)))
	if md, err := msgs[len(msgs)-1].Metadata(); err == nil {
		d.left = md.NumPending
	} else {
		d.left = math.MaxUint64
	}

	now := d.cfg.Queue.cfg.Clock.Now()
	if !d.cfg.Queue.Ordered() {
		d.takeFIFO(ctx, msgs, now)
		return nil
	}
	var groups [][]item // each group runs sequentially; groups concurrently
	byKey := map[string]int{}
	for _, jm := range msgs {
		it := item{jm: jm, wm: jsq.Unmarshal(jm), key: ""}
		it.key = d.cfg.Queue.key(it.wm)
		if it.key == "" {
			if nb, ok := NotBefore(it.wm); ok && nb.After(now) {
				d.deferMsg(it, nb.Sub(now))
				continue
			}
			groups = append(groups, []item{it})
			continue
		}
		if md, err := jm.Metadata(); err == nil {
			it.seq, it.n = md.Sequence.Stream, md.NumDelivered
		}
		if g, ok := byKey[it.key]; ok {
			groups[g] = append(groups[g], it)
			continue
		}
		byKey[it.key] = len(groups)
		groups = append(groups, []item{it})
	}
	for _, g := range groups {
		if g[0].key != "" {
			// Redeliveries can come out of stream order: a key's messages
			// go in stream order, after the one holding the key (a copy at
			// the back of the stream that must go first).
			head := d.order.head(g[0].key)
			slices.SortFunc(g, func(a, b item) int {
				switch {
				case a.wm.UUID == head && b.wm.UUID != head:
					return -1
				case b.wm.UUID == head && a.wm.UUID != head:
					return 1
				}
				return cmp.Compare(a.seq, b.seq)
			})
		}
	}
	grouped := 0
	for _, g := range groups {
		grouped += len(g)
	}
	d.releaseShare(len(msgs) - grouped) // deferred: settled already
	clear(msgs)                         // the batch's buffer keeps no message past its round
	if len(groups) == 0 {
		return nil // all deferred: no token used, fetch again at once
	}
	// Per-key ordering: a key's messages run one at a time, and the round
	// waits for all, so no later round overtakes a key's earlier message
	// or exceeds the budget.
	var wg sync.WaitGroup
	defer d.releaseShare(grouped)
	for _, g := range groups {
		wg.Go(func() {
			for i, it := range g {
				if it.key != "" {
					if delay, wait := d.order.admit(it, d.cfg.Queue.cfg.Clock.Now(), d.cfg.PollInterval); wait {
						// Held back: it and the key's later messages in
						// this batch wait, in order.
						for _, rest := range g[i:] {
							d.deferKeyed(rest, delay)
						}
						return
					}
				}
				d.lim.ReserveN(time.Now(), 1) // a deferred message uses no token
				d.handle(ctx, it)
			}
		})
	}
	wg.Wait()
	return nil
}

// takeFIFO hands a FIFO batch to the worker pool: each message runs on its
// own, and the next round does not wait for this one, so neither a slow
// partner call nor an ack's round trip idles the drain. MaxInFlight bounds
// the messages in handlers, and the next round's fetch is bounded by the
// gate's budget less the calls still running (see round), so a bounded
// budget (a partner's bulkhead, half-open probe slots) is never exceeded
// by the drainer's own calls. A message whose NotBefore is ahead goes back
// with that delay and uses no token.
func (d *Drainer) takeFIFO(ctx context.Context, msgs []jetstream.Msg, now time.Time) {
	deferred := 0
	for _, jm := range msgs {
		it := item{jm: jm, wm: jsq.Unmarshal(jm)}
		if nb, ok := NotBefore(it.wm); ok && nb.After(now) {
			d.deferMsg(it, nb.Sub(now))
			deferred++
			continue
		}
		d.slots <- struct{}{}
		d.dispatch(ctx, it)
	}
	d.releaseShare(deferred) // settled already
	d.spend(len(msgs) - deferred)
	clear(msgs) // the batch's buffer keeps no message past its round
}

// spend takes n tokens from the drain rate's limiter now, going into debt
// if it holds fewer: one reservation per burst rather than per message. A
// reservation larger than the burst is refused, and the adaptive control
// may lower the burst between reading it and reserving: then it reads the
// burst again.
func (d *Drainer) spend(n int) {
	now := time.Now()
	for n > 0 {
		k := min(n, max(1, d.lim.Burst()))
		if !d.lim.ReserveN(now, k).OK() && k > 1 {
			continue
		}
		n -= k
	}
}

// deferKeyed defers a keyed message and records it as pending for its key.
func (d *Drainer) deferKeyed(it item, delay time.Duration) {
	d.order.addPending(it.key, it.seq, time.Now().Add(delay+2*d.cfg.AckWait))
	d.deferMsg(it, delay)
}

// deferMsg naks it with delay without counting an attempt.
func (d *Drainer) deferMsg(it item, delay time.Duration) {
	if err := it.jm.NakWithDelay(delay); err != nil {
		d.ackErrors.Add(1)
		d.logAckError("nak (deferred)", err, it.wm)
	}
	d.deferred.Add(1)
}

// dispatch hands it, holding one of d.slots, to the worker pool (FIFO
// mode), which releases the slot once it is settled. The pool starts a
// worker whenever it has fewer workers than messages holding slots, so a
// message never waits for another's handler; its workers stay until
// waitHandlers, so a worker's stack, grown by the handler chain, is grown
// once rather than per message. Only the goroutine running Run calls it.
func (d *Drainer) dispatch(ctx context.Context, it item) {
	d.handlers.Add(1)
	d.calling.Add(1)
	d.waiting.Add(1)
	it.counted = true
	if d.work == nil {
		d.work = make(chan item, cap(d.slots))
	}
	d.work <- it // never blocks: a message in it holds a slot
	if d.workers < len(d.slots) {
		d.workers++
		work, base := d.work, context.WithoutCancel(ctx)
		go func() {
			for it := range work {
				turned := true
				if d.admitCall(ctx) {
					turned = d.handleIn(base, it)
				} else {
					d.handBack(it)
				}
				<-d.slots
				d.releaseShare(1)
				if !turned {
					// A turned-away message does not wake the round:
					// it waits a poll interval (see round).
					d.Wake()
				}
				d.handlers.Done()
			}
		}()
	}
}

// waitHandlers waits for the handlers in flight and their acks, then stops
// the worker pool. Only the goroutine running Run calls it.
func (d *Drainer) waitHandlers() {
	d.handlers.Wait()
	if d.work != nil {
		close(d.work)
		d.work, d.workers = nil, 0
	}
}

// drainCtx is a drained message's context: its handler's deadline
// (HandlerTimeout, a [lazyctx.Ctx]), drainedKey and the message's slot, in
// one allocation rather than the slot's and a context.WithTimeout's four.
type drainCtx struct {
	lazyctx.Ctx
	s slot
}

func (c *drainCtx) String() string { return "retryqueue.drainCtx" }

func (c *drainCtx) Value(key any) any {
	switch key.(type) {
	case drainedKey:
		return true
	case slotKey:
		return &c.s
	}
	return c.Ctx.Value(key)
}

// handle runs the handler on one message, acks or naks it, and feeds the
// outcome to the adaptive control and the ordering holds.
func (d *Drainer) handle(ctx context.Context, it item) {
	d.handleIn(context.WithoutCancel(ctx), it)
}

// handleIn is handle with base, a context that is never canceled. It
// reports whether the breaker turned the message away.
func (d *Drainer) handleIn(base context.Context, it item) (turned bool) {
	jm, wm := it.jm, it.wm
	// The consumer's filter subject keeps other routes' messages away; a
	// message whose route metadata disagrees with its subject (or a subject
	// outside the filter) is never delivered.
	r, owned := d.owns(jm.Subject())
	var why string
	if !owned {
		r = d.rt
		why = fmt.Sprintf("stored under subject %q, outside this drainer's %q", jm.Subject(), d.FilterSubject())
	} else if why = checkRoute(wm, r, d.cfg.Queue.cfg.Service); why == "" {
		r = withKey(wm, r)
	}
	if why == "" && d.partnerRate != nil && !d.partnerRate(r) {
		// Beyond its partner's own rate: back in a poll interval, as a
		// message the breaker turned away (no attempt). The service
		// consumer's queue has no ordering key (a PartnerDrainer refuses
		// one), so nothing of a key is held.
		d.returned(it, nil)
		d.deferMsg(it, d.cfg.PollInterval)
		d.paced.Add(1)
		return false
	}
	deadReason, cause := DeadReasonRoute, error(nil)
	if why != "" {
		cause = fmt.Errorf("%w: %s", ErrRouteMismatch, why)
	} else if mwhy, bad := d.cfg.Queue.Malformed(wm); bad {
		deadReason, cause = DeadReasonMalformed, fmt.Errorf("%w: %s", ErrMalformed, mwhy)
	}
	if cause != nil {
		d.returned(it, nil)
		_, err := d.cfg.Queue.deadLetter(base, wm, r, deadReason, cause)
		if d.settle(base, jm, wm, err) {
			d.dead.Add(1)
			d.cfg.Queue.Release(it.key)
			d.order.unhold(it.key, wm.UUID)
		}
		return
	}
	start := time.Now()
	hctx := &drainCtx{s: slot{uuid: wm.UUID, route: r}}
	s := &hctx.s
	if it.counted {
		s.unadmitted = &d.unadmitted
	}
	hctx.Init(base, start.Add(d.cfg.HandlerTimeout), false)
	wm.SetContext(hctx)
	d.inflight.add(wm.UUID)
	err := d.call(wm)
	latency := time.Since(start)
	hctx.End(start.Add(latency))
	d.inflight.remove(wm.UUID)
	what, reason := s.get()
	if err == nil && what == outcomeDeferred {
		// Turned away by the breaker (open, probe slots taken, ramp): not a
		// partner outcome and no attempt. It stays in the stream and comes
		// back after a poll interval. turned is set before the call
		// counts as returned, and neither wakes the round, so the round
		// waits a poll interval (or a Wake) rather than fetching again.
		d.turned.Store(true)
		if d.outcome != nil {
			d.outcome(r, refused, latency)
		}
		if it.counted {
			s.admit()
			d.calling.Add(-1)
			d.admitted.broadcast() // what waits for room goes back too
		}
		if it.key != "" {
			// A key's head keeps its hold while it is turned away: its
			// copy is at the back of the stream, behind nothing of its key.
			d.order.renew(it.key, wm.UUID, time.Now().Add(d.cfg.PollInterval+2*d.cfg.AckWait))
			d.deferKeyed(it, d.cfg.PollInterval)
		} else {
			d.deferMsg(it, d.cfg.PollInterval)
		}
		return true
	}
	d.returned(it, s)
	if err == nil {
		// Only a call that reached the partner tells its latency (not a
		// refusal of the bulkhead or the registry, nor a dead letter).
		switch {
		case what == outcomeNone:
			d.observe(false, latency, true)
			d.notePace(latency)
		case (what == outcomeDiverted || what == outcomeDead) && reason == ReasonFailure:
			d.observe(true, latency, true) // a dead letter after a failed last attempt too
			d.notePace(latency)
		}
	}
	if d.outcome != nil {
		switch {
		case err == nil && what == outcomeNone:
			d.outcome(r, took, latency)
		case err != nil || reason == ReasonFailure && (what == outcomeDiverted || what == outcomeDead):
			d.outcome(r, failed, latency) // a dead letter after a failed call's last attempt too
		case what != outcomeDead: // a dead letter is otherwise the message's own end
			d.outcome(r, refused, latency)
		}
	}
	if !d.settle(base, jm, wm, err) {
		if it.key != "" && err != nil { // nakked: it comes back after settle's delay
			back := time.Now().Add(d.nakDelay(jm) + 2*d.cfg.AckWait)
			d.order.addPending(it.key, it.seq, back)
			d.order.renew(it.key, wm.UUID, back) // a head keeps its key
		}
		return
	}
	d.drained.Add(1)
	d.cfg.Queue.Release(it.key)
	if it.key == "" {
		return
	}
	if what == outcomeDiverted {
		// The copy went to the back of the stream: hold the key until it
		// is delivered.
		nb, _ := NotBefore(wm)
		if reason != ReasonFailure && reason != ReasonNotAttempted {
			nb = time.Time{}
		}
		d.order.setHold(it.key, wm.UUID, nb, d.cfg.AckWait)
		return
	}
	d.order.unhold(it.key, wm.UUID)
	return false
}

// returned takes it, with its slot s (nil before the call was made), out
// of the calls counted in d.calling and, unless it was admitted already,
// d.unadmitted, once its handler call returned (or was not made), and
// wakes the round waiting for the gate's budget.
func (d *Drainer) returned(it item, s *slot) {
	if it.counted {
		if s != nil {
			s.admit()
		} else {
			d.unadmitted.Add(-1)
		}
		d.calling.Add(-1)
		d.Wake()
	}
}

// fetchBound is how many messages a round may fetch for a gate's budget
// while ahead of the drainer's messages are not counted by the gate yet
// (waiting for room, or called and not yet [Admitted]). With per-key
// ordering each batch is finished before the next, so a round fetches at
// most the budget. In FIFO mode a message starts its call only when the
// gate has room (admitCall), so a round fetches budgets ahead (a budget
// larger than MaxInFlight counts as MaxInFlight): firstBudgets until a
// call returned; then as many as the gate starts, a budget per call
// latency (pace), within half of admitWait, between one budget and
// prefetchBudgets. A fast partner's drain so fetches large batches,
// while a slow partner's messages do not wait fetched until admitWait
// hands them back.
func (d *Drainer) fetchBound(budget, ahead int) int {
	if d.cfg.Queue.Ordered() {
		return budget
	}
	b := min(budget, cap(d.slots))
	k := int64(firstBudgets)
	if pace := d.pace.Load(); pace > 0 {
		k = max(1, min(prefetchBudgets, int64(d.admitWait()/2)/pace))
	}
	return b*int(k) - ahead
}

// notePace folds a call's latency into d.pace, a moving average weighing
// the latest call 1/8. Concurrent calls may lose an update: it is an
// estimate.
func (d *Drainer) notePace(latency time.Duration) {
	old := d.pace.Load()
	if old == 0 {
		d.pace.Store(max(1, int64(latency)))
		return
	}
	d.pace.Store(max(1, old+(int64(latency)-old)/8))
}

// call runs the handler, turning a panic into an error.
func (d *Drainer) call(wm *message.Message) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("retryqueue: handler panic: %v", r)
		}
	}()
	_, err = d.cfg.Handler(wm)
	return err
}

// settle acks jm (confirmed) if err is nil, else naks it with NakDelay. It
// reports whether the ack was confirmed.
func (d *Drainer) settle(ctx context.Context, jm jetstream.Msg, wm *message.Message, err error) bool {
	if err == nil {
		if err := pull.DoubleAck(ctx, jm, d.cfg.Queue.cfg.PublishTimeout); err != nil {
			d.ackErrors.Add(1)
			d.logAckError("ack", err, wm)
			return false
		}
		return true
	}
	d.redelivered.Add(1)
	if nerr := jm.NakWithDelay(d.nakDelay(jm)); nerr != nil {
		d.ackErrors.Add(1)
		d.logAckError("nak", nerr, wm)
	}
	return false
}

// nakDelay is NakDelay for jm's delivery count (1 if unknown).
func (d *Drainer) nakDelay(jm jetstream.Msg) time.Duration {
	var delivered uint64 = 1
	if md, err := jm.Metadata(); err == nil {
		delivered = md.NumDelivered
	}
	return d.cfg.NakDelay(delivered)
}

func (d *Drainer) logAckError(what string, err error, wm *message.Message) {
	d.cfg.Logger.Error("retryqueue: drain "+what, err, watermill.LogFields{"message_uuid": wm.UUID, "stream": d.cfg.Stream})
}

// clearKeysIfEmpty clears the ordering index when the backlog is empty and
// no keyed message was diverted since gen, healing counts left behind by
// acks whose confirmation was lost.
func (d *Drainer) clearKeysIfEmpty(ctx context.Context, gen uint64) {
	if d.cfg.Queue.HeldKeys() == 0 {
		return
	}
	if n, err := d.Backlog(ctx); err == nil && n == 0 {
		d.cfg.Queue.resetKeys(gen, nil)
	}
}

// rebuildKeys counts the retry stream's messages per ordering key (direct
// gets, one per stored message) into a fresh ordering index of the queue's
// fixed size and installs it.
func (d *Drainer) rebuildKeys(ctx context.Context) error {
	for range 3 {
		gen := d.cfg.Queue.keysGeneration()
		st, err := d.cfg.JetStream.Stream(ctx, d.cfg.Stream)
		if err != nil {
			return err
		}
		info, err := st.Info(ctx)
		if err != nil {
			return err
		}
		counts := d.cfg.Queue.newKeyCounts()
		if info.State.Msgs > 0 {
			for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
				raw, err := st.GetMsg(ctx, seq)
				if errors.Is(err, jetstream.ErrMsgNotFound) {
					continue
				}
				if err != nil {
					return err
				}
				if _, ok := d.owns(raw.Subject); !ok {
					continue // another route's
				}
				m := message.NewMessage(raw.Header.Get(jsq.UUIDHeader), raw.Data)
				for k, v := range raw.Header {
					if !jsq.Reserved(k) && len(v) > 0 {
						m.Metadata.Set(k, v[0])
					}
				}
				d.cfg.Queue.countKey(counts, d.cfg.Queue.key(m))
			}
		}
		if d.cfg.Queue.resetKeys(gen, counts) {
			return nil
		}
	}
	return errors.New("retryqueue: ordering index kept changing while rebuilt")
}

// sleep waits for dur, a Wake, or ctx.
func (d *Drainer) sleep(ctx context.Context, dur time.Duration) {
	t := time.NewTimer(dur)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-d.wake:
	case <-t.C:
	}
}
