package retryqueue

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/floodgate-go/floodgate/internal/redact"
	"github.com/floodgate-go/floodgate/jsq"
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
	// truncated to [Config.MaxErrorLen] bytes (default 512), with the
	// values of sensitive headers it quotes (Authorization, Cookie,
	// Set-Cookie, signature headers, API keys, tokens) replaced by
	// "REDACTED".
	MetaLastError = "floodgate_last_error"
	// MetaNotBefore is the earliest time the drainer may deliver the message
	// again: the time of the failed attempt plus [Config.Backoff], or plus
	// the partner's Retry-After hint when the error carried a longer one
	// ([RetryAfterError], capped at [Config.MaxRetryAfter] and at the
	// [Config.MaxAge] deadline). A [ReasonNotAttempted] diversion sets it
	// the same way from [MetaNotAttempted] instead of the attempt, capped
	// at the MaxAge deadline. Absent when the message was never diverted
	// after a failure or a refusal.
	MetaNotBefore = "floodgate_not_before"
	// MetaNotAttempted is the number of [ReasonNotAttempted] diversions so
	// far (the handler refused the call before the partner was contacted),
	// a decimal integer >= 1. It is the backoff counter of those refusals,
	// separate from [MetaAttempt], which they never increment. Absent when
	// the message was never refused.
	MetaNotAttempted = "floodgate_not_attempted"
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
	// MetaHistory is the message's bounded history, oldest first: a JSON
	// array of [HistoryEntry] (one per diversion, dead-lettering and
	// replay), at most [Config.MaxHistory] entries. When older entries had
	// to be dropped, [MetaHistoryDropped] counts them. Read it with
	// [History].
	MetaHistory = "floodgate_history"
	// MetaHistoryDropped is the number of oldest [MetaHistory] entries
	// dropped to keep it within [Config.MaxHistory], a decimal integer >= 1.
	// Absent when none were dropped.
	MetaHistoryDropped = "floodgate_history_dropped"
	// MetaReplays is the number of times the message was moved back from the
	// dead letters to the retry queue by [Queue.Replay], a decimal integer
	// >= 1. Absent when never replayed.
	MetaReplays = "floodgate_replays"
	// MetaPayloadBucket and MetaPayloadObject reference, on a dead letter
	// with [DeadReasonTooLarge], the JetStream Object Store bucket and the
	// object that hold its payload, byte for byte; the dead letter itself
	// has an empty payload. The object's name is the hex SHA-256 of the
	// UUID, a zero byte and the payload. [Queue.Restore] reads it back.
	MetaPayloadBucket = "floodgate_payload_bucket"
	MetaPayloadObject = "floodgate_payload_object"
	// MetaPayloadSize is the size in bytes of the payload kept in
	// [MetaPayloadObject].
	MetaPayloadSize = "floodgate_payload_size"
	// MetaMetadataObject names the object in [MetaPayloadBucket] that holds
	// the message's own metadata (the keys not starting with "floodgate_",
	// as a JSON object of strings) when even a dead letter without payload
	// could not carry it; the dead letter then has only floodgate's keys.
	// Absent otherwise.
	MetaMetadataObject = "floodgate_metadata_object"
)

// metaPrefix starts every metadata key floodgate sets.
const metaPrefix = "floodgate_"

// payloadRefKeys are the keys only the too-large dead-lettering sets; a
// copy never inherits them from the message it copies, so a message cannot
// forge a reference to another message's payload.
var payloadRefKeys = []string{MetaPayloadBucket, MetaPayloadObject, MetaPayloadSize, MetaMetadataObject}

// HistoryEntry is one event in a message's [MetaHistory].
type HistoryEntry struct {
	// At is when the event happened, from [Config.Clock].
	At time.Time `json:"at"`
	// Event is [EventDiverted], [EventDeadLettered] or [EventReplayed].
	Event string `json:"event"`
	// Reason is the diversion [Reason] or the dead-letter reason; empty for
	// a replay.
	Reason string `json:"reason,omitempty"`
	// Attempt is [MetaAttempt] after the event.
	Attempt int `json:"attempt"`
	// Error is the delivery error that caused the event, if any, truncated
	// to [Config.MaxErrorLen] bytes and with sensitive header values
	// redacted, as [MetaLastError].
	Error string `json:"error,omitempty"`
	// RetryAfter is the Retry-After hint carried by the error of a
	// [ReasonFailure] or [ReasonNotAttempted] diversion ([RetryAfterError]),
	// as given, before [Config.MaxRetryAfter] capped it; 0 (left out of the JSON)
	// when there was none. [MetaNotBefore] holds the delay applied. In the
	// JSON it is in nanoseconds, as encoding/json writes a time.Duration.
	RetryAfter time.Duration `json:"retry_after,omitempty"`
}

