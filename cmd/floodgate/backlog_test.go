package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/floodgate-go/floodgate/internal/natstest"
	"github.com/floodgate-go/floodgate/retryqueue"
)

// streams provisions a retry and a dead-letter stream as retryqueue does,
// with the drainer's durable consumer on the retry stream, and stores
// messages with the given original topics ("" = no header) in each.
type streams struct {
	url, retry, dead string
	js               jetstream.JetStream
}

func newStreams(t *testing.T, retry, dead []string) *streams {
	t.Helper()
	ctx := context.Background()
	s := &streams{url: natstest.URL(t), retry: natstest.Name(t, "retry"), dead: natstest.Name(t, "dead")}
	s.js = natstest.JetStream(t, natstest.Conn(t, s.url))
	natstest.DeleteStreams(t, s.js, s.retry, s.dead)
	if err := retryqueue.Provision(ctx, s.js, retryqueue.Config{RetryTopic: s.retry, DeadLetterTopic: s.dead}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.js.CreateOrUpdateConsumer(ctx, s.retry, jetstream.ConsumerConfig{
		Durable: "floodgate_drainer~all", AckPolicy: jetstream.AckExplicitPolicy, FilterSubject: retryqueue.StreamSubjects(s.retry),
	}); err != nil {
		t.Fatal(err)
	}
	for _, st := range []struct {
		name   string
		topics []string
	}{{s.retry, retry}, {s.dead, dead}} {
		for i, topic := range st.topics {
			// The route: the service is named for the topic, partners
			// alternate.
			service, p := topic+"/deliver", []string{"p1", "p2"}[i%2]
			m := nats.NewMsg(retryqueue.RouteSubject(st.name, service, p))
			m.Header.Set(retryqueue.MetaService, service)
			m.Header.Set(retryqueue.MetaPartner, p)
			m.Data = []byte("ISA*00*...~")
			m.Header.Set("_watermill_message_uuid", "uuid-"+st.name+"-"+string(rune('a'+i)))
			if topic != "" {
				m.Header.Set(retryqueue.MetaOriginalTopic, topic)
			}
			if _, err := s.js.PublishMsg(ctx, m); err != nil {
				t.Fatal(err)
			}
		}
	}
	return s
}

func (s *streams) flags(extra ...string) []string {
	return append([]string{"-nats-url", s.url, "-retry-topic", s.retry, "-dead-topic", s.dead}, extra...)
}

func backlogJSON(t *testing.T, s *streams) backlogReport {
	t.Helper()
	code, out, errOut := runCmd(append([]string{"backlog"}, s.flags("-format", "json")...)...)
	if code != exitOK {
		t.Fatalf("backlog: exit %d: %s", code, errOut)
	}
	var rep backlogReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("backlog JSON: %v\n%s", err, out)
	}
	return rep
}

func counts(d streamDepth) map[string]uint64 {
	m := map[string]uint64{}
	for _, t := range d.ByTopic {
		m[t.OriginalTopic] = t.Messages
	}
	return m
}

