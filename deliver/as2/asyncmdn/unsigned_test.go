package asyncmdn_test

import (
	"crypto/x509"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/deliver"
	"github.com/floodgate-go/floodgate/deliver/as2"
	"github.com/floodgate-go/floodgate/deliver/as2/as2partner"
	"github.com/floodgate-go/floodgate/retryqueue"
)

// Anyone can post to the receipt endpoint: when a signed MDN was asked
// for, an unsigned one, "processed" or not, optional request or required,
// resolves nothing (403): the record stays pending and the deadline sweep
// dead-letters it (mdn-timeout), never the forger's word.
func TestUnsignedMDNResolvesNothingWhenSignedAsked(t *testing.T) {
	for _, tt := range []struct {
		name string
		pmod func(*as2partner.Config)
		smod func(*as2.Config)
	}{
		{"processed, optional", func(c *as2partner.Config) { c.UnsignedMDN = true }, nil},
		{"processed, required", func(c *as2partner.Config) { c.UnsignedMDN = true }, func(c *as2.Config) { c.RequireSignedMDN = true }},
		{"failed, optional", func(c *as2partner.Config) { c.UnsignedMDN, c.AS2ID = true, "someone-else" }, nil},
		{"processed, trust roots only", func(c *as2partner.Config) { c.UnsignedMDN = true }, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, tt.pmod)
			smod := tt.smod
			if strings.Contains(tt.name, "trust roots") {
				roots := x509.NewCertPool()
				roots.AddCert(e.pki.CA)
				smod = func(c *as2.Config) { c.MDNCert, c.TrustRoots = nil, roots }
			}
			r := e.replica("", smod)
			e.sendAsync(r, "order-1")
			n, err := e.partner.PostReceipts(testCtx(t))
			if n != 0 || err == nil || !strings.Contains(err.Error(), "HTTP 403") {
				t.Fatalf("PostReceipts = %d, %v; want the unsigned MDN refused with 403", n, err)
			}
			if !e.pending(e.store(e.js, e.bucket), "order-1") || len(r.got()) != 0 || len(e.deadLetters()) != 0 {
				t.Fatalf("an unsigned MDN resolved the receipt: outcomes %+v", r.got())
			}
			swept, err := r.resolver.SweepAt(testCtx(t), time.Now().Add(2*time.Hour))
			if swept != 1 || err != nil {
				t.Fatalf("SweepAt past the deadline = %d, %v; want 1", swept, err)
			}
			dl := e.deadLetters()
			if len(dl) != 1 {
				t.Fatalf("%d dead letters, want 1", len(dl))
			}
			checkDead(t, dl[0], "order-1", retryqueue.DeadReasonMDNTimeout)
		})
	}
}

// Without MDNCert or TrustRoots, AllowUnsignedAsyncMDN set, no signed MDN
// is asked for, and an unsigned asynchronous MDN resolves the record (the
// documented risk).
func TestUnsignedMDNAcceptedWithoutMDNCert(t *testing.T) {
	e := newEnv(t, func(c *as2partner.Config) { c.UnsignedMDN = true })
	r := e.replica("", func(c *as2.Config) {
		c.MDNCert, c.TrustRoots, c.RequireMIC, c.AllowUnsignedAsyncMDN = nil, nil, false, true
	})
	e.sendAsync(r, "order-1")
	if n, err := e.partner.PostReceipts(testCtx(t)); n != 1 || err != nil {
		t.Fatalf("PostReceipts = %d, %v", n, err)
	}
	got := r.got()
	if len(got) != 1 || !got[0].Delivered() || (got[0].Err != nil && !deliver.IsWarning(got[0].Err)) || errors.Is(got[0].Err, as2.ErrMDNUnsigned) {
		t.Fatalf("outcomes %+v; want one delivered", got)
	}
}
