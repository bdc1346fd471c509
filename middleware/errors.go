package middleware

import "fmt"

// PanicError is the error a panicking handler is reported with. The call
// counts as a failure and the message is diverted like any retryable
// failure, so its attempts are counted and a message that always panics is
// dead-lettered after the retry queue's MaxAttempts instead of looping.
type PanicError struct {
	// Value is what the handler panicked with.
	Value any
	// Stack is the panicking goroutine's stack.
	Stack []byte
}

// Error returns "handler panicked: " and the panic value.
func (e *PanicError) Error() string { return fmt.Sprintf("handler panicked: %v", e.Value) }
