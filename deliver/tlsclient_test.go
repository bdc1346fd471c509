package deliver_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"syscall"
	"testing"

	"github.com/floodgate-go/floodgate/deliver"
	"github.com/floodgate-go/floodgate/deliver/as2"
	"github.com/floodgate-go/floodgate/deliver/as2/as2partner"
	"github.com/floodgate-go/floodgate/deliver/as2/as2test"
	"github.com/floodgate-go/floodgate/deliver/webhook"
	"github.com/floodgate-go/floodgate/internal/tlstest"
)

// mtls starts h on HTTPS with pki's server certificate, requiring a
// client certificate of pki's CA.
func mtls(t *testing.T, pki *tlstest.PKI, h http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	srv.TLS = pki.ServerConfig(true)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

// brokenConn reports the other way a TLS 1.3 server's refusal of a
// missing client certificate reaches the client (see IsTLS): the
// connection reset, or a broken pipe while the body is written.
func brokenConn(err error) bool {
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// TestTLSClientWebhook: a webhook sender with NewTLSClient (private CA and
// client certificate) delivers to a partner requiring mTLS; without the
// client certificate, or without the private CA, the send fails with an
// error that IsTLS and is retryable (the partner is parked by its
// breaker, the message kept: see IsTLS).
func TestTLSClientWebhook(t *testing.T) {
	pki := tlstest.New(t, "partner-ca")
	got := make(chan string, 1)
	srv := mtls(t, pki, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.TLS.PeerCertificates[0].Subject.CommonName
	}))
	f := pki.Files
	send := func(files deliver.TLSFiles) error {
		c, err := deliver.NewTLSClient(files)
		if err != nil {
			t.Fatal(err)
		}
		defer c.CloseIdleConnections()
		s, err := webhook.NewSender(webhook.Config{URL: srv.URL, Secret: []byte("s3cret-s3cret-s3cret-s3cret"), HTTPClient: c})
		if err != nil {
			t.Fatal(err)
		}
		return s.Send(context.Background(), "m-1", []byte(`{"a":1}`))
	}
	if err := send(deliver.TLSFiles{CA: f.CA, Cert: f.ClientCert, Key: f.ClientKey}); err != nil {
		t.Fatalf("with the client certificate: %v", err)
	}
	if cn := <-got; cn != "client" {
		t.Errorf("partner saw client %q", cn)
	}
	for name, files := range map[string]deliver.TLSFiles{
		"no client certificate": {CA: f.CA},
		"no private CA":         {Cert: f.ClientCert, Key: f.ClientKey},
	} {
		err := send(files)
		if err == nil || !(deliver.IsTLS(err) || name == "no client certificate" && brokenConn(err)) || !deliver.IsRetryable(err) {
			t.Errorf("%s: err %v: IsTLS %v, IsRetryable %v; want a retryable TLS error", name, err, deliver.IsTLS(err), deliver.IsRetryable(err))
		}
	}
}

// TestTLSClientAS2: the same client serves an AS2 sender: with the client
// certificate the partner answers a good MDN; without it, a TLS error.
func TestTLSClientAS2(t *testing.T) {
	tpki := tlstest.New(t, "partner-ca")
	apki, err := as2test.New("TLSSender", "TLSPartner")
	if err != nil {
		t.Fatal(err)
	}
	p, err := as2partner.New(apki.PartnerConfig())
	if err != nil {
		t.Fatal(err)
	}
	srv := mtls(t, tpki, p)
	f := tpki.Files
	for _, withCert := range []bool{true, false} {
		files := deliver.TLSFiles{CA: f.CA}
		if withCert {
			files.Cert, files.Key = f.ClientCert, f.ClientKey
		}
		c, err := deliver.NewTLSClient(files)
		if err != nil {
			t.Fatal(err)
		}
		cfg := apki.SenderConfig(srv.URL)
		cfg.HTTPClient = c
		s, err := as2.NewSender(cfg)
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.Send(context.Background(), "m-1", []byte("ISA*00~"))
		if withCert && err != nil {
			t.Errorf("with the client certificate: %v", err)
		}
		if !withCert && (err == nil || !(deliver.IsTLS(err) || brokenConn(err)) || !deliver.IsRetryable(err)) {
			t.Errorf("without the client certificate: %v, want a retryable TLS error (or, TLS 1.3, a broken connection)", err)
		}
		c.CloseIdleConnections()
	}
}

// TestTLSFilesErrors: files that do not load, and a certificate without
// its key, wrap ErrTLSConfig; the zero TLSFiles is valid.
func TestTLSFilesErrors(t *testing.T) {
	f := tlstest.New(t, "partner-ca").Files
	for name, files := range map[string]deliver.TLSFiles{
		"cert without key": {Cert: f.ClientCert},
		"missing CA":       {CA: f.CA + ".nope"},
		"CA not PEM":       {CA: f.ClientKey + ".nope"},
		"mismatched key":   {Cert: f.ClientCert, Key: f.ServerKey},
	} {
		if _, err := deliver.NewTLSClient(files); !errors.Is(err, deliver.ErrTLSConfig) {
			t.Errorf("%s: err %v, want ErrTLSConfig", name, err)
		}
	}
	if _, err := deliver.NewTLSClient(deliver.TLSFiles{}); err != nil {
		t.Errorf("zero TLSFiles: %v", err)
	}
	if deliver.IsTLS(errors.New("connection refused")) || deliver.IsTLS(nil) {
		t.Error("IsTLS true for a plain error")
	}
}
