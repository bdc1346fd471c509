package metrics_test

import (
	"testing"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/metrics"
	"github.com/floodgate-go/floodgate/middleware"
	"github.com/floodgate-go/floodgate/retryqueue"
)

// A diversion of the middleware's own reasons (a parked partner, a full
// bulkhead or partner registry) is counted under its reason, a label
// present from the start, never under "other".
func TestDivertedMiddlewareReasons(t *testing.T) {
	m, _, url := served(t)
	expect(t, scrape(t, url), "start", metrics.PartnerOther, []check{
		{"floodgate_diverted_total", []string{"reason", middleware.ReasonParked}, 0},
	})
	for _, ev := range []middleware.Event{
		{Action: middleware.Diverted, Reason: middleware.ReasonParked, Admitted: true, Outcome: breaker.OutcomeFailure},
		{Action: middleware.Diverted, Reason: middleware.ReasonBulkhead},
		{Action: middleware.Diverted, Reason: middleware.ReasonPartnerLimit},
		{Action: middleware.Diverted, Reason: string(retryqueue.ReasonOpen)},
	} {
		ev.Partner = "northwind"
		m.ObserveEvent(ev)
	}
	expect(t, scrape(t, url), "events", "northwind", []check{
		{"floodgate_diverted_total", []string{"reason", middleware.ReasonParked}, 1},
		{"floodgate_diverted_total", []string{"reason", middleware.ReasonBulkhead}, 1},
		{"floodgate_diverted_total", []string{"reason", middleware.ReasonPartnerLimit}, 1},
		{"floodgate_diverted_total", []string{"reason", "other"}, 0},
	})
}
