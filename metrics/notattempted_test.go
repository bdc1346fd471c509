package metrics_test

import (
	"testing"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/metrics"
	"github.com/floodgate-go/floodgate/middleware"
	"github.com/floodgate-go/floodgate/retryqueue"
)

// Issue 12: a call the handler refused before contacting the partner is
// diverted for not-attempted, a reason label present from the start, and
// counts as neutral, as the breaker saw it (its permit was cancelled). An
// admitted call's outcome label follows what the middleware reported to
// the breaker (Event.Outcome), the Classifier's verdict included, not the
// message's fate.
func TestObserveEventFollowsReportedOutcome(t *testing.T) {
	m, _, url := served(t)
	expect(t, scrape(t, url), "start", metrics.PartnerOther, []check{
		{"floodgate_diverted_total", []string{"reason", string(retryqueue.ReasonNotAttempted)}, 0},
	})

	for _, ev := range []middleware.Event{
		// refused by the handler's bulkhead
		{Action: middleware.Diverted, Reason: string(retryqueue.ReasonNotAttempted), Admitted: true, Outcome: breaker.OutcomeNeutral},
		// refused at the MaxAge deadline: dead-lettered instead
		{Action: middleware.DeadLettered, Reason: retryqueue.DeadReasonMaxAge, Admitted: true, Outcome: breaker.OutcomeNeutral},
		// the Classifier called a retryable error neutral
		{Action: middleware.Diverted, Reason: string(retryqueue.ReasonFailure), Admitted: true, Outcome: breaker.OutcomeNeutral},
		// a failure that used up the attempts
		{Action: middleware.DeadLettered, Reason: retryqueue.DeadReasonMaxAttempts, Admitted: true, Outcome: breaker.OutcomeFailure},
	} {
		ev.Partner = "northwind"
		m.ObserveEvent(ev)
	}
	expect(t, scrape(t, url), "events", "northwind", []check{
		{"floodgate_diverted_total", []string{"reason", string(retryqueue.ReasonNotAttempted)}, 1},
		{"floodgate_diverted_total", []string{"reason", string(retryqueue.ReasonFailure)}, 1},
		{"floodgate_dead_lettered_total", []string{"reason", retryqueue.DeadReasonMaxAge}, 1},
		{"floodgate_calls_total", []string{"outcome", "neutral"}, 3},
		{"floodgate_calls_total", []string{"outcome", "failure"}, 1},
		{"floodgate_calls_total", []string{"outcome", "rejected"}, 0},
	})
}
