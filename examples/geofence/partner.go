package main

import (
	"net/http"
	"sync"
	"time"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/deliver/webhook/webhooktest"
	"github.com/floodgate-go/floodgate/middleware"
)

// callHold is the degraded phase's scripted length when -degraded-calls
// ends it: long enough that only the count does.
const callHold = 1000 * time.Hour

// recoverySwitch sits in front of the consumer and knows when it recovered.
// By default the script's time decides (-healthy, then -degraded). With
// calls > 0 the count of requests does: it counts the requests that arrive
// while the consumer is degraded and, on the first one past calls, restarts
// the consumer's script at its recovered phase, so the outage lasts as many
// calls however slowly the machine runs. Safe for concurrent use.
type recoverySwitch struct {
	consumer *webhooktest.Consumer
	calls    int           // degraded requests before the recovery; 0: by time
	skip     time.Duration // script time from its start to the recovered phase

	mu sync.Mutex
	n  int       // degraded requests so far
	at time.Time // the recovery; zero until known
}

// start starts the consumer's script at t.
func (s *recoverySwitch) start(t time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.consumer.StartAt(t)
	if s.calls == 0 {
		s.at = t.Add(s.skip)
	}
}

// recoveredAt returns the recovery's time and whether it has happened by now.
func (s *recoverySwitch) recoveredAt(now time.Time) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.at, !s.at.IsZero() && !now.Before(s.at)
}

func (s *recoverySwitch) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.calls > 0 {
		now := time.Now()
		s.mu.Lock()
		if s.at.IsZero() && s.consumer.PhaseAt(now).Name == "degraded" {
			s.n++
			if s.n > s.calls {
				s.consumer.StartAt(now.Add(-s.skip))
				s.at = now
			}
		}
		s.mu.Unlock()
	}
	s.consumer.ServeHTTP(w, r)
}

// callLog follows each call to the consumer from its send to the
// breaker's judgement, to tell the trips that judge the outage from the
// trips that judge the recovered consumer. A call sent before the recovery
// may have been answered slowly by the degraded consumer; the breaker may
// judge it (and trip on it) after the recovery, up to the grace end, the
// last judgement of such a call. A call sent after the recovery is answered
// fast: if the breaker still judges it slow or failed (a loaded machine can
// do that), it is counted in slowAfter. Safe for concurrent use.
type callLog struct {
	slowCall time.Duration // the breaker's slow-call threshold

	mu        sync.Mutex
	before    map[string]int // calls sent before the recovery, not judged yet, by UUID
	graceEnd  time.Time
	slowAfter int
	probes    int // probes in flight
	maxProbes int
}

// send records a call of msgUUID about to be sent; the returned func
// records its answer.
func (l *callLog) send(msgUUID string, beforeRecovery, probe bool) (answered func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if beforeRecovery {
		l.before[msgUUID]++
	}
	if !probe {
		return func() {}
	}
	l.probes++
	l.maxProbes = max(l.maxProbes, l.probes)
	return func() {
		l.mu.Lock()
		l.probes--
		l.mu.Unlock()
	}
}

// judged records the middleware's event of a call, emitted after the
// breaker judged it (and after any transition that judgement caused).
func (l *callLog) judged(ev middleware.Event, now time.Time) {
	if !ev.Admitted {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if n := l.before[ev.UUID]; n > 0 {
		if n == 1 {
			delete(l.before, ev.UUID)
		} else {
			l.before[ev.UUID] = n - 1
		}
		if now.After(l.graceEnd) {
			l.graceEnd = now
		}
		return
	}
	if ev.Outcome == breaker.OutcomeFailure || (ev.Outcome == breaker.OutcomeSuccess && ev.Latency > l.slowCall) {
		l.slowAfter++
	}
}

// result returns the grace end (zero when no call was sent before the
// recovery), the calls sent after it that were judged slow or failed, and
// the most probes seen in flight at once.
func (l *callLog) result() (graceEnd time.Time, slowAfter, maxProbes int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.graceEnd, l.slowAfter, l.maxProbes
}