func TestBacklogByOriginalTopic(t *testing.T) {
	s := newStreams(t,
		[]string{"edi_orders", "geofence_triggers", "edi_orders", "", "edi_orders", "geofence_triggers"},
		[]string{"edi_orders", "edi_orders"})
	// A message acked by the drainer leaves a gap in the work-queue stream.
	st, err := s.js.Stream(context.Background(), s.retry)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.DeleteMsg(context.Background(), 3); err != nil {
		t.Fatal(err)
	}

	rep := backlogJSON(t, s)
	if rep.Retry.Stream != s.retry || rep.Retry.Messages != 5 {
		t.Errorf("retry %+v, want 5 messages", rep.Retry)
	}
	if got := counts(rep.Retry); len(got) != 3 || got["edi_orders"] != 2 || got["geofence_triggers"] != 2 || got[noTopic] != 1 {
		t.Errorf("retry by topic %v", got)
	}
	if rep.Retry.ByTopic[0].Oldest.IsZero() || time.Since(rep.Retry.ByTopic[0].Oldest) > time.Minute {
		t.Errorf("oldest %v", rep.Retry.ByTopic[0].Oldest)
	}
	if got := counts(rep.Dead); rep.Dead.Messages != 2 || len(got) != 1 || got["edi_orders"] != 2 {
		t.Errorf("dead %+v", rep.Dead)
	}

	// Only the drainer's consumer exists on the work-queue stream afterwards.
	names := st.ConsumerNames(context.Background())
	var cons []string
	for n := range names.Name() {
		cons = append(cons, n)
	}
	if len(cons) != 1 || cons[0] != "floodgate_drainer~all" {
		t.Errorf("consumers on the retry stream: %v", cons)
	}

	code, out, errOut := runCmd(append([]string{"backlog"}, s.flags("-progress")...)...)
	if code != exitOK {
		t.Fatalf("table: exit %d: %s", code, errOut)
	}
	for _, want := range []string{"original topic", "edi_orders", "geofence_triggers", noTopic, s.dead} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) < 6 || strings.Join(strings.Fields(lines[5]), " ") != "total 7" {
		t.Errorf("table: want a header, 4 rows and the total 7:\n%s", out)
	}
	if !strings.Contains(strings.Join(strings.Fields(out), " "), `retry "edi_orders/deliver" "p1" 2`) {
		t.Errorf("table lacks the route rows:\n%s", out)
	}

	// -service and -partner select routes by subject.
	for _, c := range []struct {
		flags       []string
		retry, dead uint64
	}{
		{[]string{"-service", "edi_orders/deliver"}, 2, 2},
		{[]string{"-partner", "p2"}, 3, 1},
		{[]string{"-service", "edi_orders/deliver", "-partner", "p1"}, 2, 1},
		{[]string{"-service", "nobody"}, 0, 0},
	} {
		code, out, errOut := runCmd(append([]string{"backlog"}, s.flags(append(c.flags, "-format", "json")...)...)...)
		var rep backlogReport
		if code != exitOK || json.Unmarshal([]byte(out), &rep) != nil || rep.Retry.Messages != c.retry || rep.Dead.Messages != c.dead {
			t.Errorf("backlog %v: exit %d, retry %d dead %d, want %d and %d; %s", c.flags, code, rep.Retry.Messages, rep.Dead.Messages, c.retry, c.dead, errOut)
		}
	}
	if !strings.Contains(errOut, "scanning "+s.retry) || !strings.Contains(errOut, "5/5") || !strings.Contains(errOut, "#") {
		t.Errorf("progress bar on stderr: %q", errOut)
	}
}

// TestMissingStreams: backlog, purge, replay and deadletters behave alike
// on a missing stream: exit 1, one line naming the stream and its flag,
// nothing on standard output. Regression (issue 15): backlog exited 0,
// purge 1, replay printed a raw API error.
func TestMissingStreams(t *testing.T) {
	url := natstest.URL(t)
	retry, dead := natstest.Name(t, "noretry"), natstest.Name(t, "nodead")
	for _, tc := range []struct {
		args   []string
		stream string
	}{
		{[]string{"backlog"}, retry},
		{[]string{"backlog", "-format", "json"}, retry},
		{[]string{"purge", "-yes"}, dead},
		{[]string{"purge", "-yes", "-queue", "retry"}, retry},
		{[]string{"purge", "-dry-run", "-original-topic", "x"}, dead},
		{[]string{"replay"}, dead},
		{[]string{"replay", "-dry-run", "-format", "json"}, dead},
		{[]string{"deadletters", "list"}, dead},
		{[]string{"deadletters", "show", "1"}, dead},
	} {
		args := append(append([]string{}, tc.args...), "-nats-url", url, "-retry-topic", retry, "-dead-topic", dead)
		code, out, errOut := runCmd(args...)
		name := tc.args[0]
		if name == "deadletters" {
			name += " " + tc.args[1]
		}
		want := fmt.Sprintf("floodgate %s: stream %s not found", name, tc.stream)
		if code != exitError || out != "" || !strings.HasPrefix(errOut, want) || strings.Count(errOut, "\n") != 1 {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 1 and one line starting %q", tc.args, code, out, errOut, want)
		}
	}
}

