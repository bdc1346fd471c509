package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/floodgate-go/floodgate/internal/natstest"
	"github.com/floodgate-go/floodgate/jsq"
	"github.com/floodgate-go/floodgate/retryqueue"
)

// oldLayout creates retry and dead-letter streams as the previous release
// did (the stream's name as its only subject; a work-queue retry stream
// with an unfiltered drainer consumer holding unacked messages) and stores
// messages on the bare subjects: for each original topic in retry (dead)
// that many. It returns the streams and the UUIDs stored in each.
func oldLayout(t *testing.T, retry, dead map[string]int) (s *streams, ids map[string][]string) {
	t.Helper()
	ctx := context.Background()
	s = &streams{url: natstest.URL(t), retry: natstest.Name(t, "retry"), dead: natstest.Name(t, "dead")}
	s.js = natstest.JetStream(t, natstest.Conn(t, s.url))
	natstest.DeleteStreams(t, s.js, s.retry, s.dead)
	rc := jsq.StreamConfig(s.retry)
	rc.Retention = jetstream.WorkQueuePolicy
	if _, err := s.js.CreateStream(ctx, rc); err != nil {
		t.Fatal(err)
	}
	if _, err := s.js.CreateStream(ctx, jsq.StreamConfig(s.dead)); err != nil {
		t.Fatal(err)
	}
	ids = map[string][]string{}
	for _, st := range []struct {
		name   string
		topics map[string]int
	}{{s.retry, retry}, {s.dead, dead}} {
		for topic, n := range st.topics {
			for i := range n {
				id := fmt.Sprintf("%s-%s-%d", st.name, topic, i)
				m := message.NewMessage(id, []byte("ISA*00*PO "+id+"~"))
				m.Metadata.Set(retryqueue.MetaOriginalTopic, topic)
				m.Metadata.Set(retryqueue.MetaAttempt, "2")
				if _, err := s.js.PublishMsg(ctx, jsq.Marshal(st.name, m)); err != nil {
					t.Fatal(err)
				}
				ids[st.name] = append(ids[st.name], id)
			}
		}
	}
	oc, err := s.js.CreateConsumer(ctx, s.retry, jetstream.ConsumerConfig{Durable: "floodgate_drainer", AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	b, err := oc.FetchNoWait(3)
	if err != nil {
		t.Fatal(err)
	}
	for range b.Messages() { // delivered, never acked
	}
	return s, ids
}

// stored returns the subjects of stream with their message counts, and the
// UUIDs of its messages, sorted.
func stored(t *testing.T, s *streams, stream string) (map[string]uint64, []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := s.js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(">"))
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range natstest.StreamMsgs(t, s.js, stream) {
		ids = append(ids, m.UUID)
	}
	sort.Strings(ids)
	return info.State.Subjects, ids
}

func migrateJSON(t *testing.T, s *streams, wantCode int, extra ...string) migrateReport {
	t.Helper()
	args := append([]string{"migrate", "-nats-url", s.url, "-retry-topic", s.retry, "-dead-topic", s.dead, "-format", "json"}, extra...)
	code, out, errOut := runCmd(args...)
	if code != wantCode {
		t.Fatalf("migrate %v: exit %d, want %d: %s", extra, code, wantCode, errOut)
	}
	var rep migrateReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("migrate JSON: %v\n%s", err, out)
	}
	return rep
}

