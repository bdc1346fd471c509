package metrics_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/floodgate-go/floodgate/metrics"
)

// Receipt outcomes are counted under known label values only: an unknown
// reason as "other", an unknown outcome not at all; a nil *Metrics does
// nothing.
func TestObserveAS2ReceiptBoundsLabels(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg, metrics.Options{})
	if err != nil {
		t.Fatal(err)
	}
	before := testutil.CollectAndCount(m, metrics.NameAS2AsyncReceipts)
	m.ObserveAS2Receipt(metrics.ReceiptRefused, "partner-supplied\nlabel")
	m.ObserveAS2Receipt("made-up", metrics.ReasonNone)
	m.ObserveAS2Receipt(metrics.ReceiptWarning, "mic-missing")
	m.SetAS2PendingReceipts(7)
	if after := testutil.CollectAndCount(m, metrics.NameAS2AsyncReceipts); after != before {
		t.Fatalf("%d series after, %d before: a label value was created", after, before)
	}
	for _, c := range []struct {
		outcome, reason string
		want            float64
	}{
		{metrics.ReceiptRefused, "other", 1},
		{metrics.ReceiptWarning, "mic-missing", 1},
	} {
		if got := gatherValue(t, reg, metrics.NameAS2AsyncReceipts, c.outcome, c.reason); got != c.want {
			t.Errorf("%s/%s = %v, want %v", c.outcome, c.reason, got, c.want)
		}
	}
	if got := gatherValue(t, reg, metrics.NameAS2PendingReceipts); got != 7 {
		t.Errorf("pending = %v, want 7", got)
	}
	var none *metrics.Metrics
	none.ObserveAS2Receipt(metrics.ReceiptDelivered, metrics.ReasonNone)
	none.SetAS2PendingReceipts(1)
}

func gatherValue(t *testing.T, reg *prometheus.Registry, name string, values ...string) float64 {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
	next:
		for _, m := range f.GetMetric() {
			for i, v := range values {
				if i >= len(m.GetLabel()) || !hasLabelValue(m.GetLabel(), v) {
					continue next
				}
			}
			if c := m.GetCounter(); c != nil {
				return c.GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	t.Fatalf("no series %s %v", name, values)
	return 0
}

func hasLabelValue(pairs []*dto.LabelPair, v string) bool {
	for _, p := range pairs {
		if p.GetValue() == v {
			return true
		}
	}
	return false
}