func TestPurge(t *testing.T) {
	s := newStreams(t,
		[]string{"edi_orders", "geofence_triggers", "edi_orders"},
		[]string{"edi_orders", "geofence_triggers", "edi_orders", "edi_orders"})

	code, _, errOut := runCmd(append([]string{"purge"}, s.flags()...)...)
	if code != exitUsage || !strings.Contains(errOut, "-yes") {
		t.Errorf("without -yes: exit %d, %q", code, errOut)
	}
	if rep := backlogJSON(t, s); rep.Dead.Messages != 4 {
		t.Fatalf("refused purge removed messages: %+v", rep.Dead)
	}

	code, out, errOut := runCmd(append([]string{"purge"}, s.flags("-dry-run", "-original-topic", "edi_orders", "-format", "json")...)...)
	var pr purgeReport
	if code != exitOK || json.Unmarshal([]byte(out), &pr) != nil || pr.Selected != 3 || pr.Purged != 0 || !pr.DryRun || pr.Stream != s.dead {
		t.Errorf("dry run: exit %d, %+v, %q", code, pr, errOut)
	}

	code, out, errOut = runCmd(append([]string{"purge"}, s.flags("-yes", "-original-topic", "edi_orders", "-format", "json", "-progress")...)...)
	pr = purgeReport{}
	if code != exitOK || json.Unmarshal([]byte(out), &pr) != nil || pr.Selected != 3 || pr.Purged != 3 {
		t.Errorf("purge by topic: exit %d, %+v, %q", code, pr, errOut)
	}
	if !strings.Contains(errOut, "purging "+s.dead) || !strings.Contains(errOut, "3/3") {
		t.Errorf("progress: %q", errOut)
	}
	rep := backlogJSON(t, s)
	if got := counts(rep.Dead); rep.Dead.Messages != 1 || got["geofence_triggers"] != 1 {
		t.Errorf("dead after purge by topic: %+v", rep.Dead)
	}
	if rep.Retry.Messages != 3 {
		t.Errorf("retry touched: %+v", rep.Retry)
	}

	code, out, errOut = runCmd(append([]string{"purge"}, s.flags("-yes", "-queue", "retry")...)...)
	if code != exitOK || !strings.Contains(out, "purged 3 messages from "+s.retry) {
		t.Errorf("purge retry: exit %d, %q, %q", code, out, errOut)
	}
	code, out, _ = runCmd(append([]string{"purge"}, s.flags("-yes", "-older-than", "1h")...)...)
	if code != exitOK || !strings.Contains(out, "purged 0 messages") {
		t.Errorf("purge older than 1h: exit %d, %q", code, out)
	}
	rep = backlogJSON(t, s)
	if rep.Retry.Messages != 0 || rep.Dead.Messages != 1 {
		t.Errorf("after purges: retry %d, dead %d; want 0, 1", rep.Retry.Messages, rep.Dead.Messages)
	}

	code, _, errOut = runCmd("purge", "-nats-url", s.url, "-dead-topic", natstest.Name(t, "none"), "-yes")
	if code != exitError || !strings.Contains(errOut, "not found") {
		t.Errorf("missing stream: exit %d, %q", code, errOut)
	}
}

