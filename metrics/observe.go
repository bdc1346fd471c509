package metrics

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/middleware"
	"github.com/floodgate-go/floodgate/partner"
	"github.com/floodgate-go/floodgate/retryqueue"
)

// ObserveEvent counts one middleware event under the partner label of
// [middleware.Event.Partner] ([PartnerNone] when empty, [PartnerOther]
// beyond [Options.MaxPartners]); use it as (or call it from)
// [middleware.Config.OnEvent]. It does not block on I/O: it increments
// counters and observes the latency histogram, under a read lock (and,
// for a partner's first event while there is room, a write lock). See the
// package documentation for how an event maps to an outcome.
func (m *Metrics) ObserveEvent(ev middleware.Event) {
	if m == nil {
		return
	}
	m.with(ev.Partner, nil, func(s *series) {
		if ev.Admitted {
			o := s.admitted(ev)
			s.latency[o].Observe(ev.Latency.Seconds())
			s.outcome[o].Inc()
		}
		if ev.Warning != nil {
			s.warnings[warningReason(ev.Warning.Reason)].Inc()
		}
		switch ev.Action {
		case middleware.Diverted:
			switch r := retryqueue.Reason(ev.Reason); {
			case ev.Admitted:
			case r == retryqueue.ReasonOpen, r == retryqueue.ReasonProbeLimit, r == retryqueue.ReasonRamp:
				s.outcome[OutcomeRejected].Inc()
			}
			s.diverted[divertReason(ev.Reason)].Inc()
		case middleware.DeadLettered:
			s.dead[deadReason(ev.Reason)].Inc()
		case middleware.Nacked:
			s.nacked.Inc()
		case middleware.Deferred: // a drained message turned away, left in place
			s.outcome[OutcomeRejected].Inc()
		}
	})
}

// ObserveTransition counts one transition of the breaker of partner p
// under p's label; use it as (or call it from) partner.Config.OnTransition.
// A breaker watched with [Metrics.WatchBreaker] has its transitions counted
// already.
func (m *Metrics) ObserveTransition(p *partner.Partner, t breaker.Transition) {
	if m == nil || p == nil {
		return
	}
	m.with(p.Token(), p.Breaker(), func(s *series) { m.transition(s.label, t) })
}

func (m *Metrics) transition(label string, t breaker.Transition) {
	m.transitions.WithLabelValues(label, t.From.String(), t.To.String()).Inc()
}

// admitted is the outcome label of an admitted call: what the middleware
// reported to the breaker ([middleware.Event.Outcome]), a success above the
// partner's slow-call threshold counted as slow.
func (s *series) admitted(ev middleware.Event) string {
	switch ev.Outcome {
	case breaker.OutcomeFailure:
		return OutcomeFailure
	case breaker.OutcomeNeutral:
		return OutcomeNeutral
	}
	if s.slow > 0 && ev.Latency > s.slow {
		return OutcomeSlow
	}
	return OutcomeSuccess
}

// reasonOther is the reason label of a reason outside the known ones.
const reasonOther = "other"

// divertReason keeps the reason label to the known diversion reasons: the
// queue's and the middleware's (partner-limit, bulkhead, parked).
func divertReason(r string) string {
	if retryqueue.Reason(r).Valid() || slices.Contains(divertReasons, r) {
		return r
	}
	return reasonOther
}

// deadReason maps a dead-letter reason to its bounded category: the
// DeadReason constants the middleware and queue set, or "other" for a
// reason of the caller's own; a "category: detail" reason maps to its
// category, so error texts never become label values.
func deadReason(r string) string {
	cat, _, _ := strings.Cut(r, ":")
	cat = strings.TrimSpace(cat)
	for _, known := range deadReasons {
		if cat == known {
			return cat
		}
	}
	return reasonOther
}

// warningReason keeps a warning's reason label to the known reasons
// ([deliver.WarnReasons]), and "other".
func warningReason(r string) string {
	if slices.Contains(warnReasons, r) {
		return r
	}
	return reasonOther
}

func utf8Valid(s string) bool { return utf8.ValidString(s) }

func errorf(format string, a ...any) error { return fmt.Errorf(format, a...) }
