package jsq

import "time"

// ExponentialDelay gives the redelivery delay after a nack: Base·2^(n-1)
// for a nack on the n-th delivery, capped at Max. Its WaitTime method is the
// default [SubscriberConfig.NakDelay] and also satisfies watermill-nats'
// Delay interface; it never returns that interface's terminate signal, so a
// nacked message is never dropped. The zero value uses Base 500ms, Max 30s.
type ExponentialDelay struct {
	// Base is the delay after the first delivery. Optional. Default 500ms.
	Base time.Duration
	// Max caps the delay. Optional. Default 30s.
	Max time.Duration
}

// WaitTime returns the delay before redelivering a message nacked on its
// deliveries-th delivery (1 for the first).
func (d ExponentialDelay) WaitTime(deliveries uint64) time.Duration {
	base, maxd := d.Base, d.Max
	if base <= 0 {
		base = 500 * time.Millisecond
	}
	if maxd <= 0 {
		maxd = 30 * time.Second
	}
	w := base
	for i := uint64(1); i < deliveries && w < maxd; i++ {
		w *= 2
	}
	return min(w, maxd)
}
