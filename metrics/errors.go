package metrics

import "errors"

var (
	// ErrInvalidOptions is wrapped by the error [New] returns for bad
	// [Options].
	ErrInvalidOptions = errors.New("metrics: invalid options")

	// ErrAlreadyWatching is returned by the Watch methods when the
	// [Metrics] already watches that source: a second registry, a breaker
	// of a partner already watched, a registry beside single breakers (or
	// the reverse), or a second queue.
	ErrAlreadyWatching = errors.New("metrics: already watching this source")
)
