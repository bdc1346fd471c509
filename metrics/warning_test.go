package metrics_test

import (
	"testing"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/deliver"
	"github.com/floodgate-go/floodgate/metrics"
	"github.com/floodgate-go/floodgate/middleware"
)

// A message delivered with a warning is a success in floodgate_calls_total
// and counts in floodgate_delivery_warnings_total by its reason; a reason
// of the handler's own is counted as other, and Forget deletes the
// series with the partner's others.
func TestObserveEventCountsWarnings(t *testing.T) {
	m, reg, url := served(t)
	for _, reason := range []string{"unconfirmed", "unconfirmed", "mdn-unsigned", "mdn-warning", "Partner said: {oops}"} {
		m.ObserveEvent(middleware.Event{Partner: "northwind", Action: middleware.Delivered, Admitted: true,
			Outcome: breaker.OutcomeSuccess, Warning: &deliver.Warning{Reason: reason}})
	}
	m.ObserveEvent(middleware.Event{Partner: "northwind", Action: middleware.Delivered, Admitted: true, Outcome: breaker.OutcomeSuccess})
	expect(t, scrape(t, url), "warnings", "northwind", []check{
		{"floodgate_calls_total", []string{"outcome", "success"}, 6},
		{"floodgate_delivery_warnings_total", []string{"reason", "unconfirmed"}, 2},
		{"floodgate_delivery_warnings_total", []string{"reason", "mdn-unsigned"}, 1},
		{"floodgate_delivery_warnings_total", []string{"reason", "mdn-warning"}, 1},
		{"floodgate_delivery_warnings_total", []string{"reason", "other"}, 1},
	})
	m.Forget("northwind")
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != metrics.NameDeliveryWarnings {
			continue
		}
		for _, mt := range f.GetMetric() {
			for _, l := range mt.GetLabel() {
				if l.GetName() == metrics.LabelPartner && l.GetValue() == "northwind" {
					t.Errorf("%s{partner=northwind} still exported after Forget", f.GetName())
				}
			}
		}
	}
}
