package retryqueue

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/floodgate-go/floodgate/partner"
	"github.com/nats-io/nats.go/jetstream"
)

// The service consumer: while many partners of a service have a backlog
// and every one of their breakers is closed, a [PartnerDrainer] drains
// them through one consumer filtering the whole service, rather than a
// consumer per partner taking turns. On the work-queue retry stream each
// filtered consumer costs the server a walk past the other partners'
// interleaved messages to find its own, and an interest check on every
// ack; one consumer reads the stream in order (BENCHMARKS.md, "Ninth
// step").

// ServiceConsumerName returns the name of the durable consumer a
// [PartnerDrainer] of service drains through while it uses its service
// consumer (see [PartnerDrainerConfig.ServiceConsumerFrom]): the prefix
// and service token of [ConsumerName], then "~~all", which no partner
// token spells (a token never holds '~'). Every replica of the service
// uses the same one.
func ServiceConsumerName(service string) string {
	return consumerPrefix + partner.Token(service) + "~~all"
}

// svcPhase is where a [PartnerDrainer]'s service consumer is.
type svcPhase int

const (
	svcOff      svcPhase = iota // the partners drain on their own consumers
	svcEntering                 // the partners end their turns and park
	svcOn                       // the service consumer drains; the partners stay parked
)

// svcState is a [PartnerDrainer]'s service consumer; its fields are
// guarded by PartnerDrainer.mu.
type svcState struct {
	phase  svcPhase
	parked int                // partners parked (drainPart.parked)
	resume chan struct{}      // closed when the phase goes back to svcOff
	leave  string             // why it is to end ("" while it may go on)
	cancel context.CancelFunc // svcOn: ends the service consumer's Run
	// backoff is the wait after the last leave (doubling per leave from
	// svcBackoffMin to svcBackoffMax; 0 after one that drained the
	// backlog); no entry before notBefore.
	backoff   time.Duration
	notBefore time.Time
}

// Service consumer timing.
const (
	// svcCheck is how often a PartnerDrainer looks whether its partners
	// may drain through the service consumer.
	svcCheck = 100 * time.Millisecond
	// svcParkWait bounds how long the partners may take to end their
	// turns, wait for their handlers and delete their consumers; past it
	// the entry is given up.
	svcParkWait = 2 * time.Second
	// svcClosedFor is how long a partner's breaker must have been closed
	// (at every look) before it moves to the service consumer, so that a
	// breaker going through its states does not start it and end it
	// again. The partner's own rate paces it either way.
	svcClosedFor = 250 * time.Millisecond
	// svcQuiet is how long a partner's drain must have seen no failure
	// (its own calls or live ones) before it moves to the service consumer.
	svcQuiet = 2 * time.Second
	// svcBackoffMin and svcBackoffMax bound the wait after a leave that
	// did not drain the backlog (jittered from half to the whole).
	svcBackoffMin = time.Second
	svcBackoffMax = time.Minute
	// svcBackMin is how many messages may go back for their partners'
	// rates in a tick of paceParked, whatever was delivered.
	svcBackMin = 10
	// svcInactive is the least InactiveThreshold of the service consumer:
	// a crashed replica's outlives it by that much at most.
	svcInactive = 30 * time.Second
)

// runServiceConsumer is Run's second goroutine: every svcCheck it looks
// whether the partners may drain through the service consumer, and if so
// drains through it until it leaves.
func (p *PartnerDrainer) runServiceConsumer(ctx context.Context) {
	defer p.wg.Done()
	t := time.NewTicker(svcCheck)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if p.serviceReady(ctx, time.Now()) {
			p.serveService(ctx)
		}
	}
}

