package asyncmdn

import "errors"

// Errors of this package, each wrapped with detail.
var (
	// ErrInvalidConfig: a [Config] or [StoreConfig] field is out of range;
	// the message names it.
	ErrInvalidConfig = errors.New("asyncmdn: invalid config")
	// ErrRecordTooLarge: a pending receipt's encoded record is larger
	// than [StoreConfig.MaxValueSize]. [Store.PutPending] wraps it with
	// [as2.ErrPendingTooLarge], so Send reports it permanent.
	ErrRecordTooLarge = errors.New("asyncmdn: pending receipt record too large")
	// ErrClaimed: another replica is resolving the record (a claim not yet
	// expired), or resolved it first.
	ErrClaimed = errors.New("asyncmdn: pending receipt claimed by another replica")
	// ErrMDNTimeout is the error of an [Outcome] whose MDN did not arrive
	// by the record's deadline.
	ErrMDNTimeout = errors.New("asyncmdn: no MDN by the deadline")
	// ErrNoSender: no [Config.Senders] entry has the record's AS2 From and
	// To, so the MDN cannot be judged (a configuration error).
	ErrNoSender = errors.New("asyncmdn: no sender for the receipt's partner")
	// ErrResolved: the pending receipt asked for was resolved already
	// (delivered or dead-lettered) within the bucket's TTL: a duplicate or
	// late MDN. [Store.Get] wraps it together with [as2.ErrUnknownReceipt].
	ErrResolved = errors.New("asyncmdn: pending receipt already resolved")
)
