package retryqueue

import (
	"context"
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/floodgate-go/floodgate/jsq"
	"github.com/nats-io/nats.go/jetstream"
)

// lanes bounds the partners of a [PartnerDrainer] that hold a consumer and
// fetch at once: size lanes, handed to waiters in FIFO order. A partner
// takes a lane for one turn and, when others wait, goes to the back of the
// queue, so the partners with a backlog take turns round-robin. Safe for
// concurrent use.
type lanes struct {
	mu    sync.Mutex
	free  int
	queue []chan struct{}
	waits atomic.Int32 // len(queue)
}

func newLanes(n int) *lanes { return &lanes{free: n} }

// acquire waits for a lane, in turn; it returns ctx's error (and no lane)
// if ctx ends first.
func (l *lanes) acquire(ctx context.Context) error {
	l.mu.Lock()
	if l.free > 0 && len(l.queue) == 0 {
		l.free--
		l.mu.Unlock()
		return nil
	}
	ch := make(chan struct{})
	l.queue = append(l.queue, ch)
	l.waits.Add(1)
	l.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		l.mu.Lock()
		defer l.mu.Unlock()
		for i, q := range l.queue {
			if q == ch {
				l.queue = append(l.queue[:i], l.queue[i+1:]...)
				l.waits.Add(-1)
				return ctx.Err()
			}
		}
		l.releaseLocked() // granted meanwhile: pass it on
		return ctx.Err()
	}
}

// release gives a lane back: to the longest waiter, if any.
func (l *lanes) release() {
	l.mu.Lock()
	l.releaseLocked()
	l.mu.Unlock()
}

func (l *lanes) releaseLocked() {
	if len(l.queue) == 0 {
		l.free++
		return
	}
	ch := l.queue[0]
	l.queue = l.queue[1:]
	l.waits.Add(-1)
	close(ch)
}

// waiting reports whether a partner waits for a lane.
func (l *lanes) waiting() bool { return l.waits.Load() > 0 }

// yielding reports whether a [PartnerDrainer]'s partner is to end its turn
// at the next chance: another partner waits for a lane, or the partners
// are parking for the service consumer.
func (d *Drainer) yielding() bool {
	return d.lanes != nil && (d.lanes.waiting() || d.parking != nil && d.parking())
}

// turnEnd is what a [PartnerDrainer] partner's drainer knows at the end
// of a turn, after its handlers: clean, every message it fetched in the
// turn was acked (confirmed); shared, the consumer may hold another
// replica's messages (it existed with deliveries when the turn began, or
// was kept from an earlier turn); empty, the consumer had nothing more
// pending after the turn's last fetch.
type turnEnd struct{ clean, shared, empty bool }

// turnOver ends a [PartnerDrainer] partner's turn from [Drainer.round]:
// another partner waits for the lane, and this one would otherwise wait
// for wait (its gate, its rate, its handlers, or an empty fetch).
type turnOver struct{ wait time.Duration }

func (t turnOver) Error() string { return "retryqueue: partner drain turn over" }

// rest makes round wait dur, or, for a [PartnerDrainer]'s partner while
// another partner waits for a lane, end the turn instead.
func (d *Drainer) rest(ctx context.Context, dur time.Duration) error {
	if d.yielding() {
		return turnOver{dur}
	}
	d.sleep(ctx, dur)
	return nil
}

// turnSlice is how long a [PartnerDrainer] partner's turn may go on while
// other partners wait for a lane, as long as its gate, its rate and its
// backlog allow: several batches per turn, so the consumer a turn creates
// and deletes is paid for by more than one batch. Every partner gets the
// same slice, so the turns stay fair.
const turnSlice = 100 * time.Millisecond

// restSlots makes round wait dur for its handlers to free in-flight
// slots (a finishing handler wakes it). A [PartnerDrainer]'s partner
// waits so within its turn's slice, and past it, while another partner
// waits for a lane, ends the turn instead.
func (d *Drainer) restSlots(ctx context.Context, dur time.Duration) error {
	if d.yielding() && !time.Now().Before(d.sliceEnd) {
		return turnOver{dur}
	}
	d.sleep(ctx, dur)
	return nil
}

// gatePaused records a look at the gate that found no budget; on the
// first look of a pause it makes the idle check and reports true when the
// drain is to end (a [PartnerDrainer]'s partner with no backlog).
func (d *Drainer) gatePaused(ctx context.Context) bool {
	d.gateClosed.Add(1)
	if d.paused.Swap(true) {
		return false
	}
	d.mu.Lock()
	d.pausedAt = time.Now()
	d.mu.Unlock()
	return d.idle != nil && d.handlersIdle() && d.idle(ctx)
}

