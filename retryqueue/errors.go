package retryqueue

import "errors"

var (
	// ErrInvalidConfig is wrapped by [New] and [NewDrainer] when a field is
	// out of range; the message names the field and the allowed range.
	ErrInvalidConfig = errors.New("retryqueue: invalid config")
	// ErrInvalidReason is returned by [Queue.Divert] for a [Reason] that is
	// not one of the Reason constants.
	ErrInvalidReason = errors.New("retryqueue: invalid reason")
	// ErrPublish is wrapped by [Queue.Divert] and [Queue.DeadLetter] when the
	// publish was not confirmed by the broker within the publish timeout.
	// The message may or may not have been stored; the caller must not ack
	// the source message (it nacks it, so it is redelivered).
	ErrPublish = errors.New("retryqueue: publish not confirmed")
	// ErrTooLarge is wrapped, with [ErrPublish], by [Queue.Divert] and
	// [Queue.DeadLetter] when a copy of the message does not fit the retry
	// or dead-letter stream (the server's max_payload or the stream's
	// MaxMsgSize) and could not be dead-lettered with its payload in
	// [Config.PayloadBucket] either (the bucket unreachable). The caller
	// nacks the source.
	ErrTooLarge = errors.New("retryqueue: message too large for the stream")
	// ErrPayloadUnavailable is returned by [Queue.Restore] when a dead
	// letter's payload cannot be read back from the payload bucket: the
	// object is gone (removed by the replay or purge of a duplicate dead
	// letter, or by hand), or no [Config.JetStream] is set.
	ErrPayloadUnavailable = errors.New("retryqueue: payload not restorable")
	// ErrMalformed is the cause recorded (in [MetaLastError]) on a message
	// dead-lettered because its floodgate metadata could not be parsed.
	ErrMalformed = errors.New("retryqueue: malformed metadata")
	// ErrRouteMismatch is the cause recorded on a drained message
	// dead-lettered with [DeadReasonRoute]: its route metadata did not match
	// the subject it was stored under, or the subject was outside the
	// drainer's route.
	ErrRouteMismatch = errors.New("retryqueue: route mismatch")
)

// ErrStreamConfig is returned by [Provision] when an existing retry or
// dead-letter stream has settings under which it would lose messages.
var ErrStreamConfig = errors.New("retryqueue: stream would lose messages")

// ErrPreviousLayout is returned, with [ErrStreamConfig], by [Provision]
// when a retry or dead-letter stream has the subject layout of the previous
// release: its own name as its only subject, shared by every service. Stop
// the previous release's services and drainers, then run [Migrate], which
// moves the stream's messages to route subjects and loses none.
var ErrPreviousLayout = errors.New("retryqueue: stream has the previous release's subject layout")

// ErrRouteConflict is returned by [Drainer.Run] when its durable consumer
// cannot be created as its route needs: a consumer of that name exists
// with another filter subject (another route's), or the work-queue retry
// stream refuses it because another consumer's filter overlaps it (a
// service-wide drainer beside a per-partner one, or an unfiltered consumer
// of the previous release). The message names the setting.
var ErrRouteConflict = errors.New("retryqueue: drain consumer conflicts with another route's")
