package sim

import (
	"errors"
	"fmt"
)

// Sentinel errors. Test for them with [errors.Is].
var (
	// ErrInvalidScenario is wrapped by every error from [Scenario.Validate]
	// (as a [*FieldError]) and from the functions that run a scenario.
	ErrInvalidScenario = errors.New("sim: invalid scenario")

	// ErrUnknownStrategy is returned (wrapped) for a strategy name that is not
	// one of [StrategyNames].
	ErrUnknownStrategy = errors.New("sim: unknown strategy")

	// ErrUnknownPreset is returned (wrapped) by [Preset] for a name that is not
	// one of [PresetNames].
	ErrUnknownPreset = errors.New("sim: unknown preset")
)

// FieldError is returned (wrapped) for an invalid [Scenario] setting. It
// matches [ErrInvalidScenario] with [errors.Is].
type FieldError struct {
	// Field is the Scenario field at fault, e.g. "Rate" or "Healthy.P99".
	Field string
	// Value is its value.
	Value any
	// Allowed describes the allowed range.
	Allowed string
}

// Error names the field, its value and the allowed range.
func (e *FieldError) Error() string {
	return fmt.Sprintf("sim: invalid scenario: %s = %v, allowed %s", e.Field, e.Value, e.Allowed)
}

// Is reports whether target is ErrInvalidScenario.
func (e *FieldError) Is(target error) bool { return target == ErrInvalidScenario }

func invalid(field string, value any, allowed string) error {
	return &FieldError{Field: field, Value: value, Allowed: allowed}
}
