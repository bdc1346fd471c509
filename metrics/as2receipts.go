package metrics

import (
	"slices"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/floodgate-go/floodgate/deliver"
	"github.com/floodgate-go/floodgate/retryqueue"
)

// Metric names of asynchronous AS2 receipts (package deliver/as2/asyncmdn),
// also in [Names].
const (
	// NameAS2AsyncReceipts counts what the asynchronous receipt endpoint and
	// the deadline sweep did, by outcome and reason ([Metrics.ObserveAS2Receipt]).
	NameAS2AsyncReceipts = "floodgate_as2_async_receipts_total"
	// NameAS2PendingReceipts is the number of pending receipts the last
	// sweep found ([Metrics.SetAS2PendingReceipts]).
	NameAS2PendingReceipts = "floodgate_as2_async_pending_receipts"
)

// Outcomes of an asynchronous AS2 receipt, the values of the outcome label
// of floodgate_as2_async_receipts_total. With each, the reasons it takes
// (any other reason is counted as "other").
const (
	// ReceiptDelivered: an MDN resolved a record, delivered. Reason "none".
	ReceiptDelivered = "delivered"
	// ReceiptWarning: an MDN resolved a record, delivered with a warning.
	// Reason: the [deliver.Warning] reason (mdn-unsigned, mic-missing,
	// mic-mismatch, mdn-warning).
	ReceiptWarning = "warning"
	// ReceiptDeadLettered: the record was dead-lettered. Reason
	// "permanent" (a negative receipt) or "mdn-timeout" (no MDN by the
	// deadline, from the sweep).
	ReceiptDeadLettered = "dead-lettered"
	// ReceiptRefused: an MDN resolved nothing and must not be posted again.
	// Reasons: ReasonUnsigned, ReasonSignature, ReasonUnknown,
	// ReasonNotMDN, ReasonTooLarge, ReasonMethod, ReasonNoSender.
	ReceiptRefused = "refused"
	// ReceiptRetryLater: an MDN resolved nothing yet; it was answered 503
	// with Retry-After. Reasons: ReasonEarly, ReasonClaimed,
	// ReasonUnavailable.
	ReceiptRetryLater = "retry-later"
	// ReceiptDuplicate: an MDN for a record already resolved; answered
	// 200. Reason "none".
	ReceiptDuplicate = "duplicate"
)

// Reasons of refused and retry-later receipts.
const (
	ReasonNone        = "none"
	ReasonUnsigned    = "unsigned"          // unsigned, a signed MDN was asked for (403)
	ReasonSignature   = "signature"         // signature does not verify, or untrusted signer (403)
	ReasonUnknown     = "unknown"           // no record, Message-ID not ours (404)
	ReasonNotMDN      = "not-an-mdn"        // unreadable, or no Original-Message-ID (400)
	ReasonTooLarge    = "too-large"         // body over the endpoint's limit (413)
	ReasonMethod      = "method"            // not a POST (405)
	ReasonNoSender    = "no-sender"         // no Sender for the record's partner (500)
	ReasonEarly       = "early"             // no record yet, Message-ID of ours (503)
	ReasonClaimed     = "claimed"           // another replica is dead-lettering the record (503)
	ReasonUnavailable = "store-unavailable" // the store or the dead-letter stream failed (503)
)

// receiptReasons are the reasons counted under each outcome; all their
// series exist from the start, at zero.
var receiptReasons = map[string][]string{
	ReceiptDelivered:    {ReasonNone},
	ReceiptWarning:      append(deliver.WarnReasons(), reasonOther),
	ReceiptDeadLettered: {retryqueue.DeadReasonPermanent, retryqueue.DeadReasonMDNTimeout, reasonOther},
	ReceiptRefused:      {ReasonUnsigned, ReasonSignature, ReasonUnknown, ReasonNotMDN, ReasonTooLarge, ReasonMethod, ReasonNoSender, reasonOther},
	ReceiptRetryLater:   {ReasonEarly, ReasonClaimed, ReasonUnavailable, reasonOther},
	ReceiptDuplicate:    {ReasonNone},
}

// as2Receipts are the asynchronous receipt metrics: not by partner, since
// a refused MDN names no partner we can trust.
type as2Receipts struct {
	counts  *prometheus.CounterVec
	pending *prometheus.Desc
	n       atomic.Int64 // pending receipts at the last sweep
}

func newAS2Receipts(cl prometheus.Labels) *as2Receipts {
	r := &as2Receipts{
		counts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: NameAS2AsyncReceipts, ConstLabels: cl,
			Help: "Asynchronous AS2 receipts (MDNs posted to the receipt endpoint, and deadline sweeps) by outcome (delivered, warning, dead-lettered, refused, retry-later, duplicate) and reason."},
			[]string{LabelOutcome, LabelReason}),
		pending: prometheus.NewDesc(NameAS2PendingReceipts, "Pending asynchronous AS2 receipts (records awaiting an MDN) left after the last deadline sweep; 0 before the first.", nil, cl),
	}
	for o, reasons := range receiptReasons {
		for _, reason := range reasons {
			r.counts.WithLabelValues(o, reason)
		}
	}
	return r
}

func (r *as2Receipts) describe(ch chan<- *prometheus.Desc) {
	r.counts.Describe(ch)
	ch <- r.pending
}

func (r *as2Receipts) collect(ch chan<- prometheus.Metric) {
	r.counts.Collect(ch)
	ch <- prometheus.MustNewConstMetric(r.pending, prometheus.GaugeValue, float64(r.n.Load()))
}

// ObserveAS2Receipt counts one asynchronous AS2 receipt outcome (one of
// the Receipt* constants) with its reason; an unknown outcome is not
// counted, an unknown reason is counted as "other". Package asyncmdn calls
// it when given the Metrics (asyncmdn.Config.Metrics). It does not block;
// safe for concurrent use; a nil *Metrics does nothing.
func (m *Metrics) ObserveAS2Receipt(outcome, reason string) {
	if m == nil {
		return
	}
	reasons, ok := receiptReasons[outcome]
	if !ok {
		return
	}
	if !slices.Contains(reasons, reason) {
		reason = reasonOther
	}
	m.receipts.counts.WithLabelValues(outcome, reason).Inc()
}

// SetAS2PendingReceipts sets floodgate_as2_async_pending_receipts to n,
// the records pending after a deadline sweep. Safe for concurrent use; a
// nil *Metrics does nothing.
func (m *Metrics) SetAS2PendingReceipts(n int) {
	if m == nil {
		return
	}
	m.receipts.n.Store(int64(max(n, 0)))
}
