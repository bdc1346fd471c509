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
	// [Config.PayloadBucket] either (no [Config.JetStream], or the bucket
	// unreachable). The caller nacks the source.
	ErrTooLarge = errors.New("retryqueue: message too large for the stream")
	// ErrPayloadUnavailable is returned by [Queue.Restore] when a dead
	// letter's payload cannot be read back from the payload bucket: the
	// object is gone (removed by the replay or purge of a duplicate dead
	// letter, or by hand), or no [Config.JetStream] is set.
	ErrPayloadUnavailable = errors.New("retryqueue: payload not restorable")
	// ErrMalformed is the cause recorded (in [MetaLastError]) on a message
	// dead-lettered because its floodgate metadata could not be parsed.
	ErrMalformed = errors.New("retryqueue: malformed metadata")
)

// ErrStreamConfig is returned by [Provision] when an existing retry or
// dead-letter stream has settings under which it would lose messages.
var ErrStreamConfig = errors.New("retryqueue: stream would lose messages")
