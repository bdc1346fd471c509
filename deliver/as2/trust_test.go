package as2_test

import (
	"context"
	"crypto/x509"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/deliver"
	"github.com/floodgate-go/floodgate/deliver/as2"
	"github.com/floodgate-go/floodgate/deliver/as2/as2test"
)

// trustClock is Config.Now for the trust tests: settable, safe for
// concurrent use.
type trustClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *trustClock) Now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *trustClock) Set(t time.Time) { c.mu.Lock(); c.t = t; c.mu.Unlock() }

// foreignPKI is a second CA with its own identities: certificates that
// chain to nothing the sender trusts.
var (
	foreignOnce sync.Once
	foreignVal  *as2test.PKI
	foreignErr  error
)

func foreignPKI(t *testing.T) *as2test.PKI {
	t.Helper()
	foreignOnce.Do(func() { foreignVal, foreignErr = as2test.New("EVE", "TRENT") })
	if foreignErr != nil {
		t.Fatal(foreignErr)
	}
	return foreignVal
}

func issue(t *testing.T, p *as2test.PKI, id string, from, to time.Time) as2test.Identity {
	t.Helper()
	ident, err := p.Issue(id, from, to)
	if err != nil {
		t.Fatal(err)
	}
	return ident
}

func poolOf(certs ...*x509.Certificate) *x509.CertPool {
	p := x509.NewCertPool()
	for _, c := range certs {
		p.AddCert(c)
	}
	return p
}

// Every MDN's signer is checked against the trust model at the MDN's time
// (Config.Now): each untrusted case fails with its own typed error inside a
// ParkError (the partner is parked, the message kept: retryable), never as
// a permanent failure; an unsigned MDN where the profile requires a signed
// one keeps its permanent ErrMDNUnsigned.
func TestTrustMDNSigner(t *testing.T) {
	pki := testPKI(t)
	now := time.Now()
	next := issue(t, pki, "SUPPLIER-2027", now.Add(-time.Hour), now.AddDate(2, 0, 0))
	future := issue(t, pki, "SUPPLIER-LATER", now.Add(time.Hour), now.AddDate(2, 0, 0))
	stranger := foreignPKI(t).Partner
	later := now.AddDate(1, 1, 0) // after pki.Partner expires, within next's validity

	tests := []struct {
		name   string
		signer *as2test.Identity // nil: unsigned
		at     time.Time         // the clock at the MDN
		cfg    func(*as2.Config)
		want   error // nil: verified success
		parked bool
	}{
		{"pinned", &pki.Partner, now, nil, nil, false},
		{"pinned, expired at the MDN's time", &pki.Partner, later, nil, as2.ErrCertExpired, true},
		{"not the pinned one, same CA", &other, now, nil, as2.ErrCertNotPinned, true},
		{"not the pinned one, self-made CA", &stranger, now, nil, as2.ErrCertNotPinned, true},
		{"rollover: next certificate", &next, now, func(c *as2.Config) { c.NextMDNCert = next.Cert }, nil, false},
		{"rollover: next certificate not yet valid", &future, now, func(c *as2.Config) { c.NextMDNCert = future.Cert }, as2.ErrCertNotYetValid, true},
		{"CA: chained signer", &other, now, func(c *as2.Config) { c.MDNCert, c.TrustRoots = nil, poolOf(pki.CA) }, nil, false},
		{"CA: pinned and chained", &pki.Partner, now, func(c *as2.Config) { c.TrustRoots = poolOf(pki.CA) }, nil, false},
		{"CA: not chained", &stranger, now, func(c *as2.Config) { c.MDNCert, c.TrustRoots = nil, poolOf(pki.CA) }, as2.ErrCertUntrusted, true},
		{"CA: chained signer expired at the MDN's time", &other, now.Add(2 * time.Hour), func(c *as2.Config) { c.MDNCert, c.TrustRoots = nil, poolOf(pki.CA) }, as2.ErrCertExpired, true},
		{"unsigned, signed MDN required", nil, now, func(c *as2.Config) { c.RequireSignedMDN = true }, as2.ErrMDNUnsigned, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := mdnResponder(t, func(w http.ResponseWriter, msgID, mic string) {
				entity := reportEntity(notification(msgID, "processed", mic))
				if tt.signer == nil {
					w.Header().Set("Content-Type", reportCT)
					w.Write(entity[len("Content-Type: "+reportCT+"\r\n\r\n"):])
					return
				}
				signAndWrite(t, w, entity, *tt.signer, nil)
			})
			clock := &trustClock{t: now}
			cfg := pki.SenderConfig(srv.URL)
			cfg.Now = clock.Now
			if tt.cfg != nil {
				tt.cfg(&cfg)
			}
			s, err := as2.NewSender(cfg)
			if err != nil {
				t.Fatal(err)
			}
			clock.Set(tt.at)
			mdn, err := s.Send(context.Background(), testID, payload(t))
			if tt.want == nil {
				if err != nil || !mdn.Verified {
					t.Fatalf("Send = %+v, %v; want a verified success", mdn, err)
				}
				return
			}
			if !errors.Is(err, tt.want) {
				t.Fatalf("Send error %v; want Is %v", err, tt.want)
			}
			if got := errors.Is(err, deliver.ErrParked); got != tt.parked {
				t.Fatalf("Send error %v: parked %v, want %v", err, got, tt.parked)
			}
			if tt.parked {
				var te *as2.TrustError
				if !errors.As(err, &te) || te.Role != "MDN signer" || !te.At.Equal(tt.at) {
					t.Fatalf("Send error %v: TrustError %+v, want role \"MDN signer\" at %v", err, te, tt.at)
				}
				if !deliver.IsRetryable(err) || deliver.IsPermanent(err) {
					t.Fatalf("Send error %v: a parked message must be kept (retryable)", err)
				}
				if mdn == nil || mdn.Verified {
					t.Fatalf("Send MDN %+v: want the MDN as parsed, not verified", mdn)
				}
			} else if !deliver.IsPermanent(err) {
				t.Fatalf("Send error %v is not permanent", err)
			}
		})
	}
}

