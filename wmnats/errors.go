package wmnats

import "errors"

// ErrInvalidConfig is wrapped by [NewSubscriber]'s and [Config.Validate]'s
// errors, which name the field and its allowed range.
var ErrInvalidConfig = errors.New("wmnats: invalid config")

// ErrClosed is returned by [Subscriber.Subscribe] once Close has begun.
var ErrClosed = errors.New("wmnats: subscriber closed")
