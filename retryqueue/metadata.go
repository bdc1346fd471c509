package retryqueue

import (
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/floodgate-go/floodgate/internal/jsq"
)

// Metadata keys floodgate adds to diverted and dead-lettered messages. They
// travel as NATS headers. Times are RFC 3339 with nanoseconds, in UTC
// ([TimeFormat]).
const (
	// MetaAttempt is the number of failed delivery attempts so far, a decimal
	// integer >= 0. Only a [ReasonFailure] diversion increments it: a message
	// rejected by the breaker was not attempted.
	MetaAttempt = "floodgate_attempt"
	// MetaReason is the [Reason] of the latest diversion.
	MetaReason = "floodgate_reason"
	// MetaOriginalTopic is the topic the message was first consumed from.
	MetaOriginalTopic = "floodgate_original_topic"
	// MetaFirstDivertedAt is the time of the first diversion; [Config.MaxAge]
	// counts from it.
	MetaFirstDivertedAt = "floodgate_first_diverted_at"
	// MetaDivertedAt is the time of the latest diversion.
	MetaDivertedAt = "floodgate_diverted_at"
	// MetaDiversions is the number of diversions so far, for any reason, a
	// decimal integer >= 1.
	MetaDiversions = "floodgate_diversions"
	// MetaLastError is the error of the latest failed delivery attempt,
	// truncated to [Config.MaxErrorLen] bytes.
	MetaLastError = "floodgate_last_error"
	// MetaNotBefore is the earliest time the drainer may deliver the message
	// again: the time of the failed attempt plus [Config.Backoff]. Absent
	// when the message was never diverted after a failure.
	MetaNotBefore = "floodgate_not_before"
	// MetaDeadReason is why a message was dead-lettered: one of the
	// DeadReason constants or the reason given to [Queue.DeadLetter].
	MetaDeadReason = "floodgate_dead_reason"
	// MetaDeadAt is the time a message was dead-lettered.
	MetaDeadAt = "floodgate_dead_at"
	// MetaDroppedKeys lists (Go-quoted, comma-separated) metadata keys that
	// could not travel as NATS headers and were left out of a dead letter.
	MetaDroppedKeys = "floodgate_dropped_metadata"
	// MetaMalformed is set by the JetStream unmarshaler on a message whose
	// headers could not be mapped to metadata faithfully (a header with
	// several values); its value says why. [Queue.Malformed] reports it.
	MetaMalformed = jsq.MetaMalformed
)

// TimeFormat is the layout of the time metadata values.
const TimeFormat = time.RFC3339Nano

// Reason says why a message was diverted to the retry queue.
type Reason string

// Reasons for a diversion.
const (
	// ReasonOpen: the breaker was open and rejected the message.
	ReasonOpen Reason = "open"
	// ReasonProbeLimit: the breaker was half-open and all probe slots were
	// taken.
	ReasonProbeLimit Reason = "probe-limit"
	// ReasonRamp: the breaker was closed but the ramp after recovery had no
	// room for the message.
	ReasonRamp Reason = "ramp"
	// ReasonFailure: delivery was attempted and failed with a retryable
	// error. It increments [MetaAttempt] and sets [MetaNotBefore].
	ReasonFailure Reason = "failure"
)

// Valid reports whether r is one of the Reason constants.
func (r Reason) Valid() bool {
	switch r {
	case ReasonOpen, ReasonProbeLimit, ReasonRamp, ReasonFailure:
		return true
	}
	return false
}

// Reasons for dead-lettering set by the queue itself ([MetaDeadReason]).
const (
	// DeadReasonMaxAttempts: [Config.MaxAttempts] delivery attempts failed.
	DeadReasonMaxAttempts = "max-attempts"
	// DeadReasonMaxAge: [Config.MaxAge] passed since the first diversion.
	DeadReasonMaxAge = "max-age"
	// DeadReasonMalformed: the floodgate metadata could not be parsed, see
	// [Queue.Malformed].
	DeadReasonMalformed = "malformed"
	// DeadReasonPermanent is the conventional reason for a permanent
	// delivery error (the caller passes it to [Queue.DeadLetter]).
	DeadReasonPermanent = "permanent"
)

// Malformed reports whether msg's metadata cannot be trusted by the queue,
// and why: the unmarshaler marked it ([MetaMalformed]); a floodgate key has
// a value that does not parse (attempt or diversions not a decimal integer
// in range, a time not in [TimeFormat], an unknown reason); or a metadata
// key cannot be a NATS header. Such a message must be dead-lettered, never
// diverted again, so it cannot loop; [Queue.Divert] does so itself.
func (q *Queue) Malformed(msg *message.Message) (reason string, bad bool) {
	md := msg.Metadata
	if v, ok := md[MetaMalformed]; ok {
		return fmt.Sprintf("%s: %s", MetaMalformed, v), true
	}
	for k := range md {
		if !jsq.ValidHeaderKey(k) {
			return fmt.Sprintf("metadata key %q cannot be a NATS header", k), true
		}
	}
	if v, ok := md[MetaAttempt]; ok {
		if n, err := strconv.Atoi(v); err != nil || n < 0 {
			return fmt.Sprintf("%s %q is not an integer >= 0", MetaAttempt, v), true
		}
	}
	if v, ok := md[MetaDiversions]; ok {
		if n, err := strconv.Atoi(v); err != nil || n < 0 {
			return fmt.Sprintf("%s %q is not an integer >= 0", MetaDiversions, v), true
		}
	}
	if v, ok := md[MetaReason]; ok && !Reason(v).Valid() {
		return fmt.Sprintf("%s %q is not a known reason", MetaReason, v), true
	}
	for _, k := range []string{MetaFirstDivertedAt, MetaDivertedAt, MetaNotBefore} {
		if v, ok := md[k]; ok {
			if _, err := time.Parse(TimeFormat, v); err != nil {
				return fmt.Sprintf("%s %q is not an RFC 3339 time", k, v), true
			}
		}
	}
	return "", false
}

// NotBefore returns the time in msg's [MetaNotBefore], and false if it is
// absent or does not parse.
func NotBefore(msg *message.Message) (time.Time, bool) {
	v, ok := msg.Metadata[MetaNotBefore]
	if !ok {
		return time.Time{}, false
	}
	t, err := time.Parse(TimeFormat, v)
	return t, err == nil
}

// Attempt returns msg's [MetaAttempt], 0 if absent or unparsable.
func Attempt(msg *message.Message) int {
	n, err := strconv.Atoi(msg.Metadata.Get(MetaAttempt))
	if err != nil || n < 0 {
		return 0
	}
	return n
}

func formatTime(t time.Time) string { return t.UTC().Format(TimeFormat) }

// truncate cuts s to at most n bytes on a rune boundary, marking the cut
// with "...".
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const ell = "..."
	if n <= len(ell) {
		return s[:n]
	}
	cut := n - len(ell)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + ell
}
