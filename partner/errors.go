package partner

import "errors"

// Sentinel errors. Test for them with [errors.Is].
var (
	// ErrInvalidConfig is wrapped by every error from [Config.Validate],
	// [PartnerConfig.Validate] and [New], and by [Registry.Get] when
	// [Config.Override] produced an invalid configuration; the message
	// names the field and its allowed range.
	ErrInvalidConfig = errors.New("partner: invalid config")

	// ErrPartnerLimit is returned by [Registry.Get] and [Registry.Acquire]
	// for a new partner when the registry holds [Config.MaxPartners]
	// partners and none of them can be evicted. Nothing was attempted: the
	// caller diverts the message as not attempted (reason "partner-limit"),
	// and never dead-letters it for the cap.
	ErrPartnerLimit = errors.New("partner: partner limit reached")

	// ErrBulkheadFull is returned by [Registry.Acquire] and
	// [Partner.Acquire] when the partner already has
	// [PartnerConfig.MaxInFlight] calls in flight. Nothing was attempted
	// and the breaker was not asked: the caller diverts the message as not
	// attempted, so other partners keep flowing.
	ErrBulkheadFull = errors.New("partner: bulkhead full")

	// ErrEvicted is returned by [Partner.Acquire] and [Registry.With] on a
	// partner evicted since it was looked up. [Registry.Acquire] never
	// returns it: it looks the key up again.
	ErrEvicted = errors.New("partner: evicted")

	// ErrNoKey is returned by [Registry.Get] and [Registry.Acquire] for the
	// empty key. Whether a message without a key goes to a default partner
	// or to the dead letters (reason "no-partner") is the caller's choice,
	// made before the registry is asked.
	ErrNoKey = errors.New("partner: empty partner key")

	// ErrKeyTooLong is returned by [Registry.Get] and [Registry.Acquire]
	// for a key longer than [Config.MaxKeyLen] bytes.
	ErrKeyTooLong = errors.New("partner: partner key too long")

	// ErrClosed is returned by [Registry.Get] and [Registry.Acquire] after
	// [Registry.Close].
	ErrClosed = errors.New("partner: registry closed")

	// ErrInvalidToken is returned by [Decode] for a string that is not the
	// token of any key.
	ErrInvalidToken = errors.New("partner: invalid token")

	// ErrHashedToken is returned by [Decode] for a hashed token, whose key
	// cannot be recovered (see [IsHashed]).
	ErrHashedToken = errors.New("partner: hashed token")

	// ErrTokenMismatch is returned by [Verify] when a key is not the key of
	// a token.
	ErrTokenMismatch = errors.New("partner: key does not match token")
)
