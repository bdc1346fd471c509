package deliver_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/deliver"
)

func TestClassifyHTTP(t *testing.T) {
	tests := []struct {
		status     int
		retryAfter string
		want       error // nil, ErrRetryable or ErrPermanent
		wantAfter  time.Duration
	}{
		{200, "", nil, 0},
		{202, "", nil, 0},
		{299, "", nil, 0},
		{500, "", deliver.ErrRetryable, 0},
		{502, "", deliver.ErrRetryable, 0},
		{503, "120", deliver.ErrRetryable, 120 * time.Second},
		{504, "junk", deliver.ErrRetryable, 0},
		{429, "7", deliver.ErrRetryable, 7 * time.Second},
		{408, "", deliver.ErrRetryable, 0},
		{400, "", deliver.ErrPermanent, 0},
		{401, "", deliver.ErrPermanent, 0},
		{403, "", deliver.ErrPermanent, 0},
		{404, "", deliver.ErrPermanent, 0},
		{413, "30", deliver.ErrPermanent, 0}, // Retry-After ignored on permanent
		{415, "", deliver.ErrPermanent, 0},
		{301, "", deliver.ErrPermanent, 0},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.status), func(t *testing.T) {
			err := deliver.ClassifyHTTP(tt.status, tt.retryAfter)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("ClassifyHTTP(%d) = %v, want nil", tt.status, err)
				}
				return
			}
			if !errors.Is(err, tt.want) {
				t.Fatalf("ClassifyHTTP(%d) = %v, want Is %v", tt.status, err, tt.want)
			}
			var de *deliver.Error
			if !errors.As(err, &de) {
				t.Fatalf("ClassifyHTTP(%d) = %T, want *deliver.Error", tt.status, err)
			}
			if de.StatusCode != tt.status {
				t.Errorf("StatusCode = %d, want %d", de.StatusCode, tt.status)
			}
			if de.RetryAfter != tt.wantAfter {
				t.Errorf("RetryAfter = %v, want %v", de.RetryAfter, tt.wantAfter)
			}
			if got := deliver.IsPermanent(err); got != (tt.want == deliver.ErrPermanent) {
				t.Errorf("IsPermanent = %v", got)
			}
			if got := deliver.IsRetryable(err); got != (tt.want == deliver.ErrRetryable) {
				t.Errorf("IsRetryable = %v", got)
			}
		})
	}
}

func TestClassifyHTTPRetryAfterDate(t *testing.T) {
	at := time.Now().Add(90 * time.Second).UTC().Format("Mon, 02 Jan 2006 15:04:05 GMT")
	var de *deliver.Error
	if !errors.As(deliver.ClassifyHTTP(503, at), &de) {
		t.Fatal("want *deliver.Error")
	}
	// The date has one-second resolution and the clock moves on: allow 80..90 s.
	if de.RetryAfter < 80*time.Second || de.RetryAfter > 90*time.Second {
		t.Fatalf("RetryAfter = %v, want about 90s", de.RetryAfter)
	}
}

func TestIsPermanentIsRetryable(t *testing.T) {
	cause := io.ErrUnexpectedEOF
	perm := &deliver.Error{Kind: deliver.ErrPermanent, Op: "as2 send", Cause: cause}
	retr := &deliver.Error{Kind: deliver.ErrRetryable, Op: "as2 send", Cause: cause}
	netErr := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}
	tests := []struct {
		name          string
		err           error
		perm, retries bool
	}{
		{"nil", nil, false, false},
		{"permanent", perm, true, false},
		{"wrapped permanent", fmt.Errorf("handler: %w", perm), true, false},
		{"retryable", retr, false, true},
		{"wrapped retryable", fmt.Errorf("handler: %w", retr), false, true},
		{"bare ErrPermanent", fmt.Errorf("bad payload: %w", deliver.ErrPermanent), true, false},
		{"unknown error", errors.New("boom"), false, true},
		{"network error", netErr, false, true},
		{"deadline", context.DeadlineExceeded, false, true},
		{"canceled", fmt.Errorf("send: %w", context.Canceled), false, true},
		{"retryable wrapping deadline", &deliver.Error{Kind: deliver.ErrRetryable, Cause: context.DeadlineExceeded}, false, true},
		{"zero kind", &deliver.Error{Op: "x"}, false, true},
		// The outermost classification wins.
		{"retryable around permanent", &deliver.Error{Kind: deliver.ErrRetryable, Cause: perm}, false, true},
		{"permanent around retryable", &deliver.Error{Kind: deliver.ErrPermanent, Cause: retr}, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := deliver.IsPermanent(tt.err); got != tt.perm {
				t.Errorf("IsPermanent = %v, want %v", got, tt.perm)
			}
			if got := deliver.IsRetryable(tt.err); got != tt.retries {
				t.Errorf("IsRetryable = %v, want %v", got, tt.retries)
			}
		})
	}
}

func TestErrorIsAndUnwrap(t *testing.T) {
	cause := context.DeadlineExceeded
	err := fmt.Errorf("deliver: %w", &deliver.Error{Kind: deliver.ErrRetryable, Op: "as2 send", Cause: cause})
	if !errors.Is(err, deliver.ErrRetryable) {
		t.Error("errors.Is(err, ErrRetryable) = false")
	}
	if errors.Is(err, deliver.ErrPermanent) {
		t.Error("errors.Is(err, ErrPermanent) = true")
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Error("errors.Is(err, cause) = false")
	}
}

func TestErrorMessage(t *testing.T) {
	err := &deliver.Error{
		Kind:        deliver.ErrPermanent,
		Op:          "as2 send",
		StatusCode:  200,
		Disposition: "automatic-action/MDN-sent-automatically; failed/failure: unsupported format",
		Cause:       errors.New("as2: MDN reports failure"),
	}
	want := `as2 send: permanent failure (HTTP 200, disposition "automatic-action/MDN-sent-automatically; failed/failure: unsupported format"): as2: MDN reports failure`
	if got := err.Error(); got != want {
		t.Errorf("Error() =\n%s\nwant\n%s", got, want)
	}
	r := &deliver.Error{Kind: deliver.ErrRetryable, StatusCode: 503, RetryAfter: 5 * time.Second}
	if got := r.Error(); !strings.Contains(got, "retryable failure (HTTP 503, retry after 5s)") {
		t.Errorf("Error() = %q", got)
	}
}
