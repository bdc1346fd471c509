package metrics

import "errors"

var (
	// ErrInvalidOptions is wrapped by the error [New] returns for bad
	// [Options].
	ErrInvalidOptions = errors.New("metrics: invalid options")

	// ErrAlreadyWatching is returned by the Watch methods when the
	// [Metrics] already watches a source of that kind: one Metrics describes
	// one breaker, its queue and its drainer.
	ErrAlreadyWatching = errors.New("metrics: already watching a source of this kind")
)
