package jsq

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/floodgate-go/floodgate/internal/pull"
	"github.com/nats-io/nats.go/jetstream"
)

// flow is one subscription: a feeder asks the server for messages in
// batches of at most the free credit (Concurrency + Prefetch, less the
// messages requested, waiting or in handlers), Concurrency workers hand
// them to the router one at a time each, and a keeper sends in-progress
// acks for those waiting, so no delivered message's AckWait runs out
// unseen.
type flow struct {
	s          *Subscriber
	stop, base context.Context
	puller     *pull.Puller // the feeder's; it closes it when it returns
	d          Delivery
	out        chan<- *message.Message
	acks       *acks
	chunk      int           // smallest batch worth a pull request
	batch      int           // largest batch of a pull request
	fetchWait  time.Duration // expiry of a pull request

	mu       sync.Mutex
	waiting  []waiting // delivered, not yet handed over, oldest first
	free     int       // credit neither requested nor held
	err      error     // the last fetch's failure, for the feeder
	failures int       // consecutive fetch failures

	ready chan struct{} // cap 1: waiting may be non-empty
	freed chan struct{} // cap 1: free grew, or a fetch failed

	loops sync.WaitGroup
}

// waiting is a delivered message and when its AckWait started on the
// server: at delivery, restarted by each in-progress ack.
type waiting struct {
	jm    jetstream.Msg
	since time.Time
}

// onNewFlow, when set (by tests only), sees each subscription's flow.
var onNewFlow atomic.Pointer[func(*flow)]

