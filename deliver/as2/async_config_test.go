package as2_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/floodgate-go/floodgate/deliver/as2"
)

// configOnlyStore satisfies Config.Receipts for validation tests: NewSender
// never calls it.
type configOnlyStore struct{}

func (configOnlyStore) MaxPayload() int    { return 1 << 20 }
func (configOnlyStore) MaxRecordSize() int { return 1 << 20 }
func (configOnlyStore) PutPending(context.Context, *as2.PendingReceipt) error {
	return errors.New("not a store")
}

// Async MDNs with neither MDNCert nor TrustRoots are refused unless
// AllowUnsignedAsyncMDN says the risk is taken.
func TestAsyncUnsignedNeedsAllowUnsignedAsyncMDN(t *testing.T) {
	pki := testPKI(t)
	cfg := pki.SenderConfig("https://as2.example.com/as2")
	cfg.MDNMode, cfg.AsyncMDNURL, cfg.Receipts = as2.MDNAsync, "https://us.example.com/mdn", configOnlyStore{}
	if _, err := as2.NewSender(cfg); err != nil {
		t.Fatalf("async with MDNCert: %v", err)
	}
	cfg.MDNCert, cfg.TrustRoots = nil, nil
	_, err := as2.NewSender(cfg)
	if !errors.Is(err, as2.ErrUnsignedAsyncMDN) || !strings.Contains(err.Error(), "Config.AllowUnsignedAsyncMDN") ||
		!strings.Contains(err.Error(), "Config.MDNCert") {
		t.Fatalf("async unsigned: %v; want ErrUnsignedAsyncMDN naming MDNCert and AllowUnsignedAsyncMDN", err)
	}
	cfg.AllowUnsignedAsyncMDN = true
	if _, err := as2.NewSender(cfg); err != nil {
		t.Fatalf("async unsigned, allowed: %v", err)
	}
}

// A bad AsyncMDNURL is reported redacted, like Config.URL.
func TestAsyncMDNURLErrorRedacted(t *testing.T) {
	pki := testPKI(t)
	cfg := pki.SenderConfig("https://as2.example.com/as2")
	cfg.MDNMode, cfg.Receipts = as2.MDNAsync, configOnlyStore{}
	cfg.AsyncMDNURL = "https://user:PASSWORD@mdn.example.com/mdn?token=QUERYSECRET,x"
	_, err := as2.NewSender(cfg)
	if !errors.Is(err, as2.ErrURL) || !strings.Contains(err.Error(), "Config.AsyncMDNURL") {
		t.Fatalf("NewSender = %v; want ErrURL naming Config.AsyncMDNURL", err)
	}
	if s := err.Error(); strings.Contains(s, "PASSWORD") || strings.Contains(s, "QUERYSECRET") {
		t.Fatalf("the error shows the URL's secrets: %s", s)
	}
}
