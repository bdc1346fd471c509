package as2partner

import "errors"

// Configuration errors, returned (wrapped, naming the field) by
// [Config.Validate] and [New].
var (
	// ErrPhaseDuration: a Phase's Duration is negative, or zero ("forever")
	// on a phase that is not the last one.
	ErrPhaseDuration = errors.New("as2partner: phase duration must be > 0, or 0 (forever) on the last phase only")
	// ErrMinRequests: a Phase's MinRequests is negative.
	ErrMinRequests = errors.New("as2partner: phase MinRequests must not be negative")
	// ErrMode: a Phase's Mode or Excess is not one of the defined constants.
	ErrMode = errors.New("as2partner: unknown mode")
	// ErrCapacity: a Fragile phase's Capacity is not a finite number > 0, or
	// its Burst is negative.
	ErrCapacity = errors.New("as2partner: fragile capacity must be a finite number > 0 messages/s")
	// ErrLatency: a latency is negative.
	ErrLatency = errors.New("as2partner: latency must not be negative")
	// ErrAS2ID: Config.AS2ID is not 1 to 128 printable ASCII characters.
	ErrAS2ID = errors.New("as2partner: AS2 ID must be 1 to 128 printable ASCII characters (RFC 4130 §6.2)")
	// ErrMaxBodySize: Config.MaxBodySize or Config.MaxDecompressedSize is
	// negative.
	ErrMaxBodySize = errors.New("as2partner: max body size must not be negative")
	// ErrKey: Config.Cert and Config.Key are not both set, or Key is not
	// Cert's private key.
	ErrKey = errors.New("as2partner: Cert and Key must be set together, and Key must be Cert's private key")
)
