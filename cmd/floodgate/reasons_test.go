package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/floodgate-go/floodgate/internal/natstest"
	"github.com/floodgate-go/floodgate/jsq"
	"github.com/floodgate-go/floodgate/retryqueue"
)

// TestReasonFilters: -reason of deadletters list, replay and purge selects
// by the reason's category (as the metrics' label: "too-large:
// max-attempts" is too-large, a reason of the caller's own is other), and
// an unknown reason is a bad command line naming the valid ones, not a
// silent 0 matches.
func TestReasonFilters(t *testing.T) {
	s := newStreams(t, nil, nil)
	ctx := context.Background()
	pub, err := jsq.NewPublisher(jsq.PublisherConfig{Conn: natstest.Conn(t, s.url)})
	if err != nil {
		t.Fatal(err)
	}
	q, err := retryqueue.New(retryqueue.Config{Publisher: pub, Service: "orders/as2", RetryTopic: s.retry, DeadLetterTopic: s.dead})
	if err != nil {
		t.Fatal(err)
	}
	for i, reason := range []string{retryqueue.DeadReasonMaxAttempts, retryqueue.DeadReasonPermanent,
		retryqueue.DeadReasonTooLarge + ": " + retryqueue.DeadReasonMaxAttempts, "invalid-edi"} {
		m := message.NewMessage(fmt.Sprintf("dl-%c", 'a'+i), []byte("ISA*00*"))
		m.Metadata.Set(retryqueue.MetaOriginalTopic, "edi_orders")
		if err := q.DeadLetterTo(ctx, m, "ACME", reason, errors.New("HTTP 503")); err != nil {
			t.Fatal(err)
		}
	}
	uuids := func(args ...string) string {
		t.Helper()
		code, out, errOut := runCmd(append(args, s.flags("-format", "json")...)...)
		var res struct {
			UUIDs       []string     `json:"uuids"`
			DeadLetters []deadLetter `json:"dead_letters"`
			Purged      int          `json:"purged"`
		}
		if code != exitOK || json.Unmarshal([]byte(out), &res) != nil {
			t.Fatalf("%v: exit %d, %q, %q", args, code, out, errOut)
		}
		for _, d := range res.DeadLetters {
			res.UUIDs = append(res.UUIDs, d.UUID)
		}
		if args[0] == "purge" {
			return fmt.Sprint(res.Purged)
		}
		return strings.Join(res.UUIDs, ",")
	}
	for _, tc := range [][2]string{
		{retryqueue.DeadReasonMaxAttempts, "dl-a"}, {retryqueue.DeadReasonTooLarge, "dl-c"}, {"other", "dl-d"}, {"max-age", ""},
	} {
		if got := uuids("deadletters", "list", "-reason", tc[0]); got != tc[1] {
			t.Errorf("list -reason %s: %q, want %q", tc[0], got, tc[1])
		}
	}
	for _, args := range [][]string{{"deadletters", "list"}, {"replay"}, {"purge", "-yes"}} {
		code, out, errOut := runCmd(append(append(args, "-reason", "max-attempt"), s.flags()...)...)
		if code != exitUsage || out != "" || strings.Count(errOut, `unknown reason "max-attempt"`) != 1 ||
			!strings.Contains(errOut, "max-attempts, max-age") || !strings.Contains(errOut, "metadata-too-large, other") {
			t.Errorf("%v -reason max-attempt: exit %d, out %q, err %q; want 2 listing the reasons", args, code, out, errOut)
		}
	}
	if code, _, errOut := runCmd(append([]string{"purge", "-queue", "retry", "-yes", "-reason", "permanent"}, s.flags()...)...); code != exitUsage || !strings.Contains(errOut, "-queue dead") {
		t.Errorf("purge -queue retry -reason: exit %d, %q", code, errOut)
	}

	if got := uuids("replay", "-reason", retryqueue.DeadReasonPermanent, "-dry-run"); got != "dl-b" {
		t.Errorf("replay -reason permanent -dry-run: %q, want dl-b", got)
	}
	if got := uuids("replay", "-reason", retryqueue.DeadReasonPermanent); got != "dl-b" {
		t.Errorf("replay -reason permanent: %q, want dl-b", got)
	}
	if got := uuids("purge", "-reason", "other", "-yes"); got != "1" {
		t.Errorf("purge -reason other: purged %s, want 1", got)
	}
	if got := uuids("deadletters", "list"); got != "dl-a,dl-c" {
		t.Errorf("after replaying permanent and purging other: %q, want dl-a,dl-c", got)
	}
}

// TestReasonsAndPreviewDocumented: the README's metrics reasons are the
// ones -reason accepts (both from the code's constants), and the README
// gives the -preview defaults the flags have.
func TestReasonsAndPreviewDocumented(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	m := regexp.MustCompile("`floodgate_dead_lettered_total`[^\n]*confirmed dead letters of the middleware: ([^|]*) \\|").FindStringSubmatch(readme)
	if m == nil {
		t.Fatal("README has no floodgate_dead_lettered_total row")
	}
	if got, want := strings.TrimSpace(m[1]), reasonValues(); got != want {
		t.Errorf("README's dead-letter reasons %q, -reason accepts %q", got, want)
	}
	want := fmt.Sprintf("(`-preview` bytes, default %d; `list -format json` previews %d)", showPreview, listPreview)
	if !strings.Contains(strings.Join(strings.Fields(readme), " "), want) {
		t.Errorf("README does not say %q", want)
	}
	_, _, errOut := runCmd("deadletters", "show", "-h")
	if !strings.Contains(errOut, fmt.Sprintf("default %d for show, %d for list", showPreview, listPreview)) {
		t.Errorf("deadletters show -h: %q", errOut)
	}
}

// TestFlagErrorShort: a bad flag prints its error once and one line
// pointing at -h, not the whole usage; exit status 2.
func TestFlagErrorShort(t *testing.T) {
	for _, args := range [][]string{{"status"}, {"open"}, {"backlog"}, {"deadletters", "list"}, {"deadletters", "show"},
		{"replay"}, {"purge"}, {"migrate"}, {"sim"}} {
		code, out, errOut := runCmd(append(args, "-bogus")...)
		name := "floodgate " + strings.Join(args, " ")
		want := name + ": flag provided but not defined: -bogus\nrun '" + name + " -h' for usage\n"
		if code != exitUsage || out != "" || errOut != want {
			t.Errorf("%v -bogus: exit %d, out %q, err %q; want 2 and %q", args, code, out, errOut, want)
		}
	}
	// -h still prints the usage, exit 0.
	if code, _, errOut := runCmd("replay", "-h"); code != exitOK || !strings.Contains(errOut, "Usage: floodgate replay") {
		t.Errorf("replay -h: exit %d, %q", code, errOut)
	}
}