// TestStreamCommandsBadFlags: every bad command line exits 2 naming the flag.
func TestStreamCommandsBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		flag string
	}{
		{[]string{"backlog", "-nats-url", "nats://127.0.0.1:1", "-format", "xml"}, "-format"},
		{[]string{"backlog", "-nats-url", "nats://127.0.0.1:1", "-timeout", "0s"}, "-timeout"},
		{[]string{"backlog", "-nats-url", "nats://127.0.0.1:1", "extra"}, "extra"},
		{[]string{"backlog", "-bogus"}, "-bogus"},
		{[]string{"purge", "-nats-url", "nats://127.0.0.1:1"}, "-yes"},
		{[]string{"purge", "-nats-url", "nats://127.0.0.1:1", "-yes", "-queue", "live"}, "-queue"},
		{[]string{"purge", "-nats-url", "nats://127.0.0.1:1", "-yes", "-older-than", "-1h"}, "-older-than"},
		// Regression: invalid or equal stream names reached the server
		// ("nats: invalid stream name", exit 1) or were accepted.
		{[]string{"backlog", "-nats-url", "nats://127.0.0.1:1", "-retry-topic", "a.b"}, "-retry-topic: jsq: invalid topic"},
		{[]string{"backlog", "-nats-url", "nats://127.0.0.1:1", "-dead-topic", "dead letters"}, "-dead-topic: jsq: invalid topic"},
		{[]string{"backlog", "-nats-url", "nats://127.0.0.1:1", "-retry-topic", "same", "-dead-topic", "same"}, "-retry-topic and -dead-topic must differ"},
		{[]string{"purge", "-nats-url", "nats://127.0.0.1:1", "-yes", "-dead-topic", "x>"}, "-dead-topic"},
		{[]string{"purge", "-nats-url", "nats://127.0.0.1:1", "-yes", "-retry-topic", ""}, "-retry-topic"},
		{[]string{"replay", "-nats-url", "nats://127.0.0.1:1", "-retry-topic", "same", "-dead-topic", "same"}, "-retry-topic and -dead-topic must differ"},
		{[]string{"replay", "-nats-url", "nats://127.0.0.1:1", "-limit", "-1"}, "-limit"},
		{[]string{"replay", "-nats-url", "nats://127.0.0.1:1", "-topic", "a", "-original-topic", "b"}, "-original-topic"},
	} {
		code, _, errOut := runCmd(tc.args...)
		if code != exitUsage || !strings.Contains(errOut, tc.flag) {
			t.Errorf("%v: exit %d, %q; want 2 naming %s", tc.args, code, errOut, tc.flag)
		}
	}
	code, _, errOut := runCmd("backlog", "-nats-url", "nats://127.0.0.1:1", "-timeout", "2s")
	if code != exitError || !strings.Contains(errOut, "connect") {
		t.Errorf("unreachable server: exit %d, %q", code, errOut)
	}
	for _, c := range []string{"backlog", "purge"} {
		code, _, e := runCmd(c, "-h")
		if code != exitOK || !strings.Contains(e, "Usage: floodgate "+c) || !strings.Contains(e, "-retry-topic") {
			t.Errorf("%s -h: %d %q", c, code, e)
		}
	}
}

// TestReplayCommand: replay selects by -original-topic (or its alias
// -topic) and honours -limit, for a dry run and a real one; dead letters
// beyond the limit stay.
func TestReplayCommand(t *testing.T) {
	s := newStreams(t, nil, []string{"edi_orders", "geofence_triggers", "edi_orders", "edi_orders", "edi_orders"})
	deadUUID := func(i int) string { return "uuid-" + s.dead + "-" + string(rune('a'+i)) }
	replay := func(extra ...string) (retryqueue.ReplayResult, string) {
		t.Helper()
		code, out, errOut := runCmd(append([]string{"replay"}, s.flags(append([]string{"-format", "json"}, extra...)...)...)...)
		if code != exitOK {
			t.Fatalf("replay %v: exit %d: %s", extra, code, errOut)
		}
		var res retryqueue.ReplayResult
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatalf("replay %v: %v\n%s", extra, err, out)
		}
		return res, out
	}

	// Regression: -limit 1 replayed (or would replay) all of them.
	if res, out := replay("-limit", "1", "-dry-run"); res.Selected != 1 || res.Replayed != 0 || len(res.UUIDs) != 1 || !strings.Contains(out, `"dry_run": true`) {
		t.Errorf("dry run -limit 1: %s", out)
	}
	code, out, errOut := runCmd(append([]string{"replay"}, s.flags("-limit", "2", "-dry-run")...)...)
	if code != exitOK || !strings.Contains(out, "selected 2, would replay 2 to "+s.retry) {
		t.Errorf("dry run -limit 2 table: exit %d, %q, %q", code, out, errOut)
	}
	if rep := backlogJSON(t, s); rep.Dead.Messages != 5 || rep.Retry.Messages != 0 {
		t.Fatalf("dry runs moved messages: %+v", rep)
	}

	res, _ := replay("-original-topic", "edi_orders", "-limit", "2")
	if res.Selected != 2 || res.Replayed != 2 || strings.Join(res.UUIDs, " ") != deadUUID(0)+" "+deadUUID(2) {
		t.Errorf("-original-topic edi_orders -limit 2: %+v", res)
	}
	rep := backlogJSON(t, s)
	if got := counts(rep.Dead); rep.Dead.Messages != 3 || got["edi_orders"] != 2 || got["geofence_triggers"] != 1 || rep.Retry.Messages != 2 {
		t.Errorf("after -limit 2: dead %+v, retry %d", rep.Dead, rep.Retry.Messages)
	}

	// -topic is an alias of -original-topic; both at once must agree.
	res, _ = replay("-topic", "edi_orders", "-original-topic", "edi_orders", "-limit", "1")
	if res.Replayed != 1 || len(res.UUIDs) != 1 || res.UUIDs[0] != deadUUID(3) {
		t.Errorf("-topic and -original-topic alike: %+v", res)
	}
	res, _ = replay("-topic", "edi_orders")
	if res.Replayed != 1 || len(res.UUIDs) != 1 || res.UUIDs[0] != deadUUID(4) {
		t.Errorf("-topic edi_orders: %+v", res)
	}
	rep = backlogJSON(t, s)
	if got := counts(rep.Dead); rep.Dead.Messages != 1 || got["geofence_triggers"] != 1 || rep.Retry.Messages != 4 {
		t.Errorf("after the alias: dead %+v, retry %d", rep.Dead, rep.Retry.Messages)
	}

	code, _, errOut = runCmd("replay", "-h")
	if code != exitOK || !strings.Contains(errOut, "-original-topic topic") || !strings.Contains(errOut, "alias") {
		t.Errorf("replay -h: %d %q", code, errOut)
	}
}

