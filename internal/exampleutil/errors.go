package exampleutil

import "errors"

// ErrInvalidConfig is wrapped by [NewGuard] (through [GuardConfig.Validate])
// when a required field is missing; the message names the field.
var ErrInvalidConfig = errors.New("exampleutil: invalid config")
