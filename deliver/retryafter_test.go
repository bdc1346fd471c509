package deliver

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/retryqueue"
)

// *Error is the retry queue's RetryAfterError, so the queue honours the
// partner's Retry-After without importing this package.
var _ retryqueue.RetryAfterError = (*Error)(nil)

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2025, 3, 14, 9, 30, 0, 0, time.UTC)
	tests := []struct {
		in   string
		want time.Duration
	}{
		{"", 0},
		{"  ", 0},
		{"0", 0},
		{"-5", 0},
		{"1", time.Second},
		{" 30 ", 30 * time.Second},
		{"soon", 0},
		{"1.5", 0},
		{"99999999999", maxRetryAfter},
		{"Fri, 14 Mar 2025 09:30:45 GMT", 45 * time.Second},
		{"Friday, 14-Mar-25 09:31:00 GMT", time.Minute}, // RFC 850 form
		{"Fri Mar 14 09:32:00 2025", 2 * time.Minute},   // asctime form
		{"Fri, 14 Mar 2025 09:29:00 GMT", 0},            // in the past
		{"Sat, 14 Mar 2026 09:30:00 GMT", maxRetryAfter},
	}
	for _, tt := range tests {
		if got := parseRetryAfter(tt.in, now); got != tt.want {
			t.Errorf("parseRetryAfter(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestClassifyHTTPAtRetryAfterDate(t *testing.T) {
	now := time.Date(2025, 3, 14, 9, 30, 0, 0, time.UTC)
	err := classifyHTTPAt(503, "Fri, 14 Mar 2025 09:30:10 GMT", now)
	de, ok := err.(*Error)
	if !ok || de.RetryAfter != 10*time.Second || de.Kind != ErrRetryable {
		t.Fatalf("classifyHTTPAt = %#v", err)
	}
}

// The retry queue finds the hint with errors.As through the handler's
// wrapping; an *Error without a hint, and a nil *Error, report 0.
func TestErrorRetryAfterDelay(t *testing.T) {
	err := fmt.Errorf("handler: %w", classifyHTTPAt(429, "60", time.Now()))
	var ra retryqueue.RetryAfterError
	if !errors.As(err, &ra) || ra.RetryAfterDelay() != time.Minute {
		t.Fatalf("errors.As(%v) found %v, want a RetryAfterError with 1m", err, ra)
	}
	if d := (&Error{Kind: ErrRetryable, StatusCode: 503}).RetryAfterDelay(); d != 0 {
		t.Errorf("no hint: RetryAfterDelay = %v, want 0", d)
	}
	if d := (*Error)(nil).RetryAfterDelay(); d != 0 {
		t.Errorf("nil: RetryAfterDelay = %v, want 0", d)
	}
}
