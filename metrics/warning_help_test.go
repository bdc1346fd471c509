package metrics_test

import (
	"strings"
	"testing"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/deliver"
	"github.com/floodgate-go/floodgate/metrics"
	"github.com/floodgate-go/floodgate/middleware"
)

// The help text of floodgate_delivery_warnings_total names every reason
// it is counted under (each deliver.Warn* reason, and other), so a reason
// added to deliver is not left out of what Prometheus shows.
func TestWarningHelpNamesEveryReason(t *testing.T) {
	m, reg, _ := served(t)
	m.ObserveEvent(middleware.Event{Partner: "northwind", Action: middleware.Delivered, Admitted: true,
		Outcome: breaker.OutcomeSuccess, Warning: &deliver.Warning{Reason: deliver.WarnUnconfirmed}})
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != metrics.NameDeliveryWarnings {
			continue
		}
		for _, r := range append(deliver.WarnReasons(), "other") {
			if !strings.Contains(f.GetHelp(), " "+r+",") && !strings.HasSuffix(f.GetHelp(), " "+r+".") {
				t.Errorf("%s help %q does not name the reason %q", f.GetName(), f.GetHelp(), r)
			}
		}
		return
	}
	t.Fatalf("%s not gathered", metrics.NameDeliveryWarnings)
}