// purge -service and -partner remove only the selected routes' messages.
func TestPurgeByRoute(t *testing.T) {
	s := newStreams(t, []string{"edi_orders", "geofence_triggers", "edi_orders"}, []string{"edi_orders", "geofence_triggers", "edi_orders"})
	code, out, errOut := runCmd(append([]string{"purge"}, s.flags("-yes", "-queue", "retry", "-service", "edi_orders/deliver", "-partner", "p1", "-format", "json")...)...)
	var pr purgeReport
	if code != exitOK || json.Unmarshal([]byte(out), &pr) != nil || pr.Selected != 2 || pr.Purged != 2 {
		t.Fatalf("purge by route: exit %d, %+v, %q", code, pr, errOut)
	}
	if rep := backlogJSON(t, s); rep.Retry.Messages != 1 || rep.Dead.Messages != 3 {
		t.Fatalf("after purging one route: retry %d dead %d, want 1 and 3", rep.Retry.Messages, rep.Dead.Messages)
	}
}

// replay -service and -partner select only those routes' dead letters.
func TestReplayByRoute(t *testing.T) {
	s := newStreams(t, nil, []string{"edi_orders", "geofence_triggers", "edi_orders", "edi_orders", "edi_orders"})
	for _, tc := range []struct {
		args []string
		want int
	}{
		{[]string{"-service", "edi_orders/deliver", "-partner", "p1"}, 3}, // messages 0, 2, 4
		{[]string{"-service", "edi_orders/deliver", "-partner", "p2"}, 1},
		{[]string{"-partner", "p2"}, 2},
		{[]string{"-service", "nobody"}, 0},
	} {
		code, out, errOut := runCmd(append([]string{"replay"}, s.flags(append([]string{"-format", "json", "-dry-run"}, tc.args...)...)...)...)
		var res retryqueue.ReplayResult
		if code != exitOK || json.Unmarshal([]byte(out), &res) != nil {
			t.Fatalf("replay %v: exit %d, %q, %q", tc.args, code, out, errOut)
		}
		if res.Selected != tc.want {
			t.Errorf("replay %v: selected %d, want %d", tc.args, res.Selected, tc.want)
		}
	}
	code, out, errOut := runCmd(append([]string{"replay"}, s.flags("-format", "json", "-service", "edi_orders/deliver", "-partner", "p1")...)...)
	if code != exitOK {
		t.Fatalf("replay: exit %d, %q", code, errOut)
	}
	rep := backlogJSON(t, s)
	if rep.Dead.Messages != 2 || rep.Retry.Messages != 3 {
		t.Fatalf("after replay of p1: dead %d, retry %d, want 2 and 3 (%s)", rep.Dead.Messages, rep.Retry.Messages, out)
	}
}
