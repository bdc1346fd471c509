package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/floodgate-go/floodgate/deliver/webhook"
	"github.com/floodgate-go/floodgate/internal/capture"
	"github.com/floodgate-go/floodgate/internal/exampleutil"
	"github.com/floodgate-go/floodgate/internal/natsconn"
	"github.com/floodgate-go/floodgate/internal/natsserver"
	"github.com/floodgate-go/floodgate/internal/redact/leaktest"
	"github.com/floodgate-go/floodgate/jsq"
)

// TestCanarySecrets runs the example as an operator deploys it, with
// every secret a distinct canary: the consumers' Standard Webhooks secret
// ($FLOODGATE_WEBHOOK_SECRET, a key generated here) and the NATS token
// (-token, on a server with token authorization on). The run has an
// outage (the faulty consumer's slow answers: a trip, diversions, a
// drain), a trigger for a consumer that does not exist (a dead letter) and
// an unreadable fix (dropped, reported on stderr), with the log at debug
// level. It captures stdout, stderr, the -summary JSON, every scrape of
// -metrics-addr and every message published on the server (a wiretap:
// stream messages and JetStream API traffic, also those the run deletes
// before it ends), checks that the capture holds what the run did, and
// that no form of a canary appears (raw, whsec_, base64, hex).
func TestCanarySecrets(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the example end to end (~20 s)")
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		t.Fatal(err)
	}
	copy(key, "canary-hook-key") // recognisable in a failure message
	secret := webhook.FormatSecret(key)
	t.Setenv(EnvWebhookSecret, secret)
	const natsToken = "canary-nats-token-4f81c3"
	forms := slices.Concat(leaktest.Forms(key), leaktest.Forms([]byte(secret)), leaktest.Forms([]byte(natsToken)))

	srv, err := natsserver.Start(natsserver.Options{Token: natsToken})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	nc, err := natsconn.Options{Server: srv.ClientURL(), Token: natsToken}.Connect("canary-tap")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	tap, err := capture.NewTap(nc)
	if err != nil {
		t.Fatal(err)
	}

	summaryFile := filepath.Join(t.TempDir(), "summary.json")
	o, err := parseFlags([]string{"-s", srv.ClientURL(), "-token", natsToken,
		"-metrics-addr", "127.0.0.1:0", "-summary", summaryFile,
		"-vehicles", "6", "-consumers", "2", "-faulty", "2", "-speed", "150", "-produce-for", "6s", "-settle", "2m",
		"-slow-at", "0", "-slow-for", "1s", "-slow-latency", "20ms",
		"-healthy", "0", "-degraded-calls", "12", "-fast", "0", "-slow-call", "500ms", "-spike", "2s", "-timeout", "5s",
	}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	var stderr capture.Buffer
	o.stderr, o.logLevel = &stderr, slog.LevelDebug

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var sum *summary
	prog := capture.Start(ctx, func(ctx context.Context, stdout io.Writer) (err error) {
		sum, err = run(ctx, o, stdout)
		return err
	}, 200*time.Millisecond)
	stdout := &prog.Stdout

	// A trigger for a consumer that does not exist (a dead letter) and a
	// fix that does not parse (dropped).
	runID, ok := prog.RunID(ctx)
	if !ok {
		t.Fatalf("the run named no streams: %s", stdout.String())
	}
	pub, err := jsq.NewPublisher(jsq.PublisherConfig{Conn: nc})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	poison := message.NewMessage("canary-poison-trigger", []byte(`{"id":"canary-poison-trigger"}`))
	poison.Metadata.Set("webhook", "http://127.0.0.1:1/hooks/nobody")
	if err := pub.Publish("geofence_triggers_"+runID, poison); err != nil {
		t.Fatal(err)
	}
	if err := pub.Publish(fmt.Sprintf("geofence_fixes_%s_0", runID), message.NewMessage("canary-poison-fix", []byte("not a fix"))); err != nil {
		t.Fatal(err)
	}

	err = prog.Wait(4 * time.Minute) // a hang guard: ctx ends the run sooner
	if err := tap.Stop(); err != nil {
		t.Fatal(err)
	}
	if err != nil {
		t.Fatalf("run: %v\n%s\n%s", err, stdout.String(), stderr.String())
	}
	if err := exampleutil.WriteJSON(o.summary, sum); err != nil { // as main does
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
	if sum.Trips < 1 || sum.Diverted < 1 || sum.Drained < 1 || sum.SlowResponses < 1 {
		t.Errorf("trips %d, diverted %d, drained %d, slow answers %d: the outage must slow calls, trip, divert and drain",
			sum.Trips, sum.Diverted, sum.Drained, sum.SlowResponses)
	}
	if sum.DeliveredUnique < 1 || sum.SignatureFailures != 0 || sum.Lost != 0 {
		t.Errorf("delivered %d, signature failures %d, lost %d: the consumers must verify triggers signed with the canary secret",
			sum.DeliveredUnique, sum.SignatureFailures, sum.Lost)
	}
	for what, n := range map[string]int{
		"retry":        tap.Count("floodgate_retry_" + runID),
		"dead letters": tap.Count("floodgate_dead_" + runID),
		"triggers":     tap.Count("geofence_triggers_" + runID),
	} {
		if n == 0 {
			t.Errorf("the wiretap saw no %s message (subjects: %v)", what, tap.Subjects())
		}
	}
	for what, want := range map[string]string{
		"NATS traffic": "no consumer at", // the dead letter's reason
		"stdout":       "floodgate backlog -s nats://",
		"stderr":       "unreadable fix canary-poison-fix dropped",
		"summary":      `"slow_responses"`,
		"metrics":      "floodgate_diverted_total",
	} {
		if !strings.Contains(captured[what], want) {
			t.Errorf("%s does not hold %q: %.500s", what, want, captured[what])
		}
	}
	for what, text := range captured {
		leaktest.Check(t, what, text, forms)
	}
	// The run's consumers use the canary secret, not throwaway ones.
	if want := fmt.Sprintf("webhook: %d of %d consumers sign and verify with the given secret", o.consumers, o.consumers); !strings.Contains(captured["stdout"], want) {
		t.Errorf("stdout does not say every consumer uses the given secret: %.500s", captured["stdout"])
	}
	t.Logf("captured: stdout %d B, stderr %d B, metrics %d scrapes, NATS %d B in %d subjects",
		len(captured["stdout"]), len(captured["stderr"]), prog.Scrapes(), len(captured["NATS traffic"]), len(tap.Subjects()))
}