// serviceReady reports whether the service consumer may start now: no
// backoff since its last leave, at least ServiceConsumerFrom partners
// draining here, and every one of them closed ([ClosedGate]) at every
// look for svcClosedFor, without a failure for svcQuiet, and holding no
// consumer with messages awaiting an ack (which it could not delete to
// park). To join another replica's (a partner's consumer was refused
// beside it: the partners cannot drain on their own), the partners
// draining here need only be closed and hold no such consumer. It looks
// at every partner's gate and failures on every call, ready or not. Only
// runServiceConsumer calls it (it alone writes drainPart.failSeen, failAt
// and closedAt).
func (p *PartnerDrainer) serviceReady(ctx context.Context, now time.Time) bool {
	p.mu.Lock()
	if p.svc.phase != svcOff {
		p.mu.Unlock()
		return false
	}
	backoff, many := now.Before(p.svc.notBefore), len(p.parts) >= p.cfg.ServiceConsumerFrom
	parts := make([]*drainPart, 0, len(p.parts))
	for _, e := range p.parts {
		parts = append(parts, e)
	}
	p.mu.Unlock()
	join := !backoff && p.svcJoin.Swap(false)
	ready := !backoff && (many || join)
	for _, e := range parts {
		if f := e.d.failures.Load(); f != e.failSeen {
			e.failSeen, e.failAt = f, now
		}
		closed := gateClosed(e.d.cfg.Gate)
		switch {
		case !closed:
			e.closedAt = time.Time{}
		case e.closedAt.IsZero():
			e.closedAt = now
		}
		if !closed || e.d.holding.Load() || !join && (now.Sub(e.closedAt) < svcClosedFor || !e.failAt.IsZero() && now.Sub(e.failAt) < svcQuiet) {
			ready = false
		}
	}
	return ready && (!join || p.serviceConsumerExists(ctx))
}

// serviceConsumerExists reports whether the service consumer exists on the
// retry stream (one request).
func (p *PartnerDrainer) serviceConsumerExists(ctx context.Context) bool {
	_, err := p.cfg.JetStream.Consumer(ctx, p.stream, ServiceConsumerName(p.cfg.Queue.Service()))
	return err == nil
}

// serveService parks the partners, drains through the service consumer
// until it leaves, and lets the partners go on.
func (p *PartnerDrainer) serveService(ctx context.Context) {
	p.mu.Lock()
	p.svc.phase, p.svc.leave, p.svc.resume = svcEntering, "", make(chan struct{})
	p.svcWant.Store(true)
	for _, e := range p.parts {
		e.d.Wake() // a partner waiting for its rate parks now
	}
	p.mu.Unlock()
	created, drained, why := p.serviceTurn(ctx)
	if created {
		// Nothing of it runs here any more. Another replica's messages
		// held on it go back to the stream (its acks fail: duplicates,
		// never a loss), and so do messages waiting out a nak delay.
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.cfg.Queue.cfg.PublishTimeout)
		err := p.cfg.JetStream.DeleteConsumer(dctx, p.stream, ServiceConsumerName(p.cfg.Queue.Service()))
		cancel()
		if err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
			p.cfg.Drainer.Logger.Error("retryqueue: delete the service consumer", err, watermill.LogFields{"stream": p.stream, "service": p.cfg.Queue.Service()})
		}
	}
	p.mu.Lock()
	if drained {
		p.svc.backoff, p.svc.notBefore = 0, time.Time{}
	} else {
		p.svc.backoff = min(svcBackoffMax, max(svcBackoffMin, 2*p.svc.backoff))
		p.svc.notBefore = time.Now().Add(p.svc.backoff/2 + rand.N(p.svc.backoff/2+1))
	}
	p.svc.phase, p.svc.cancel = svcOff, nil
	p.svcW.Store(nil)
	p.svcWant.Store(false)
	close(p.svc.resume)
	backoff := p.svc.backoff
	p.mu.Unlock()
	if created {
		p.svcLeaves.Add(1)
	}
	p.cfg.Drainer.Logger.Info("retryqueue: partners drain on their own consumers", watermill.LogFields{"stream": p.stream, "service": p.cfg.Queue.Service(), "why": why, "backoff": backoff})
	p.Discover() // partners whose backlog the service consumer saw first
}