// The trust model is checked at load, at Config.Now: NewSender and
// LoadProfile refuse a partner certificate that is expired, not yet valid
// or not chained to TrustRoots, and a rollover without its current
// certificate or a valid switch date, each with its own error naming the
// field; a next certificate not yet valid is fine.
func TestTrustAtLoad(t *testing.T) {
	pki := testPKI(t)
	now := time.Now()
	expired := issue(t, pki, "SUPPLIER-OLD", now.AddDate(-2, 0, 0), now.Add(-time.Hour))
	future := issue(t, pki, "SUPPLIER-NEW", now.Add(24*time.Hour), now.AddDate(2, 0, 0))
	tests := []struct {
		name  string
		mod   func(*as2.Config)
		want  error // nil: valid
		field string
	}{
		{"pinned", nil, nil, ""},
		{"MDN certificate expired", func(c *as2.Config) { c.MDNCert = expired.Cert }, as2.ErrCertExpired, "Config.MDNCert"},
		{"MDN certificate not yet valid", func(c *as2.Config) { c.MDNCert = future.Cert }, as2.ErrCertNotYetValid, "Config.MDNCert"},
		{"next MDN certificate not yet valid", func(c *as2.Config) { c.NextMDNCert = future.Cert }, nil, ""},
		{"next MDN certificate expired", func(c *as2.Config) { c.NextMDNCert = expired.Cert }, as2.ErrCertExpired, "Config.NextMDNCert"},
		{"next MDN certificate alone", func(c *as2.Config) { c.MDNCert, c.NextMDNCert = nil, future.Cert }, as2.ErrRollover, "Config.NextMDNCert"},
		{"CA: chained", func(c *as2.Config) { c.TrustRoots = poolOf(pki.CA) }, nil, ""},
		{"CA: partner certificates not chained", func(c *as2.Config) { c.TrustRoots = poolOf(foreignPKI(t).CA) }, as2.ErrCertUntrusted, "Config.EncryptionCert"},
		{"CA: next certificate not chained", func(c *as2.Config) {
			c.TrustRoots, c.NextMDNCert = poolOf(pki.CA), foreignPKI(t).Partner.Cert
		}, as2.ErrCertUntrusted, "Config.NextMDNCert"},
		{"next encryption certificate without a date", func(c *as2.Config) { c.NextEncryptionCert = future.Cert }, as2.ErrRollover, "Config.NextEncryptionFrom"},
		{"next encryption certificate, date before it is valid", func(c *as2.Config) {
			c.NextEncryptionCert, c.NextEncryptionFrom = future.Cert, now
		}, as2.ErrRollover, "Config.NextEncryptionFrom"},
		{"next encryption certificate without a current one", func(c *as2.Config) {
			c.EncryptionCert, c.NextEncryptionCert, c.NextEncryptionFrom = nil, future.Cert, now.Add(48*time.Hour)
		}, as2.ErrRollover, "Config.NextEncryptionCert"},
		{"next encryption certificate", func(c *as2.Config) {
			c.NextEncryptionCert, c.NextEncryptionFrom = future.Cert, now.Add(48*time.Hour)
		}, nil, ""},
		{"the clock decides: a year on, the certificates have expired", func(c *as2.Config) {
			c.Now = func() time.Time { return now.AddDate(1, 1, 0) }
		}, as2.ErrCertExpired, "Config.SigningCert"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := pki.SenderConfig("https://partner.example/as2")
			cfg.Now = func() time.Time { return now }
			if tt.mod != nil {
				tt.mod(&cfg)
			}
			_, err := as2.NewSender(cfg)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("NewSender: %v", err)
				}
				return
			}
			if !errors.Is(err, tt.want) || !contains(err.Error(), tt.field) || !contains(err.Error(), "invalid config: ") {
				t.Fatalf("NewSender error %v; want Is %v, naming %s", err, tt.want, tt.field)
			}
		})
	}

	// LoadProfile reads TrustRoots from a PEM file and checks the chain.
	dir := t.TempDir()
	files, err := pki.WriteFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	foreignCA := filepath.Join(dir, "foreign-ca.pem")
	if err := os.WriteFile(foreignCA, foreignPKI(t).CAPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	base := as2.Config{URL: "https://partner.example/as2", From: pki.Sender.AS2ID, To: pki.Partner.AS2ID}
	prof := files.Profile()
	prof.TrustRoots = files.CA
	if cfg, err := as2.LoadProfile(base, prof); err != nil || cfg.TrustRoots == nil {
		t.Fatalf("LoadProfile with the partner's CA: %v", err)
	}
	prof.TrustRoots = foreignCA
	if _, err := as2.LoadProfile(base, prof); !errors.Is(err, as2.ErrCertUntrusted) {
		t.Fatalf("LoadProfile with another CA: %v, want ErrCertUntrusted", err)
	}
	prof.TrustRoots = files.SenderKey
	if _, err := as2.LoadProfile(base, prof); !errors.Is(err, as2.ErrPEM) || !contains(err.Error(), "ProfileFiles.TrustRoots") {
		t.Fatalf("LoadProfile with a key as TrustRoots: %v, want ErrPEM naming ProfileFiles.TrustRoots", err)
	}
}