// floodgate migrate moves every message stored on the previous layout's
// bare subjects onto the route subject of -source/-handler, none lost, with
// its metadata; deletes the old unfiltered drainer consumer; leaves streams
// a new release's Provision accepts; and a second run does nothing. A dry
// run changes nothing.
func TestMigrateCommand(t *testing.T) {
	const topic, nr, nd = "edi_orders", 40, 6
	s, ids := oldLayout(t, map[string]int{topic: nr}, map[string]int{topic: nd})
	service := retryqueue.ServiceName(topic, "as2")
	route := map[string]string{
		s.retry: retryqueue.RouteSubject(s.retry, service, retryqueue.DefaultPartner),
		s.dead:  retryqueue.RouteSubject(s.dead, service, retryqueue.DefaultPartner),
	}

	dry := migrateJSON(t, s, exitOK, "-source", topic, "-handler", "as2", "-dry-run")
	if dry.Moved != 0 || dry.Streams[0].Bare[topic] != nr || dry.Streams[1].Bare[topic] != nd ||
		!slices.Equal(dry.UnfilteredConsumers, []string{s.retry + "/floodgate_drainer"}) {
		t.Fatalf("dry run = %+v", dry)
	}
	if subj, _ := stored(t, s, s.retry); subj[s.retry] != nr {
		t.Fatalf("dry run changed the retry stream: %v", subj)
	}

	rep := migrateJSON(t, s, exitOK, "-source", topic, "-handler", "as2")
	if rep.Moved != nr+nd || !slices.Equal(rep.UnfilteredConsumers, []string{s.retry + "/floodgate_drainer"}) {
		t.Fatalf("migrate = %+v, want %d moved and the old consumer deleted", rep, nr+nd)
	}
	for _, stream := range []string{s.retry, s.dead} {
		subj, got := stored(t, s, stream)
		want := slices.Clone(ids[stream])
		sort.Strings(want)
		if len(subj) != 1 || subj[route[stream]] != uint64(len(want)) || !slices.Equal(got, want) {
			t.Fatalf("%s after migrate: subjects %v, messages %v; want all %d on %s", stream, subj, got, len(want), route[stream])
		}
	}
	for _, m := range natstest.StreamMsgs(t, s.js, s.retry) {
		if m.Metadata.Get(retryqueue.MetaAttempt) != "2" || m.Metadata.Get(retryqueue.MetaService) != service {
			t.Fatalf("metadata after migrate: %v", m.Metadata)
		}
	}
	ctx := context.Background()
	if _, err := s.js.Consumer(ctx, s.retry, "floodgate_drainer"); err == nil {
		t.Fatal("the old unfiltered consumer is still there")
	}
	if err := retryqueue.Provision(ctx, s.js, retryqueue.Config{Source: topic, Handler: "as2", RetryTopic: s.retry, DeadLetterTopic: s.dead}); err != nil {
		t.Fatalf("Provision after migrate: %v", err)
	}

	again := migrateJSON(t, s, exitOK, "-source", topic, "-handler", "as2")
	if again.Moved != 0 || again.Streams[0].Layout != "route" || again.Streams[1].Layout != "route" || len(again.UnfilteredConsumers) != 0 {
		t.Fatalf("second run = %+v, want nothing to do", again)
	}
	if _, got := stored(t, s, s.retry); len(got) != nr {
		t.Fatalf("second run: %d messages in the retry stream, want %d", len(got), nr)
	}
}

// A previous-layout stream shared by several services holds their messages
// mixed: migrate refuses to move another topic's messages to this route
// (they would reach its partner), changing nothing, unless -all-topics.
func TestMigrateRefusesOtherTopics(t *testing.T) {
	s, _ := oldLayout(t, map[string]int{"orders_a": 5, "orders_b": 3}, nil)
	code, _, errOut := runCmd("migrate", "-nats-url", s.url, "-retry-topic", s.retry, "-dead-topic", s.dead, "-source", "orders_a")
	if code != exitError || !strings.Contains(errOut, "orders_b in "+s.retry+": 3") || !strings.Contains(errOut, "-all-topics") {
		t.Fatalf("mixed topics: exit %d, %q; want 1 naming orders_b and -all-topics", code, errOut)
	}
	if subj, _ := stored(t, s, s.retry); subj[s.retry] != 8 || len(subj) != 1 {
		t.Fatalf("refused migrate changed the stream: %v", subj)
	}
	rep := migrateJSON(t, s, exitOK, "-service", "orders/all", "-all-topics")
	if rep.Moved != 8 {
		t.Fatalf("-all-topics = %+v, want 8 moved", rep)
	}
}

func TestMigrateBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-nats-url", "nats://127.0.0.1:1"}, "-source or -service is required"},
		{[]string{"-nats-url", "nats://127.0.0.1:1", "-service", "s", "-source", "x"}, "-service names the route"},
		{[]string{"-nats-url", "nats://127.0.0.1:1", "-service", "s"}, "-original-topic is required"},
		{[]string{"-nats-url", "nats://127.0.0.1:1", "-source", "x", "-all-topics"}, "-all-topics"},
		{[]string{"-nats-url", "nats://127.0.0.1:1", "-source", "x", "-partner", ""}, "-partner"},
		{[]string{"-nats-url", "nats://127.0.0.1:1", "-source", "x", "-retry-topic", "a.b"}, "-retry-topic"},
		{[]string{"-nats-url", "nats://127.0.0.1:1", "-source", "x", "extra"}, "extra"},
	} {
		code, out, e := runCmd(append([]string{"migrate"}, tc.args...)...)
		if code != exitUsage || out != "" || !strings.Contains(e, tc.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 2 naming %q", tc.args, code, out, e, tc.want)
		}
	}
}