// serviceTurn is serveService's middle: it waits for the partners to park
// (svcParkWait at most), creates the service consumer and drains through
// it until it leaves. It reports whether it created the consumer, whether
// the drain ended with the service's backlog empty, and why it left.
func (p *PartnerDrainer) serviceTurn(ctx context.Context) (created, drained bool, why string) {
	deadline := time.Now().Add(svcParkWait)
	for {
		p.mu.Lock()
		leave, all := p.svc.leave, p.svc.parked == len(p.parts)
		p.mu.Unlock()
		switch {
		case leave != "":
			return false, false, leave
		case all:
		case ctx.Err() != nil:
			return false, false, "stopped"
		case !time.Now().Before(deadline):
			return false, false, "partners still hold consumers (messages awaiting an ack)"
		default:
			sleepCtx(ctx, 5*time.Millisecond)
			continue
		}
		break
	}
	w, err := p.newServiceDrainer()
	if err != nil {
		return false, false, err.Error()
	}
	// Created here rather than in Run, so that the refusal expected beside
	// another replica's partner consumers is not logged as an error.
	if _, err := p.cfg.JetStream.CreateConsumer(ctx, p.stream, w.ConsumerConfig()); err != nil {
		return false, false, "service consumer refused: " + err.Error()
	}
	var empty bool
	w.idle = func(ctx context.Context) bool {
		c, err := p.cfg.JetStream.Consumer(ctx, p.stream, w.Consumer())
		if err != nil {
			return false
		}
		info := c.CachedInfo()
		empty = info.NumPending == 0 && info.NumAckPending == 0
		return empty
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	p.mu.Lock()
	if p.svc.leave != "" {
		p.mu.Unlock()
		return true, false, p.svc.leave
	}
	p.svc.phase, p.svc.cancel = svcOn, cancel
	p.svcW.Store(w)
	p.mu.Unlock()
	paced := make(chan struct{})
	go func() {
		defer close(paced)
		p.paceParked(wctx, w)
	}()
	defer func() { cancel(); <-paced }()
	p.svcRuns.Add(1)
	p.cfg.Drainer.Logger.Info("retryqueue: partners drain through the service consumer", watermill.LogFields{"stream": p.stream, "service": p.cfg.Queue.Service(), "rate": w.Rate()})
	err = w.Run(wctx)
	p.mu.Lock()
	why = p.svc.leave
	p.mu.Unlock()
	switch {
	case err != nil:
		return true, false, "service consumer: " + err.Error()
	case empty:
		return true, true, "backlog drained"
	case why == "":
		return true, false, "stopped"
	}
	return true, false, why
}

// newServiceDrainer returns the service consumer's drainer: the template's
// settings for every partner of the service, its gate always open (each
// message still meets its partner's own rate, servicePace, and its
// breaker and bulkhead in the handler), the whole MaxInFlight (at most
// 10,000), and a fixed rate, the sum of the partners' rates (paceParked
// keeps it so).
func (p *PartnerDrainer) newServiceDrainer() (*Drainer, error) {
	p.mu.Lock()
	var sum float64
	for _, e := range p.parts {
		sum += e.d.Rate()
	}
	p.mu.Unlock()
	c := p.cfg.Drainer
	c.JetStream, c.Queue, c.Handler = p.cfg.JetStream, p.cfg.Queue, p.cfg.Handler
	c.AllPartners, c.Consumer = true, ServiceConsumerName(p.cfg.Queue.Service())
	c.Gate = GateFunc(func() int { return math.MaxInt })
	c.MaxInFlight = min(p.cfg.MaxInFlight, 10000)
	// Its rate is the sum of the partners' (paceParked), each of which
	// bounds its own partner (servicePace).
	c.FixedRate, c.MaxRate = true, 0
	d, err := NewDrainer(c)
	if err != nil {
		return nil, err
	}
	d.svc, d.share, d.outcome, d.partnerRate = true, p.share, p.serviceOutcome, p.servicePace
	d.SetRate(sum)
	return d, nil
}

// serviceOutcome hears each call the service consumer made: it counts for
// its partner's own drain, as if that drain had made it (its drained
// messages and its rate control); a failed, slow or refused one ends the
// service consumer.
func (p *PartnerDrainer) serviceOutcome(r route, v verdict, latency time.Duration) {
	e := p.part(r)
	if e != nil && v != refused {
		e.d.drained.Add(1) // its goodput: served less the failed (observe)
		e.d.observe(v == failed, latency, true)
	}
	switch {
	case v == failed:
		p.leaveService("a call to partner " + r.partnerToken + " failed")
	case v == refused:
		p.leaveService("partner " + r.partnerToken + " refused a call")
	case p.cfg.Drainer.SlowCall > 0 && latency >= p.cfg.Drainer.SlowCall:
		p.leaveService("a call to partner " + r.partnerToken + " was slow")
	}
}

// servicePace reports whether r's partner's own drain rate has a token
// for one more call through the service consumer, and takes it. A partner
// whose drain does not run here yet (another replica's diversions) has
// none: its drain starts (and parks), and the message goes back until it
// has one.
func (p *PartnerDrainer) servicePace(r route) bool {
	if e := p.part(r); e != nil {
		return e.d.lim.Allow()
	}
	if r.known {
		p.wakeRoute(r)
	} else {
		p.Discover()
	}
	return false
}

// part returns r's partner's drain, nil if none runs here.
func (p *PartnerDrainer) part(r route) *drainPart {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.parts[r.partnerToken]
}

// paceParked runs while the service consumer drains, every svcCheck until
// ctx is done: each parked partner's rate control looks at what it took
// through the service consumer (its rate grows, or falls, as if it drained
// on its own), the service consumer's fetch rate follows the sum of the
// partners' rates, and a partner whose gate is no longer closed ends the
// service consumer (whether or not its breaker's listener calls Wake). So
// does a tick in which more messages went back for their partners' rates
// than were delivered: the stream's order is then the partners' rates'
// bottleneck (one partner's backlog ahead of the others', its rate
// lower), and each partner on its own consumer does better.
func (p *PartnerDrainer) paceParked(ctx context.Context, w *Drainer) {
	t := time.NewTicker(svcCheck)
	defer t.Stop()
	back, done := w.paced.Load(), w.drained.Load()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		b, d := w.paced.Load(), w.drained.Load()
		if b-back > max(svcBackMin, d-done) {
			p.leaveService(fmt.Sprintf("the partners' own rates sent %d messages back, %d delivered", b-back, d-done))
		}
		back, done = b, d
		p.mu.Lock()
		parts := make([]*drainPart, 0, len(p.parts))
		for _, e := range p.parts {
			parts = append(parts, e)
		}
		p.mu.Unlock()
		now := time.Now()
		var sum float64
		for _, e := range parts {
			e.d.tick(now)
			sum += e.d.Rate()
			if !gateClosed(e.d.cfg.Gate) {
				p.leaveService("partner " + e.rt.partnerToken + " is not closed")
			}
		}
		w.SetRate(sum)
	}
}

