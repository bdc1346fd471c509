package middleware

import (
	"time"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/deliver"
)

// Action is what the middleware did with one message.
type Action int

const (
	// Delivered: the handler succeeded; the router acks the message.
	Delivered Action = iota + 1
	// Diverted: the message is durably in the retry queue.
	Diverted
	// DeadLettered: the message is durably in the dead-letter stream.
	DeadLettered
	// Nacked: the outcome could not be made durable (a diversion or
	// dead-letter publish failed), or the message's context was done
	// before admission (the subscriber gave up on it, or the router is
	// closing); the router nacks and the broker redelivers. With Reason
	// [DeadReasonMaxDeliver] it was the last delivery its consumer allows
	// and even the dead letter failed: the broker will not redeliver it.
	Nacked
	// Deferred: the breaker turned away a message the drainer handed over;
	// it stays where it is in the backlog and comes back after the
	// drainer's poll interval (see [retryqueue.Queue.Divert]). Reason is
	// the diversion reason ("open", "probe-limit", "ramp").
	Deferred
)

// String returns the action's lower-case name.
func (a Action) String() string {
	switch a {
	case Delivered:
		return "delivered"
	case Diverted:
		return "diverted"
	case DeadLettered:
		return "dead-lettered"
	case Nacked:
		return "nacked"
	case Deferred:
		return "deferred"
	}
	return "unknown"
}

// Event describes what happened to one message. It is passed to
// [Config.OnEvent].
type Event struct {
	// UUID is the Watermill message UUID.
	UUID string
	// Partner is the token ([github.com/floodgate-go/floodgate/partner.Token]) of the message's partner: its
	// name in subjects and its metrics label. It is the partner's token in
	// single-partner mode too ([github.com/floodgate-go/floodgate/retryqueue.DefaultPartner] unless the
	// queue names one), and empty only when no partner was chosen (a
	// message without a partner key and no default partner).
	Partner string
	// PartnerKey is the message's partner key, as [Config.PartnerKey]
	// returned it (or the default, or a drained message's route's); empty
	// when Partner is. It is untrusted input: log Partner, not PartnerKey.
	// The one-call constructor feeds it to the partner's drain rate
	// ([github.com/floodgate-go/floodgate/retryqueue.PartnerDrainer.Observe]).
	PartnerKey string
	// Action is what the middleware did.
	Action Action
	// Reason is the diversion reason ("open", "probe-limit", "ramp",
	// "failure", "ordering", "not-attempted": the handler returned
	// [ErrNotAttempted]; in per-partner mode also [ReasonPartnerLimit] and
	// [ReasonBulkhead], diverted as not attempted) or the dead-letter
	// reason (a retryqueue DeadReason constant: "permanent", "malformed",
	// "max-attempts", "max-age", [DeadReasonMetadataTooLarge]; in
	// per-partner mode also
	// [DeadReasonNoPartner], [DeadReasonPartnerKey],
	// [DeadReasonPartnerConfig]; the detail is in Err and in the dead
	// letter's MetaLastError); empty for Delivered. [DeadReasonMaxDeliver]
	// with DeadLettered or Nacked marks a message's last delivery. Always
	// one of these constants (the queue may prefix a dead-letter reason
	// with "too-large: "), so a bounded label value.
	Reason string
	// Admitted is true when the breaker admitted the call and the handler ran.
	Admitted bool
	// Outcome is what the middleware reported to the breaker for an
	// admitted call: OutcomeSuccess for a nil error (the breaker judges a
	// slow one from Latency), OutcomeNeutral when the permit was cancelled
	// (not attempted, shutdown) or the error is permanent, and otherwise
	// the breaker's Classifier's verdict (by default OutcomeFailure; a
	// panic is always one). Meaningless (zero) when Admitted is false.
	Outcome breaker.Outcome
	// Probe is true when the call was a half-open probe.
	Probe bool
	// Latency is how long the handler ran; zero when it did not run.
	Latency time.Duration
	// Err is the handler's error, the reason a malformed message was
	// dead-lettered (wrapping retryqueue.ErrMalformed), or the publish
	// error for Nacked; nil for Delivered (see Warning).
	Err error
	// Warning is set when the message was Delivered with a warning: the
	// handler returned an error holding a [deliver.Warning] (the first in
	// its chain), which the middleware treats as a success (acked, a
	// success for the breaker, never diverted). Its Reason is a short
	// fixed label. nil otherwise.
	Warning *deliver.Warning
}