// History events ([HistoryEntry.Event]).
const (
	EventDiverted     = "diverted"
	EventDeadLettered = "dead-lettered"
	EventReplayed     = "replayed"
)

// History returns msg's [MetaHistory], oldest first, nil if absent. It
// returns an error if the value is not a JSON array of [HistoryEntry].
func History(msg *message.Message) ([]HistoryEntry, error) {
	v, ok := msg.Metadata[MetaHistory]
	if !ok {
		return nil, nil
	}
	var h []HistoryEntry
	if err := json.Unmarshal([]byte(v), &h); err != nil {
		return nil, fmt.Errorf("%s: %w", MetaHistory, err)
	}
	return h, nil
}

// appendHistory adds e to m's history, keeping at most max entries. A
// history that does not parse is left as it is (the message is then
// malformed anyway and dead-lettered with it).
func appendHistory(m *message.Message, e HistoryEntry, maxEntries int) {
	if _, ok := m.Metadata[MetaHistory]; !ok {
		// The first entry (a live message's first diversion, the hot path
		// during an outage) is encoded by hand: no reflection.
		b := append(encodeEntry(append(make([]byte, 0, 128), '['), e), ']')
		m.Metadata.Set(MetaHistory, string(b))
		return
	}
	h, err := History(m)
	if err != nil {
		return
	}
	h = append(h, e)
	if drop := len(h) - maxEntries; drop > 0 {
		h = h[drop:]
		prev, _ := strconv.Atoi(m.Metadata.Get(MetaHistoryDropped))
		m.Metadata.Set(MetaHistoryDropped, strconv.Itoa(prev+drop))
	}
	b, err := json.Marshal(h)
	if err != nil { // cannot happen: plain strings, ints and times
		return
	}
	m.Metadata.Set(MetaHistory, string(b))
}

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
	// ReasonRamp: the breaker was recovering (half-open, in a ramp or
	// adaptive recovery) and the share it admits had no room for the
	// message.
	ReasonRamp Reason = "ramp"
	// ReasonFailure: delivery was attempted and failed with a retryable
	// error. It increments [MetaAttempt] and sets [MetaNotBefore].
	ReasonFailure Reason = "failure"
	// ReasonOrdering: the message's ordering key still had messages in the
	// backlog ([Queue.Holds]), so it was queued behind them to keep the
	// key's order.
	ReasonOrdering Reason = "ordering"
	// ReasonReplay: the message was moved back from the dead letters by
	// [Queue.Replay].
	ReasonReplay Reason = "replay"
	// ReasonNotAttempted: the breaker admitted the call but the handler
	// refused it before contacting the partner (a local throttle or
	// bulkhead). It increments [MetaNotAttempted], never [MetaAttempt],
	// and sets [MetaNotBefore] from Backoff(not-attempted count) or the
	// refusal's Retry-After hint, so a handler that always refuses cannot
	// loop; [Config.MaxAge] still dead-letters the message.
	ReasonNotAttempted Reason = "not-attempted"
)