// leaveService ends the service consumer (or its entry) for reason why;
// the first reason stands. It never blocks.
func (p *PartnerDrainer) leaveService(why string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.svc.phase == svcOff || p.svc.leave != "" {
		return
	}
	p.svc.leave = why
	if w := p.svcW.Load(); w != nil {
		// What it fetched and has not called yet goes back to the
		// backlog rather than to the partners.
		w.turned.Store(true)
	}
	if p.svc.cancel != nil {
		p.svc.cancel()
	}
}

// park holds e's drainer, between turns and holding no consumer, while
// the service consumer is entering or on. A parked partner whose gate is
// not closed (its breaker tripped: it is woken on every transition) ends
// the service consumer.
func (p *PartnerDrainer) park(ctx context.Context, e *drainPart) {
	for {
		p.mu.Lock()
		if p.svc.phase == svcOff || ctx.Err() != nil {
			if e.parked {
				e.parked = false
				p.svc.parked--
			}
			p.mu.Unlock()
			return
		}
		if !e.parked {
			e.parked = true
			p.svc.parked++
		}
		resume := p.svc.resume
		p.mu.Unlock()
		if !gateClosed(e.d.cfg.Gate) {
			p.leaveService("partner " + e.rt.partnerToken + " is not closed")
		}
		select {
		case <-resume:
		case <-ctx.Done():
		case <-e.poke:
		}
	}
}

// ServiceConsumer reports whether the service's backlog drains through
// the service consumer now ([ServiceConsumerName]; see
// [PartnerDrainerConfig.ServiceConsumerFrom]). It does no I/O.
func (p *PartnerDrainer) ServiceConsumer() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.svc.phase == svcOn
}

// sleepCtx waits dur or until ctx is done.
func sleepCtx(ctx context.Context, dur time.Duration) {
	t := time.NewTimer(dur)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
