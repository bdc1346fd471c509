package deliver

import (
	"testing"
	"time"
)

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
