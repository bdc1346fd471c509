package deliver_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/floodgate-go/floodgate/deliver"
)

// TestWarningIsSuccess: a warning, however wrapped, is neither retryable nor
// permanent, and keeps its reason and cause.
func TestWarningIsSuccess(t *testing.T) {
	cause := errors.New("no receipt")
	w := deliver.Warn("unconfirmed", cause)
	for _, err := range []error{w, fmt.Errorf("handler: %w", w)} {
		if !deliver.IsWarning(err) || !errors.Is(err, deliver.ErrWarning) {
			t.Errorf("IsWarning(%v) = false", err)
		}
		if deliver.IsRetryable(err) || deliver.IsPermanent(err) {
			t.Errorf("%v: retryable %v, permanent %v; want neither", err, deliver.IsRetryable(err), deliver.IsPermanent(err))
		}
		if !errors.Is(err, cause) {
			t.Errorf("%v does not wrap its cause", err)
		}
		if got := deliver.AsWarning(err); got == nil || got.Reason != "unconfirmed" {
			t.Errorf("AsWarning(%v) = %+v", err, got)
		}
	}
	if deliver.IsWarning(nil) || deliver.IsWarning(cause) {
		t.Error("IsWarning true for nil or a plain error")
	}
	want := "as2 send: delivered with a warning (unconfirmed): no receipt"
	if got := (&deliver.Warning{Op: "as2 send", Reason: "unconfirmed", Cause: cause}).Error(); got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}
