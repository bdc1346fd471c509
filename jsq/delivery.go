package jsq

import "context"

// Delivery describes one delivery of a message by a [Subscriber]: where the
// message is stored, how often the consumer has delivered it, and how often
// it will at most. The subscriber puts it in the message's context
// ([DeliveryFrom]), so a handler or middleware can tell the last delivery,
// after which the server gives up on the message without a trace in any
// stream.
type Delivery struct {
	// Stream and Consumer name the stream and the durable consumer.
	Stream, Consumer string
	// StreamSeq is the message's sequence in Stream: with it an operator
	// can still read a message the consumer gave up on (limits retention
	// keeps it in the stream).
	StreamSeq uint64
	// Count is the delivery count: 1 on the first delivery.
	Count uint64
	// MaxDeliver is the consumer's MaxDeliver: -1 for unlimited (jsq's
	// default), else the finite limit ([SubscriberConfig.MaxDeliver]).
	MaxDeliver int
}

// Last reports whether this is the last delivery the consumer makes: its
// MaxDeliver is finite and reached. A message nacked, or not acked within
// AckWait, on its last delivery is never delivered again.
func (d Delivery) Last() bool { return d.MaxDeliver > 0 && d.Count >= uint64(d.MaxDeliver) }

type deliveryKey struct{}

// WithDelivery returns a child of ctx carrying d. The [Subscriber] calls it
// for every message; other transports (and tests) may too.
func WithDelivery(ctx context.Context, d Delivery) context.Context {
	return context.WithValue(ctx, deliveryKey{}, d)
}

// DeliveryFrom returns the [Delivery] in ctx and true, or the zero Delivery
// and false when ctx carries none (a nil ctx, a message not delivered by a
// [Subscriber]). It is safe for concurrent use.
func DeliveryFrom(ctx context.Context) (Delivery, bool) {
	if ctx == nil {
		return Delivery{}, false
	}
	d, ok := ctx.Value(deliveryKey{}).(Delivery)
	return d, ok
}