// Valid reports whether r is one of the Reason constants.
func (r Reason) Valid() bool {
	switch r {
	case ReasonOpen, ReasonProbeLimit, ReasonRamp, ReasonFailure, ReasonOrdering, ReasonReplay, ReasonNotAttempted:
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
	// DeadReasonTooLarge: no copy of the message fits the retry or
	// dead-letter stream (the server's max_payload or the stream's
	// MaxMsgSize), even with floodgate's metadata compacted. The dead letter
	// keeps the metadata and references the payload, stored in
	// [Config.PayloadBucket] ([MetaPayloadObject]). A message that was being
	// dead-lettered for another reason gets "too-large: " and that reason.
	DeadReasonTooLarge = "too-large"
	// DeadReasonMDNTimeout: a message sent with an asynchronous MDN
	// (RFC 4130 §7.3) got no receipt by its deadline. The partner answered
	// 2xx, so it is never resent by itself: an operator asks the partner
	// and replays it by hand if need be. Set by package
	// deliver/as2/asyncmdn, not by the queue.
	DeadReasonMDNTimeout = "mdn-timeout"
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
	// Counts are bounded so an increment cannot wrap around.
	for _, k := range []string{MetaAttempt, MetaDiversions, MetaNotAttempted} {
		if v, ok := md[k]; ok {
			if n, err := strconv.Atoi(v); err != nil || n < 0 || n > maxCount {
				return fmt.Sprintf("%s %q is not an integer in [0, %d]", k, v, maxCount), true
			}
		}
	}
	if v, ok := md[MetaReason]; ok && !Reason(v).Valid() {
		return fmt.Sprintf("%s %q is not a known reason", MetaReason, v), true
	}
	for _, k := range []string{MetaHistoryDropped, MetaReplays} {
		if v, ok := md[k]; ok {
			if n, err := strconv.Atoi(v); err != nil || n < 0 {
				return fmt.Sprintf("%s %q is not an integer >= 0", k, v), true
			}
		}
	}
	if v, ok := md[MetaHistory]; ok && !canonicalHistory(v) {
		if _, err := History(msg); err != nil {
			return fmt.Sprintf("%s is not a JSON history: %v", MetaHistory, err), true
		}
	}
	now := q.cfg.Clock.Now()
	for _, k := range []string{MetaFirstDivertedAt, MetaDivertedAt, MetaNotBefore, MetaDeadAt} {
		v, ok := md[k]
		if !ok {
			continue
		}
		t, err := time.Parse(TimeFormat, v)
		if err != nil {
			return fmt.Sprintf("%s %q is not an RFC 3339 time", k, v), true
		}
		// A time far in the future would park the message forever
		// (not_before) or keep MaxAge from ever applying. A not_before is
		// at most the last backoff, or a Retry-After hint capped at the
		// MaxAge deadline: bounded by MaxAge whatever MaxRetryAfter was
		// when it was set (a redeploy may lower it).
		limit := now.Add(maxClockSkew)
		if k == MetaNotBefore {
			span := max(q.cfg.Backoff(q.cfg.MaxAttempts), q.cfg.MaxAge)
			limit = now.Add(min(span, maxFuture) + maxClockSkew)
		}
		if t.After(limit) {
			return fmt.Sprintf("%s %q is later than %s", k, v, limit.UTC().Format(TimeFormat)), true
		}
	}
	return "", false
}

// maxCount bounds the counters in the metadata (attempt, diversions).
const maxCount = 1 << 30

// maxClockSkew is how far in the future a time in the metadata may lie,
// for clocks that differ between replicas.
const maxClockSkew = 5 * time.Minute

// maxFuture bounds the span added to now in the not_before check, so a
// huge Backoff or MaxAge cannot overflow it.
const maxFuture = 100 * 365 * 24 * time.Hour

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
func Attempt(msg *message.Message) int { return metaCount(msg, MetaAttempt) }

// NotAttempted returns msg's [MetaNotAttempted], 0 if absent or unparsable.
func NotAttempted(msg *message.Message) int { return metaCount(msg, MetaNotAttempted) }

// metaCount is the counter in msg's metadata key k, 0 if absent or unparsable.
func metaCount(msg *message.Message, k string) int {
	v, ok := msg.Metadata[k]
	if !ok {
		return 0 // no parse: its error would be an allocation per live message
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0
	}
	return n
}

func formatTime(t time.Time) string { return t.UTC().Format(TimeFormat) }

// truncate cuts s to at most n bytes on a rune boundary, marking the cut
// with "...", after replacing the values of sensitive headers and fields
// it quotes (Authorization, Cookie, Set-Cookie, signature headers, API
// keys, tokens, secrets, passwords: [redact.Headers]) by "REDACTED". Every
// error and reason text stored in metadata goes through it: a partner's
// response quoted in an error never carries a credential into the retry
// or dead-letter stream.
func truncate(s string, n int) string {
	if len(s) > 4*n+64 {
		s = cut(s, 4*n+64) // bound the scan; a value cut here is gone anyway
	}
	if s = redact.Headers(s); len(s) <= n {
		return s
	}
	return cut(s, n)
}

// cut cuts s (longer than n bytes) to at most n bytes on a rune boundary,
// marking the cut with "...".
func cut(s string, n int) string {
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

// encodeEntry appends e as JSON, exactly as encoding/json would.
func encodeEntry(b []byte, e HistoryEntry) []byte {
	b = append(b, `{"at":"`...)
	b = e.At.AppendFormat(b, TimeFormat)
	b = append(b, `","event":`...)
	b = appendJSONString(b, e.Event)
	if e.Reason != "" {
		b = append(b, `,"reason":`...)
		b = appendJSONString(b, e.Reason)
	}
	b = append(b, `,"attempt":`...)
	b = strconv.AppendInt(b, int64(e.Attempt), 10)
	if e.Error != "" {
		b = append(b, `,"error":`...)
		b = appendJSONString(b, e.Error)
	}
	if e.RetryAfter != 0 {
		b = append(b, `,"retry_after":`...)
		b = strconv.AppendInt(b, int64(e.RetryAfter), 10)
	}
	return append(b, '}')
}

// appendJSONString appends s as a JSON string; plain printable ASCII is
// copied, anything else is left to encoding/json.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s)
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