// runTurns is Run for a [PartnerDrainer]'s partner. While its gate admits
// messages and its rate has a batch ready, it queues for a lane; holding
// one, it creates its consumer and fetches. The turn ends when another
// partner waits (after a fetch), or when the partner would wait itself
// (its gate, its rate, an empty fetch): it gives the lane up, waits for
// its handlers, and gives the consumer back (deleted unless messages of it
// await an ack, such as ones waiting out a nak delay). It returns nil when
// the backlog is empty (consumer deleted) or ctx is done, and the
// consumer's refusal as Run does.
func (d *Drainer) runTurns(ctx context.Context) error {
	var cons jetstream.Consumer
	for ctx.Err() == nil {
		if cons != nil && d.keptClean && d.parking != nil && d.parking() {
			// Kept clean for the next turn: nothing of it awaits an ack,
			// so it goes, and the partner parks. Not kept any more
			// either way (retire took it out of those kept).
			if _, deleted := d.retire(ctx, turnEnd{clean: true}); deleted {
				cons = nil
			}
			d.keptClean = false
		}
		d.holding.Store(cons != nil && !d.keptClean)
		if cons == nil && d.park != nil && d.parking() {
			if d.cfg.Gate.Budget() > 0 {
				d.unpause() // closed since its last look: slow start again, as round would
			}
			d.park(ctx) // while the service consumer drains
		}
		d.tick(time.Now())
		if d.cfg.Gate.Budget() <= 0 {
			// No lane and no fetch while the gate admits nothing.
			if d.gatePaused(ctx) {
				return nil
			}
			d.sleep(ctx, d.cfg.PollInterval)
			continue
		}
		// Queue for a lane with a full batch only: a partner whose rate
		// has not refilled its bucket waits without one, so a turn is not
		// spent on a message or two. While others wait for a lane, the
		// bucket holds a second of the rate (widen).
		d.widen(d.lanes.waiting())
		want := min(d.cfg.Gate.Budget(), d.lim.Burst(), cap(d.slots)-len(d.slots))
		if want < 1 {
			d.sleep(ctx, d.cfg.PollInterval) // a finishing handler wakes it
			continue
		}
		if tokens := d.lim.Tokens(); tokens < float64(want) {
			d.sleep(ctx, max(time.Millisecond, time.Duration((float64(want)-tokens)/float64(d.lim.Limit())*float64(time.Second))))
			continue
		}
		if d.lanes.acquire(ctx) != nil {
			break
		}
		if cons == nil && d.parking != nil && d.parking() {
			d.lanes.release() // no turn: park first
			continue
		}
		f0, s0 := d.fetched.Load(), d.drained.Load()+d.dead.Load()
		d.left = math.MaxUint64
		wait, shared, err := d.turn(ctx, &cons)
		d.waitHandlers()
		if errors.Is(err, errDrainIdle) {
			return nil
		}
		if err != nil {
			return err
		}
		if cons != nil && ctx.Err() == nil {
			// Every message fetched this turn acked, confirmed: nothing of
			// this drainer's awaits an ack on the consumer.
			clean := d.fetched.Load()-f0 == d.drained.Load()+d.dead.Load()-s0
			idle, deleted := d.retire(ctx, turnEnd{clean: clean, shared: shared, empty: d.left == 0})
			if idle {
				return nil
			}
			if deleted {
				cons = nil
			}
		}
		d.holding.Store(cons != nil && !d.keptClean)
		if wait > 0 {
			d.sleep(ctx, wait)
		}
	}
	d.waitHandlers()
	return nil
}

// turn is the part of a turn of runTurns that holds the lane, which it
// gives up before it returns: it opens the consumer if needed and fetches
// until the turn is over. It returns how long to wait before the next
// turn, and [errDrainIdle] (the backlog is empty and the consumer deleted)
// or the consumer's refusal.
func (d *Drainer) turn(ctx context.Context, cons *jetstream.Consumer) (wait time.Duration, shared bool, err error) {
	defer d.lanes.release()
	defer d.finishAhead(ctx)
	if *cons == nil {
		c, err := d.openConsumer(ctx)
		if errors.Is(err, ErrRouteConflict) || errors.Is(err, jsq.ErrConfigMismatch) {
			return 0, false, err // the PartnerDrainer logs it
		}
		if err != nil {
			if ctx.Err() == nil {
				d.cfg.Logger.Error("retryqueue: create drain consumer", err, watermill.LogFields{"stream": d.cfg.Stream, "consumer": d.cfg.Consumer})
			}
			return d.cfg.PollInterval, false, nil
		}
		*cons = c
		// Created by another replica, which may hold messages of it.
		info := c.CachedInfo()
		shared = info.Delivered.Consumer > 0 || info.NumAckPending > 0
	} else {
		// Kept from an earlier turn: after a clean one, with nothing of
		// it awaiting an ack (see PartnerDrainerConfig.KeepConsumers);
		// else because messages of it await one.
		shared = !d.keptClean
	}
	d.keptClean = false
	d.sliceEnd = time.Now().Add(turnSlice)
	for ctx.Err() == nil {
		err := d.round(ctx)
		now := time.Now()
		d.tick(now)
		var over turnOver
		switch {
		case err == nil:
			if d.yielding() && (d.left == 0 || !now.Before(d.sliceEnd)) {
				return 0, shared, nil
			}
			// Nobody waits, or the slice and the backlog last: keep the
			// lane and the consumer.
		case errors.Is(err, errDrainIdle):
			*cons = nil
			return 0, shared, err
		case errors.As(err, &over):
			return over.wait, shared, nil
		default:
			if consumerGone(err) {
				*cons = nil
			}
			if ctx.Err() == nil {
				d.cfg.Logger.Error("retryqueue: fetch", err, watermill.LogFields{"stream": d.cfg.Stream, "consumer": d.cfg.Consumer})
			}
			return d.cfg.PollInterval, shared, nil
		}
	}
	return 0, shared, nil
}
