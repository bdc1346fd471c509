package events

import "errors"

var (
	// ErrInvalidConfig is wrapped by the error [New] returns for a bad
	// [Config].
	ErrInvalidConfig = errors.New("events: invalid config")

	// ErrNotTransition is returned by [Decode] for a message that is not a
	// transition (wrong floodgate_event metadata or an undecodable body).
	ErrNotTransition = errors.New("events: not a transition message")
)
