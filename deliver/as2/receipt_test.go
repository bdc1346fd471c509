package as2_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/deliver"
	"github.com/floodgate-go/floodgate/deliver/as2"
	"github.com/floodgate-go/floodgate/deliver/as2/as2partner"
)

// receiptPair starts an as2partner from the test PKI's partner profile
// (modified by pmod), behind a handler that records the last request's
// headers, and returns it with a sender from the matching profile
// (modified by smod).
func receiptPair(t *testing.T, pmod func(*as2partner.Config), smod func(*as2.Config)) (*as2partner.Partner, *as2.Sender, func() http.Header) {
	t.Helper()
	pki := testPKI(t)
	pcfg := pki.PartnerConfig()
	if pmod != nil {
		pmod(&pcfg)
	}
	partner, err := as2partner.New(pcfg)
	if err != nil {
		t.Fatal(err)
	}
	var last http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		last = r.Header.Clone()
		partner.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	cfg := pki.SenderConfig(srv.URL)
	cfg.Timeout = 5 * time.Second
	if smod != nil {
		smod(&cfg)
	}
	s, err := as2.NewSender(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return partner, s, func() http.Header { return last }
}

// sendOnce sends the test payload and checks that the partner processed
// it exactly once.
func sendOnce(t *testing.T, partner *as2partner.Partner, s *as2.Sender) (*as2.MDN, error) {
	t.Helper()
	mdn, err := s.Send(context.Background(), testID, payload(t))
	if n := partner.Received()[as2.MessageID(testID, as2.DefaultMessageIDDomain)]; n != 1 {
		t.Errorf("partner processed the message %d times, want 1", n)
	}
	return mdn, err
}

// wantWarning checks that err is a delivery with a warning of reason,
// wrapping every one of causes: neither retryable nor permanent.
func wantWarning(t *testing.T, err error, reason string, causes ...error) {
	t.Helper()
	w := deliver.AsWarning(err)
	if w == nil || w.Reason != reason {
		t.Fatalf("Send error %v; want a deliver.Warning with reason %q", err, reason)
	}
	if deliver.IsRetryable(err) || deliver.IsPermanent(err) {
		t.Errorf("Send error %v is retryable or permanent; a warning is a success", err)
	}
	for _, c := range causes {
		if !errors.Is(err, c) {
			t.Errorf("Send error %v; want Is %v", err, c)
		}
	}
}

// wantPermanent checks that err is a permanent failure wrapping cause.
func wantPermanent(t *testing.T, err error, cause error) {
	t.Helper()
	if !deliver.IsPermanent(err) || deliver.IsWarning(err) || !errors.Is(err, cause) {
		t.Fatalf("Send error %v; want permanent, Is %v", err, cause)
	}
}

// RFC 3798 §2.2, RFC 4130 §7.3: a signed receipt asked for as optional may
// come back unsigned; a processed one is delivered with a warning. Asked
// for as required (Config.RequireSignedMDN), it is a permanent failure.
func TestReceiptUnsignedMDN(t *testing.T) {
	unsigned := func(c *as2partner.Config) { c.UnsignedMDN = true }
	t.Run("optional", func(t *testing.T) {
		partner, s, hdr := receiptPair(t, unsigned, nil)
		mdn, err := sendOnce(t, partner, s)
		wantWarning(t, err, deliver.WarnMDNUnsigned, as2.ErrMDNUnsigned)
		if mdn == nil || !mdn.Processed() || mdn.Signed {
			t.Errorf("MDN %+v, want the unsigned processed MDN", mdn)
		}
		if o := hdr().Get("Disposition-Notification-Options"); !strings.Contains(o, "signed-receipt-protocol=optional") {
			t.Errorf("Disposition-Notification-Options %q, want signed-receipt-protocol=optional", o)
		}
	})
	t.Run("required", func(t *testing.T) {
		partner, s, hdr := receiptPair(t, unsigned, func(c *as2.Config) { c.RequireSignedMDN = true })
		_, err := sendOnce(t, partner, s)
		wantPermanent(t, err, as2.ErrMDNUnsigned)
		o := hdr().Get("Disposition-Notification-Options")
		if !strings.Contains(o, "signed-receipt-protocol=required, pkcs7-signature") || !strings.Contains(o, "signed-receipt-micalg=required, sha-256") {
			t.Errorf("Disposition-Notification-Options %q, want both parameters required", o)
		}
	})
	t.Run("required and signed", func(t *testing.T) {
		partner, s, _ := receiptPair(t, nil, func(c *as2.Config) { c.RequireSignedMDN = true })
		if mdn, err := sendOnce(t, partner, s); err != nil || !mdn.Verified {
			t.Fatalf("Send = %+v, %v; want a verified receipt", mdn, err)
		}
	})
}

// An encrypt-only message whose signed MDN omits Received-Content-MIC (as
// pyas2lib's does) is delivered with a warning, unless the profile
// requires the MIC.
func TestReceiptMissingMIC(t *testing.T) {
	omit := func(c *as2partner.Config) { c.OmitMIC, c.RequireSigned, c.SenderCert = true, false, nil }
	encryptOnly := func(c *as2.Config) { c.SigningCert, c.SigningKey = nil, nil }
	t.Run("warning", func(t *testing.T) {
		partner, s, _ := receiptPair(t, omit, encryptOnly)
		mdn, err := sendOnce(t, partner, s)
		wantWarning(t, err, deliver.WarnMICMissing, as2.ErrMICMissing)
		if mdn == nil || !mdn.Verified || mdn.ReceivedContentMIC != "" {
			t.Errorf("MDN %+v, want the verified MDN without MIC", mdn)
		}
	})
	t.Run("required", func(t *testing.T) {
		partner, s, _ := receiptPair(t, omit, func(c *as2.Config) { encryptOnly(c); c.RequireMIC = true })
		_, err := sendOnce(t, partner, s)
		wantPermanent(t, err, as2.ErrMICMissing)
	})
}

// A processed MDN whose MIC does not match is a permanent failure by
// default (dead-lettered, never resent by itself); Config.WarnOnMICMismatch
// makes it a warning for a partner known to compute it differently.
func TestReceiptMICMismatch(t *testing.T) {
	wrong := func(c *as2partner.Config) { c.WrongMIC = true }
	t.Run("default", func(t *testing.T) {
		partner, s, _ := receiptPair(t, wrong, nil)
		_, err := sendOnce(t, partner, s)
		wantPermanent(t, err, as2.ErrMICMismatch)
	})
	t.Run("warn", func(t *testing.T) {
		partner, s, _ := receiptPair(t, wrong, func(c *as2.Config) { c.WarnOnMICMismatch = true })
		mdn, err := sendOnce(t, partner, s)
		wantWarning(t, err, deliver.WarnMICMismatch, as2.ErrMICMismatch)
		if mdn == nil || !mdn.Verified {
			t.Errorf("MDN %+v, want the verified MDN", mdn)
		}
	})
}

// HTTP 200 without an MDN: under MDNSync the message is delivered,
// unconfirmed (a warning, never resent: a resend is a duplicate order);
// under MDNNone no MDN is asked for and the 200 is the delivery.
func TestReceiptNoMDN(t *testing.T) {
	t.Run("sync", func(t *testing.T) {
		partner, s, _ := receiptPair(t, func(c *as2partner.Config) { c.NoMDN = true }, nil)
		mdn, err := sendOnce(t, partner, s)
		wantWarning(t, err, deliver.WarnUnconfirmed, as2.ErrNoMDN)
		if mdn != nil {
			t.Errorf("MDN %+v, want none", mdn)
		}
	})
	t.Run("none", func(t *testing.T) {
		partner, s, hdr := receiptPair(t, nil, func(c *as2.Config) { c.MDNMode, c.MDNCert = as2.MDNNone, nil })
		mdn, err := sendOnce(t, partner, s)
		if mdn != nil || err != nil {
			t.Fatalf("Send = %+v, %v; want delivered", mdn, err)
		}
		if h := hdr(); h.Get("Disposition-Notification-To") != "" || h.Get("Disposition-Notification-Options") != "" {
			t.Errorf("request asks for an MDN under MDNNone: %v", h)
		}
		if st := partner.Stats(); st.Processed != 1 || st.SignedMDNs != 0 {
			t.Errorf("partner stats %+v, want 1 processed, no MDN", st)
		}
	})
}

func TestReceiptConfigValidation(t *testing.T) {
	pki := testPKI(t)
	for _, tt := range []struct {
		name  string
		mod   func(*as2.Config)
		want  error
		field string
	}{
		{"unknown mode", func(c *as2.Config) { c.MDNMode = "later" }, as2.ErrMDNMode, "Config.MDNMode"},
		{"async without URL", func(c *as2.Config) { c.MDNMode = as2.MDNAsync }, as2.ErrURL, "Config.AsyncMDNURL"},
		{"async without Receipts", func(c *as2.Config) { c.MDNMode, c.AsyncMDNURL = as2.MDNAsync, "https://us.example.com/mdn" }, as2.ErrMDNMode, "Config.Receipts"},
		{"AsyncMDNURL under sync", func(c *as2.Config) { c.AsyncMDNURL = "https://us.example.com/mdn" }, as2.ErrMDNMode, "Config.AsyncMDNURL"},
		{"none with MDNCert", func(c *as2.Config) { c.MDNMode = as2.MDNNone }, as2.ErrMDNMode, "Config.MDNMode"},
		{"none with RequireMIC", func(c *as2.Config) { c.MDNMode, c.MDNCert, c.RequireMIC = as2.MDNNone, nil, true }, as2.ErrMDNMode, "Config.MDNMode"},
		{"RequireSignedMDN without MDNCert", func(c *as2.Config) { c.MDNCert, c.RequireSignedMDN = nil, true }, as2.ErrMissingCert, "Config.MDNCert"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := pki.SenderConfig("https://as2.example.com/as2")
			tt.mod(&cfg)
			_, err := as2.NewSender(cfg)
			if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.field) {
				t.Fatalf("NewSender error %v; want Is %v naming %s", err, tt.want, tt.field)
			}
		})
	}
}
