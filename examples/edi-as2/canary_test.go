package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/floodgate-go/floodgate/deliver/as2/as2test"
	"github.com/floodgate-go/floodgate/internal/capture"
	"github.com/floodgate-go/floodgate/internal/natsconn"
	"github.com/floodgate-go/floodgate/internal/natsserver"
	"github.com/floodgate-go/floodgate/internal/redact/leaktest"
	"github.com/floodgate-go/floodgate/jsq"
)

// TestCanarySecrets runs the example as an operator deploys it, with
// every secret a distinct canary: our AS2 private key (-as2-key, a key
// generated here) and the NATS password (in the -s URL's user information,
// on a server with authorization on). The run has an outage (503s: failures,
// a trip, diversions, a drain), asynchronous MDNs (pending receipts in a KV
// bucket) and an order for a retailer that does not exist (a dead letter),
// with the log at debug level. It captures stdout, stderr, the -summary
// JSON, every scrape of -metrics-addr and every message published on the
// server (a wiretap: stream messages, KV entries and JetStream API traffic,
// also those the run deletes before it ends), checks that the capture
// holds what the run did, and that no form of a canary appears (the key's
// PEM body, DER, base64, hex and private numbers; the password raw, base64
// and hex).
func TestCanarySecrets(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the example end to end (~15 s)")
	}
	pki, err := as2test.New(ourAS2ID, "CANARY-UNUSED")
	if err != nil {
		t.Fatal(err)
	}
	files, err := pki.WriteFiles(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	const natsUser, natsPass = "edi", "canary-nats-pass-7e2d91"
	forms := slices.Concat(leaktest.KeyForms(t, pki.Sender.Key), leaktest.Forms([]byte(natsPass)))

	srv, err := natsserver.Start(natsserver.Options{User: natsUser, Password: natsPass})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	nc, err := natsconn.Options{Server: srv.ClientURL(), User: natsUser, Password: natsPass}.Connect("canary-tap")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	tap, err := capture.NewTap(nc)
	if err != nil {
		t.Fatal(err)
	}

	summaryFile := filepath.Join(t.TempDir(), "summary.json")
	credURL := strings.Replace(srv.ClientURL(), "://", "://"+natsUser+":"+natsPass+"@", 1)
	o, err := parseFlags([]string{"-s", credURL, "-as2-cert", files.SenderCert, "-as2-key", files.SenderKey,
		"-mdn", "async", "-metrics-addr", "127.0.0.1:0", "-summary", summaryFile,
		"-rate", "40", "-retailers", "2", "-faulty", "2", "-produce-for", "3s",
		"-healthy", "0", "-outage", "1s", "-outage-calls", "10", "-fragile", "0", "-settle", "45s"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	var stderr capture.Buffer
	o.stderr, o.logLevel = &stderr, slog.LevelDebug

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var sum *summary
	prog := capture.Start(ctx, func(ctx context.Context, stdout io.Writer) (err error) {
		sum, err = run(ctx, o, stdout)
		return err
	}, 200*time.Millisecond)
	stdout := &prog.Stdout

	// An order for a retailer that does not exist: a dead letter.
	runID, ok := prog.RunID(ctx)
	if !ok {
		t.Fatalf("the run named no streams: %s", stdout.String())
	}
	pub, err := jsq.NewPublisher(jsq.PublisherConfig{Conn: nc})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	poison := message.NewMessage("canary-poison-1", []byte("ISA*00*not an order~"))
	poison.Metadata.Set("AS2-To", "CANARY-NOBODY")
	if err := pub.Publish("edi_orders_"+runID, poison); err != nil {
		t.Fatal(err)
	}

	err = prog.Wait(3 * time.Minute) // a hang guard: ctx ends the run sooner
	if err := tap.Stop(); err != nil {
		t.Fatal(err)
	}
	if err != nil {
		t.Fatalf("run: %v\n%s\n%s", err, stdout.String(), stderr.String())
	}
	if err := sum.writeFile(o.summary); err != nil { // as main does
		t.Fatal(err)
	}
	sumJSON, err := os.ReadFile(summaryFile)
	if err != nil {
		t.Fatal(err)
	}
	captured := map[string]string{
		"stdout": stdout.String(), "stderr": stderr.String(), "summary": string(sumJSON),
		"metrics": prog.Metrics(), "NATS traffic": tap.String(),
	}

	// The capture holds what the run did, so the search below cannot pass
	// on an empty capture.
	if sum.Trips < 1 || sum.Diverted < 1 || sum.Drained < 1 || sum.PartnerErrors < 1 {
		t.Errorf("trips %d, diverted %d, drained %d, partner errors %d: the outage must fail calls, trip, divert and drain",
			sum.Trips, sum.Diverted, sum.Drained, sum.PartnerErrors)
	}
	if sum.SignedEncrypted < 1 || sum.AsyncResolved < 1 || sum.Lost != 0 {
		t.Errorf("signed and encrypted %d, receipts resolved %d, lost %d: the retailers must verify orders signed with the canary key",
			sum.SignedEncrypted, sum.AsyncResolved, sum.Lost)
	}
	for what, n := range map[string]int{
		"retry":        tap.Count("floodgate_retry_" + runID),
		"dead letters": tap.Count("floodgate_dead_" + runID),
		"receipts KV":  tap.Count("$KV.floodgate_as2_receipts_" + runID),
	} {
		if n == 0 {
			t.Errorf("the wiretap saw no %s message (subjects: %v)", what, tap.Subjects())
		}
	}
	for what, want := range map[string]string{
		"NATS traffic": "no retailer with AS2 ID", // the dead letter's reason
		"stdout":       "floodgate backlog -s nats://REDACTED@",
		"stderr":       "level=DEBUG",
		"summary":      `"async_resolved"`,
		"metrics":      "floodgate_diverted_total",
	} {
		if !strings.Contains(captured[what], want) {
			t.Errorf("%s does not hold %q: %.500s", what, want, captured[what])
		}
	}
	for what, text := range captured {
		leaktest.Check(t, what, text, forms)
	}
	// The run signs with the canary identity, not a throwaway one.
	if fp := fingerprint(pki.Sender.Cert); !strings.Contains(captured["stdout"], "sha256:"+fp+" (-as2-cert)") {
		t.Errorf("stdout does not name the -as2-cert identity sha256:%s: %.500s", fp, captured["stdout"])
	}
	t.Logf("captured: stdout %d B, stderr %d B, metrics %d scrapes, NATS %d B in %d subjects",
		len(captured["stdout"]), len(captured["stderr"]), prog.Scrapes(), len(captured["NATS traffic"]), len(tap.Subjects()))
}

// fingerprint is how the example prints a certificate: the first 8 bytes
// of its SHA-256, in hex.
func fingerprint(c *x509.Certificate) string {
	sum := sha256.Sum256(c.Raw)
	return hex.EncodeToString(sum[:8])
}
