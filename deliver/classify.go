package deliver

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// IsPermanent reports whether err is marked permanent: the outermost [*Error]
// in its chain has Kind [ErrPermanent], or, when the chain holds no *Error,
// it wraps [ErrPermanent]. It returns false for nil, for a success with a
// warning ([IsWarning]), for context errors and for every error nobody
// classified.
func IsPermanent(err error) bool {
	if err == nil || IsWarning(err) {
		return false
	}
	var de *Error
	if errors.As(err, &de) {
		return de.Kind == ErrPermanent
	}
	return errors.Is(err, ErrPermanent)
}

// IsRetryable reports whether the message should be kept and sent again:
// true for every non-nil error that [IsPermanent] does not mark permanent,
// including context.DeadlineExceeded, context.Canceled and errors nobody
// classified (the safe default: retrying may duplicate, dropping loses).
// It returns false for nil and for a success with a warning ([IsWarning]).
// Compare errors.Is(err, context.DeadlineExceeded) to tell a timeout from
// other retryable failures.
func IsRetryable(err error) bool {
	return err != nil && !IsPermanent(err) && !IsWarning(err)
}

// ClassifyHTTP classifies an HTTP response status, RFC 9110 §15:
//
//   - 2xx: nil.
//   - 5xx, 429 Too Many Requests and 408 Request Timeout: an [*Error] of Kind
//     [ErrRetryable], with RetryAfter parsed from retryAfter (the raw
//     Retry-After header, delay-seconds or HTTP-date, RFC 9110 §10.2.3;
//     empty or unparsable gives 0).
//   - every other status (other 4xx, and 1xx/3xx that reached the caller,
//     which means a misconfigured URL): an *Error of Kind [ErrPermanent].
//
// The returned error has Op "http" and StatusCode set; callers may set Op and
// Cause on it.
func ClassifyHTTP(status int, retryAfter string) error {
	return classifyHTTPAt(status, retryAfter, time.Now())
}

func classifyHTTPAt(status int, retryAfter string, now time.Time) error {
	if status >= 200 && status <= 299 {
		return nil
	}
	e := &Error{Op: "http", StatusCode: status, Kind: ErrPermanent}
	if status >= 500 || status == http.StatusTooManyRequests || status == http.StatusRequestTimeout {
		e.Kind = ErrRetryable
		e.RetryAfter = parseRetryAfter(retryAfter, now)
	}
	if text := http.StatusText(status); text != "" {
		e.Cause = fmt.Errorf("%d %s", status, text)
	}
	return e
}

// maxRetryAfter bounds a Retry-After hint so a bogus header cannot stall a
// message for years.
const maxRetryAfter = 24 * time.Hour

// parseRetryAfter parses a Retry-After value relative to now: delay-seconds
// or an HTTP-date. It returns 0 for empty, unparsable, negative or past
// values, and caps the result at maxRetryAfter.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	var d time.Duration
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs <= 0 {
			return 0
		}
		if secs > int64(maxRetryAfter/time.Second) {
			return maxRetryAfter
		}
		d = time.Duration(secs) * time.Second
	} else if t, err := http.ParseTime(v); err == nil {
		d = t.Sub(now)
	}
	if d <= 0 {
		return 0
	}
	return min(d, maxRetryAfter)
}