// During a partner's rollover both certificates verify its MDNs, each only
// while valid at the MDN's time.
func TestRolloverMDNBothCertificates(t *testing.T) {
	pki := testPKI(t)
	now := time.Now()
	old := issue(t, pki, "SUPPLIER-OLD", now.Add(-time.Hour), now.Add(time.Hour))
	next := issue(t, pki, "SUPPLIER-NEW", now.Add(-time.Hour), now.AddDate(1, 0, 0))
	var mu sync.Mutex
	signer := old
	srv := mdnResponder(t, func(w http.ResponseWriter, msgID, mic string) {
		mu.Lock()
		id := signer
		mu.Unlock()
		signAndWrite(t, w, reportEntity(notification(msgID, "processed", mic)), id, nil)
	})
	clock := &trustClock{t: now}
	cfg := pki.SenderConfig(srv.URL)
	cfg.MDNCert, cfg.NextMDNCert, cfg.Now = old.Cert, next.Cert, clock.Now
	s, err := as2.NewSender(cfg)
	if err != nil {
		t.Fatal(err)
	}
	send := func(id as2test.Identity, at time.Time) (*as2.MDN, error) {
		mu.Lock()
		signer = id
		mu.Unlock()
		clock.Set(at)
		return s.Send(context.Background(), testID, payload(t))
	}
	for _, id := range []as2test.Identity{old, next} {
		if mdn, err := send(id, now); err != nil || !mdn.Verified || !mdn.Signer.Equal(id.Cert) {
			t.Fatalf("MDN signed by %s during the rollover: %+v, %v; want verified", id.AS2ID, mdn, err)
		}
	}
	// Two hours on the old certificate has expired; the new one carries on.
	if _, err := send(old, now.Add(2*time.Hour)); !errors.Is(err, as2.ErrCertExpired) || !errors.Is(err, deliver.ErrParked) {
		t.Fatalf("MDN signed by the expired old certificate: %v, want ErrCertExpired, parked", err)
	}
	if mdn, err := send(next, now.Add(2*time.Hour)); err != nil || !mdn.Verified {
		t.Fatalf("MDN signed by the new certificate after the old expired: %+v, %v", mdn, err)
	}
}

// The encryption certificate switches at NextEncryptionFrom, by the clock:
// before it only the old key opens a message, from it only the new one.
func TestRolloverEncryptionSwitchesAtTheDate(t *testing.T) {
	pki := testPKI(t)
	now := time.Now()
	next := issue(t, pki, "SUPPLIER-NEW", now.Add(-time.Hour), now.AddDate(1, 0, 0))
	switchAt := now.Add(24 * time.Hour)
	clock := &trustClock{t: now}
	cfg := pki.SenderConfig("https://partner.example/as2")
	cfg.NextEncryptionCert, cfg.NextEncryptionFrom, cfg.Now = next.Cert, switchAt, clock.Now
	s, err := as2.NewSender(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		at        time.Time
		open, not as2test.Identity
	}{
		{now, pki.Partner, next},
		{switchAt.Add(-time.Nanosecond), pki.Partner, next},
		{switchAt, next, pki.Partner},
		{switchAt.Add(time.Hour), next, pki.Partner},
	} {
		clock.Set(c.at)
		if got := s.EncryptionCertAt(c.at); !got.Equal(c.open.Cert) {
			t.Fatalf("EncryptionCertAt(%v) = %s, want %s", c.at, got.Subject, c.open.Cert.Subject)
		}
		out, err := s.Build(testID, payload(t))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := as2.Decrypt(out.Body, c.open.Cert, c.open.Key); err != nil {
			t.Fatalf("at %v: %s cannot open the message: %v", c.at, c.open.AS2ID, err)
		}
		if _, err := as2.Decrypt(out.Body, c.not.Cert, c.not.Key); !errors.Is(err, as2.ErrDecryption) {
			t.Fatalf("at %v: %s opens the message (%v); want ErrDecryption", c.at, c.not.AS2ID, err)
		}
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
