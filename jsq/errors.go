package jsq

import "errors"

// ErrInvalidTopic is returned for a topic that is not a valid JetStream
// stream name.
var ErrInvalidTopic = errors.New("jsq: invalid topic")

// ErrInvalidConfig is wrapped by the constructors' config errors.
var ErrInvalidConfig = errors.New("jsq: invalid config")
