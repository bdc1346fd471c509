package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/floodgate-go/floodgate/internal/natstest"
	"github.com/floodgate-go/floodgate/jsq"
	"github.com/floodgate-go/floodgate/retryqueue"
)

// "floodgate replay", built and run as a real command, moves the selected
// dead letters back into the retry queue and reports them as JSON; bad
// flags exit 2 naming the flag.
func TestReplayCommand(t *testing.T) {
	skipShort(t)
	bin := filepath.Join(t.TempDir(), "floodgate")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/floodgate-go/floodgate/cmd/floodgate").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	url := natstest.URL(t)
	nc := natstest.Conn(t, url)
	js := natstest.JetStream(t, nc)
	tp := newTopics(t)
	natstest.DeleteStreams(t, js, tp.Retry, tp.Dead)
	pub, err := jsq.NewPublisher(jsq.PublisherConfig{Conn: nc})
	if err != nil {
		t.Fatal(err)
	}
	qcfg := retryqueue.Config{Publisher: pub, Source: tp.Source, Handler: "deliver", RetryTopic: tp.Retry, DeadLetterTopic: tp.Dead}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := retryqueue.Provision(ctx, js, qcfg); err != nil {
		t.Fatal(err)
	}
	q, err := retryqueue.New(qcfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []struct{ id, topic string }{{"o1", "orders"}, {"i1", "invoices"}, {"o2", "orders"}} {
		m := message.NewMessage(d.id, []byte(d.id))
		m.Metadata.Set(retryqueue.MetaOriginalTopic, d.topic)
		if err := q.DeadLetter(ctx, m, retryqueue.DeadReasonPermanent, errors.New("rejected")); err != nil {
			t.Fatal(err)
		}
	}

	run := func(args ...string) (string, string, int) {
		cmd := exec.CommandContext(ctx, bin, append([]string{"replay"}, args...)...)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return out.String(), errb.String(), code
	}
	stdout, stderr, code := run("-nats-url", url, "-topic", "orders", "-retry-topic", tp.Retry, "-dead-topic", tp.Dead, "-format", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var res struct {
		Scanned, Selected, Replayed int
		UUIDs                       []string
	}
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatalf("output %q: %v", stdout, err)
	}
	if res.Scanned != 3 || res.Replayed != 2 || !slices.Equal(res.UUIDs, []string{"o1", "o2"}) {
		t.Fatalf("replay -topic orders = %+v", res)
	}
	var retry []string
	for _, m := range natstest.StreamMsgs(t, js, tp.Retry) {
		retry = append(retry, m.UUID)
	}
	dead := natstest.StreamMsgs(t, js, tp.Dead)
	if !slices.Equal(retry, []string{"o1", "o2"}) || len(dead) != 1 || dead[0].UUID != "i1" {
		t.Fatalf("after replay: retry %v, dead %d", retry, len(dead))
	}

	// No server flag is not an error: like the nats CLI, the default is
	// $NATS_URL, the selected context, else nats://127.0.0.1:4222.
	for _, bad := range [][]string{{"-nats-url", url, "-limit", "-1"}, {"-nats-url", url, "-older-than", "-1h"}, {"-nats-url", url, "-format", "xml"}} {
		_, stderr, code := run(bad...)
		flagName := strings.Fields(strings.Join(bad, " "))[len(bad)-2]
		if code != 2 || !strings.Contains(stderr, flagName) {
			t.Errorf("%v: exit %d, stderr %q; want 2 naming %s", bad, code, stderr, flagName)
		}
	}
}
