package deliver_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/floodgate-go/floodgate/deliver"
)

func TestParkError(t *testing.T) {
	cause := errors.New("certificate expired")
	err := fmt.Errorf("wrapped: %w", &deliver.ParkError{Op: "as2 send", Reason: deliver.ParkAS2Trust,
		Cause: &deliver.Error{Kind: deliver.ErrRetryable, Cause: cause}})
	if !errors.Is(err, deliver.ErrParked) || !errors.Is(err, cause) {
		t.Fatalf("errors.Is(%v, ErrParked / cause) = false", err)
	}
	if p := deliver.AsPark(err); p == nil || p.Reason != deliver.ParkAS2Trust {
		t.Fatalf("AsPark(%v) = %v", err, p)
	}
	if !deliver.IsRetryable(err) || deliver.IsPermanent(err) || deliver.IsWarning(err) {
		t.Fatalf("%v: retryable %v, permanent %v, warning %v; want retryable only", err,
			deliver.IsRetryable(err), deliver.IsPermanent(err), deliver.IsWarning(err))
	}
	if got, want := err.Error(), "wrapped: as2 send: partner parked (as2-trust): retryable failure: certificate expired"; got != want {
		t.Fatalf("Error() = %q, want %q", got, want)
	}
	if deliver.AsPark(nil) != nil || deliver.AsPark(cause) != nil {
		t.Fatal("AsPark of nil or a plain error is not nil")
	}
	if deliver.AsPark(&deliver.Warning{Cause: &deliver.ParkError{}}) != nil {
		t.Fatal("AsPark of a warning is not nil")
	}
}
