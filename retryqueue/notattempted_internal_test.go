package retryqueue

import (
	"testing"
	"time"
)

// The not-attempted delay is a pure function of the refusal count, the
// refusal's hint and the MaxAge deadline: Backoff(n), lengthened by a
// longer hint capped at MaxRetryAfter, cut at the deadline, never negative.
func TestNotAttemptedDelay(t *testing.T) {
	c := Config{MaxAge: time.Hour, MaxRetryAfter: 10 * time.Minute}
	c.setDefaults()
	first := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		n    int
		hint time.Duration
		age  time.Duration // now - first
		want time.Duration
	}{
		{"first refusal", 1, 0, 0, time.Second},
		{"doubling", 4, 0, 0, 8 * time.Second},
		{"backoff cap", 40, 0, 0, 5 * time.Minute},
		{"longer hint", 1, 90 * time.Second, 0, 90 * time.Second},
		{"shorter hint", 3, time.Second, 0, 4 * time.Second},
		{"hint capped at MaxRetryAfter", 1, 3 * time.Hour, 0, 10 * time.Minute},
		{"negative hint", 1, -time.Minute, 0, time.Second},
		{"cut at the MaxAge deadline", 40, 0, 58 * time.Minute, 2 * time.Minute},
		{"hint cut at the deadline", 1, 9 * time.Minute, 55 * time.Minute, 5 * time.Minute},
		{"past the deadline", 1, 0, 2 * time.Hour, 0},
	} {
		if got := c.notAttemptedDelay(tc.n, tc.hint, first.Add(tc.age), first); got != tc.want {
			t.Errorf("%s: notAttemptedDelay(%d, %v) at age %v = %v, want %v", tc.name, tc.n, tc.hint, tc.age, got, tc.want)
		}
	}
}
