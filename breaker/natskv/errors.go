package natskv

import "errors"

var (
	// ErrInvalidName is returned for a breaker name that is not a valid KV
	// key token: it must match [-_=A-Za-z0-9]+ (no dots, no spaces).
	ErrInvalidName = errors.New("natskv: invalid breaker name")

	// ErrInvalidConfig is wrapped by the errors of [Config.Validate] and
	// [New].
	ErrInvalidConfig = errors.New("natskv: invalid config")

	// ErrCorrupt is returned by Load for a state that is not valid JSON.
	ErrCorrupt = errors.New("natskv: corrupt shared state")
)
