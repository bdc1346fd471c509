package asyncmdn_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/floodgate-go/floodgate/metrics"
	"github.com/floodgate-go/floodgate/retryqueue"
)

// gathered returns the value of the series of name with the given label
// values (outcome, reason), or of the unlabelled gauge when none.
func gathered(t *testing.T, reg *prometheus.Registry, name string, labels ...string) float64 {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				found := false
				for _, lp := range m.GetLabel() {
					if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
						found = true
					}
				}
				if !found {
					continue series
				}
			}
			if c := m.GetCounter(); c != nil {
				return c.GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	t.Fatalf("no series %s %v", name, labels)
	return 0
}

// Every answer of the endpoint and every sweep dead letter is counted by
// outcome and reason, and the sweep sets the pending gauge.
func TestResolverMetrics(t *testing.T) {
	e := newEnv(t, nil)
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg, metrics.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e.metrics = m
	r := e.replica("", nil)
	count := func(outcome, reason string) float64 {
		return gathered(t, reg, metrics.NameAS2AsyncReceipts, metrics.LabelOutcome, outcome, metrics.LabelReason, reason)
	}
	start := time.Now()
	e.sendAsync(r, "order-1")
	if n, err := e.partner.PostReceipts(testCtx(t)); n != 1 || err != nil {
		t.Fatalf("PostReceipts = %d, %v", n, err)
	}
	e.sendAsync(r, "order-2")
	if n, err := r.resolver.SweepAt(testCtx(t), start); n != 0 || err != nil {
		t.Fatalf("early sweep = %d, %v", n, err)
	}
	if got := gathered(t, reg, metrics.NameAS2PendingReceipts); got != 1 {
		t.Fatalf("pending gauge %v, want 1", got)
	}
	if n, err := r.resolver.SweepAt(testCtx(t), start.Add(2*time.Hour)); n != 1 || err != nil {
		t.Fatalf("sweep = %d, %v", n, err)
	}
	for _, post := range []struct{ method, ct, body string }{
		{http.MethodPost, "text/plain", "not an MDN"},
		{http.MethodGet, "", ""},
	} {
		req, _ := http.NewRequest(post.method, r.srv.URL+"/mdn", strings.NewReader(post.body))
		req.Header.Set("Content-Type", post.ct)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	for _, c := range []struct {
		outcome, reason string
		want            float64
	}{
		{metrics.ReceiptDelivered, metrics.ReasonNone, 1},
		{metrics.ReceiptDeadLettered, retryqueue.DeadReasonMDNTimeout, 1},
		{metrics.ReceiptDeadLettered, retryqueue.DeadReasonPermanent, 0},
		{metrics.ReceiptRefused, metrics.ReasonNotMDN, 1},
		{metrics.ReceiptRefused, metrics.ReasonMethod, 1},
		{metrics.ReceiptRetryLater, metrics.ReasonEarly, 0},
	} {
		if got := count(c.outcome, c.reason); got != c.want {
			t.Errorf("%s{outcome=%q,reason=%q} = %v, want %v", metrics.NameAS2AsyncReceipts, c.outcome, c.reason, got, c.want)
		}
	}
	if got := gathered(t, reg, metrics.NameAS2PendingReceipts); got != 0 {
		t.Fatalf("pending gauge %v after the sweep, want 0", got)
	}
}