func newFlow(s *Subscriber, stop, base context.Context, cons jetstream.Consumer, p *pull.Puller, d Delivery, out chan<- *message.Message, a *acks) *flow {
	credit := s.cfg.Concurrency + max(s.cfg.Prefetch, 0)
	f := &flow{
		s: s, stop: stop, base: base, puller: p, d: d, out: out, acks: a,
		chunk:     (credit + 1) / 2,
		batch:     credit,
		fetchWait: max(s.cfg.FetchWait, time.Second),
		free:      credit,
		ready:     make(chan struct{}, 1),
		freed:     make(chan struct{}, 1),
	}
	// An operator's limits on the consumer's pull requests (fields jsq
	// does not set): a larger request would be refused.
	if info := cons.CachedInfo(); info != nil {
		if m := info.Config.MaxRequestBatch; m > 0 && m < f.batch {
			f.batch = m
			f.chunk = min(f.chunk, m)
		}
		if m := info.Config.MaxRequestExpires; m > 0 && m < f.fetchWait {
			f.fetchWait = m
		}
	}
	return f
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// start starts the feeder, the keeper and the workers; they return once
// stop is done.
func (f *flow) start() {
	f.loops.Go(f.feed)
	f.loops.Go(f.keep)
	for range f.s.cfg.Concurrency {
		f.loops.Go(func() {
			for {
				w, ok := f.take()
				if !ok {
					return
				}
				f.handle(w.jm, f.handOver(w))
				f.release()
			}
		})
	}
}

// wait returns, once stop is done, after every loop and fetch finished,
// the pull subscription ended (see feed), the messages still waiting were
// nakked and every ack confirmed (or failed).
func (f *flow) wait() {
	f.loops.Wait()
	f.mu.Lock()
	left := f.waiting
	f.waiting = nil
	f.mu.Unlock()
	for _, w := range left {
		f.nakUnhandled(w.jm, f.d)
	}
	f.acks.wait()
}

// feed asks for a batch of the free credit, at most batch, whenever at
// least chunk credit is free and the previous batch is complete (filled or
// expired), so messages arrive in the consumer's order, backing off after
// a failed fetch (server gone, consumer missing, ...). Once stop is done
// it ends the pull subscription before it returns (the server seeing it,
// so a message published later goes to another subscriber at once, not
// to this one during CloseGrace) and naks what reached it unread.
func (f *flow) feed() {
	defer f.puller.Close()
	for f.stop.Err() == nil {
		f.mu.Lock()
		n, err, failures := f.free, f.err, f.failures
		f.err = nil
		if err == nil && n >= f.chunk {
			n = min(n, f.batch)
			f.free -= n
		}
		f.mu.Unlock()
		switch {
		case err != nil:
			f.s.cfg.Logger.Error("jsq: fetch", err, watermill.LogFields{"stream": f.d.Stream, "consumer": f.d.Consumer})
			t := time.NewTimer(min(time.Duration(failures)*100*time.Millisecond, time.Second))
			select {
			case <-f.stop.Done():
			case <-t.C:
			}
			t.Stop()
		case n < f.chunk:
			select {
			case <-f.stop.Done():
			case <-f.freed:
			}
		default:
			// One pull request at a time: the server spreads messages
			// over concurrent requests in turn, so two would let the
			// messages of one subscription overtake each other.
			got, err := f.puller.Fetch(f.stop, n, f.fetchWait, func(jm jetstream.Msg) {
				f.mu.Lock()
				f.waiting = append(f.waiting, waiting{jm, time.Now()})
				f.mu.Unlock()
				signal(f.ready)
			})
			f.settle(n-got, err)
		}
	}
}

// settle returns the unused credit of a finished fetch and records its
// failure for the feeder (the end of its expiry or of stop is none).
func (f *flow) settle(unused int, err error) {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || f.stop.Err() != nil {
		err = nil
	}
	f.mu.Lock()
	f.free += unused
	if err != nil {
		f.err = err
		f.failures++
	} else {
		f.failures = 0
	}
	f.mu.Unlock()
	signal(f.freed)
}

// take returns the oldest waiting message, or false once stop is done.
func (f *flow) take() (waiting, bool) {
	for {
		if f.stop.Err() != nil {
			return waiting{}, false
		}
		f.mu.Lock()
		if len(f.waiting) > 0 {
			w := f.waiting[0]
			f.waiting[0] = waiting{}
			f.waiting = f.waiting[1:]
			more := len(f.waiting) > 0
			f.mu.Unlock()
			if more {
				signal(f.ready) // wake another worker
			}
			return w, true
		}
		f.mu.Unlock()
		select {
		case <-f.stop.Done():
		case <-f.ready:
		}
	}
}

// release frees the credit of a message whose outcome is settled.
func (f *flow) release() {
	f.mu.Lock()
	f.free++
	wake := f.free >= f.chunk
	f.mu.Unlock()
	if wake {
		signal(f.freed)
	}
}

// handOver returns when the server's AckWait for w runs out once it is
// handed to the handler: it restarts the AckWait with an in-progress ack
// when w waited for more than AckWait/10, so the handler has at least 9/10
// of AckWait.
func (f *flow) handOver(w waiting) time.Time {
	if now := time.Now(); now.Sub(w.since) > f.s.cfg.AckWait/10 {
		if err := w.jm.InProgress(); err == nil {
			w.since = now
		}
	}
	return w.since.Add(f.s.cfg.AckWait)
}

// keep sends an in-progress ack for each message that has been waiting
// for AckWait/5 since its delivery or its last one, every AckWait/5, so a
// waiting message is never older than about 2/5 of AckWait on the server.
func (f *flow) keep() {
	period := f.s.cfg.AckWait / 5
	t := time.NewTicker(period)
	defer t.Stop()
	var due []jetstream.Msg
	for {
		select {
		case <-f.stop.Done():
			return
		case <-t.C:
		}
		now := time.Now()
		f.acks.expire(now)
		due = due[:0]
		f.mu.Lock()
		for i := range f.waiting {
			if now.Sub(f.waiting[i].since) >= period {
				due = append(due, f.waiting[i].jm)
				f.waiting[i].since = now
			}
		}
		f.mu.Unlock()
		for _, jm := range due {
			if err := jm.InProgress(); err != nil {
				f.s.cfg.Logger.Error("jsq: in-progress ack of a waiting message not sent; the server may redeliver it", err, watermill.LogFields{"subject": jm.Subject()})
			}
		}
	}
}
