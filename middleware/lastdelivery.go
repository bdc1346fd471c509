package middleware

import (
	"errors"
	"fmt"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/floodgate-go/floodgate/jsq"
)

// DeadReasonMaxDeliver is the dead-letter reason of a message the
// middleware could not settle otherwise on the last delivery its source
// consumer allows (a finite MaxDeliver, see [jsq.Delivery]): the diversion
// or dead-letter publish failed, or the message's context was done. A nack
// would make the broker drop it silently, so it is dead-lettered instead.
const DeadReasonMaxDeliver = "max-deliver"

// lastDelivery settles a message the middleware was about to nack (op says
// why: "divert", "dead-letter", or "admit" for a context done before
// admission) when the broker will not redeliver it: it dead-letters the
// message with [DeadReasonMaxDeliver] and returns nil (the router acks).
// When even that publish fails it logs the message's stream and sequence,
// emits Nacked with Reason [DeadReasonMaxDeliver], and returns the error:
// the message is then left to the broker, which gives up on it (it stays in
// a limits-retention source stream at that sequence). handled is false when
// this is not a last delivery; the caller nacks as usual. The dead letter
// takes the route of partner key key.
func (g *guard) lastDelivery(msg *message.Message, ev Event, key, op string, err error) (result error, handled bool) {
	d, ok := jsq.DeliveryFrom(msg.Context())
	if !ok || !d.Last() {
		return nil, false
	}
	cause := fmt.Errorf("%s failed on delivery %d of MaxDeliver %d: %w", op, d.Count, d.MaxDeliver, err)
	dlErr := g.cfg.Queue.DeadLetterTo(msg.Context(), msg, key, DeadReasonMaxDeliver, cause)
	if dlErr == nil {
		ev.Action, ev.Reason = DeadLettered, DeadReasonMaxDeliver
		if ev.Err == nil {
			ev.Err = cause
		}
		g.emit(ev)
		return nil, true
	}
	err = errors.Join(cause, dlErr)
	g.cfg.Logger.Error("floodgate: message on its last delivery could not be dead-lettered; the broker will not redeliver it", err,
		watermill.LogFields{"message_uuid": msg.UUID, "stream": d.Stream, "stream_seq": d.StreamSeq, "consumer": d.Consumer})
	ev.Action, ev.Reason, ev.Err = Nacked, DeadReasonMaxDeliver, err
	g.emit(ev)
	return fmt.Errorf("floodgate: message %s lost by the consumer (MaxDeliver %d): %w", msg.UUID, d.MaxDeliver, err), true
}
