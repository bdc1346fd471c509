package main

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/floodgate-go/floodgate/internal/natstest"
	"github.com/floodgate-go/floodgate/jsq"
	"github.com/floodgate-go/floodgate/retryqueue"
)

// TestDeadLetters: list and show read what retryqueue wrote (reason, last
// error, attempt history, route, size, preview), filter by reason, topic,
// partner and age, in table and JSON.
func TestDeadLetters(t *testing.T) {
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
	for i, c := range []struct{ partner, topic, reason string }{
		{"ACME", "edi_orders", retryqueue.DeadReasonMaxAttempts},
		{"Globex", "edi_orders", retryqueue.DeadReasonPermanent},
		{"ACME", "invoices", retryqueue.DeadReasonPermanent},
	} {
		m := message.NewMessage("dl-"+string(rune('a'+i)), []byte("ISA*00*\x01 order "+c.partner))
		m.Metadata.Set(retryqueue.MetaOriginalTopic, c.topic)
		if err := q.DeadLetterTo(ctx, m, c.partner, c.reason, errors.New("HTTP 503 from "+c.partner)); err != nil {
			t.Fatal(err)
		}
	}

	list := func(extra ...string) deadLetterList {
		t.Helper()
		code, out, errOut := runCmd(append([]string{"deadletters", "list"}, s.flags(append([]string{"-format", "json"}, extra...)...)...)...)
		var l deadLetterList
		if code != exitOK || json.Unmarshal([]byte(out), &l) != nil {
			t.Fatalf("list %v: exit %d, %q, %q", extra, code, out, errOut)
		}
		return l
	}
	l := list()
	if l.Scanned != 3 || l.Matched != 3 || len(l.DeadLetters) != 3 {
		t.Fatalf("list: %+v", l)
	}
	d := l.DeadLetters[0]
	if d.UUID != "dl-a" || d.Seq == 0 || d.Service != "orders/as2" || d.Partner != "ACME" || d.OriginalTopic != "edi_orders" ||
		d.Reason != retryqueue.DeadReasonMaxAttempts || d.LastError != "HTTP 503 from ACME" || d.SizeBytes != len("ISA*00*\x01 order ACME") ||
		d.PayloadPreview != "ISA*00*. order ACME" || d.DeadLetteredAt == "" {
		t.Errorf("first dead letter: %+v", d)
	}
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"-reason", retryqueue.DeadReasonPermanent}, []string{"dl-b", "dl-c"}},
		{[]string{"-original-topic", "invoices"}, []string{"dl-c"}},
		{[]string{"-partner", "ACME"}, []string{"dl-a", "dl-c"}},
		{[]string{"-partner", "ACME", "-reason", retryqueue.DeadReasonPermanent}, []string{"dl-c"}},
		{[]string{"-older-than", "1h"}, nil},
		{[]string{"-newer-than", "1h"}, []string{"dl-a", "dl-b", "dl-c"}},
		{[]string{"-limit", "1"}, []string{"dl-a"}},
	} {
		var got []string
		for _, d := range list(tc.args...).DeadLetters {
			got = append(got, d.UUID)
		}
		if strings.Join(got, ",") != strings.Join(tc.want, ",") {
			t.Errorf("list %v: %v, want %v", tc.args, got, tc.want)
		}
	}

	code, out, errOut := runCmd(append([]string{"deadletters", "list"}, s.flags()...)...)
	if code != exitOK || !strings.Contains(out, "dl-b") || !strings.Contains(out, "HTTP 503 from Globex") || !strings.Contains(out, "3 of 3 dead letters") {
		t.Errorf("list table: exit %d, %q, %q", code, out, errOut)
	}

	// show by UUID (flags after the argument too) and by sequence.
	code, out, errOut = runCmd(append([]string{"deadletters", "show", "dl-b"}, s.flags("-format", "json")...)...)
	var one deadLetter
	if code != exitOK || json.Unmarshal([]byte(out), &one) != nil || one.UUID != "dl-b" || one.Partner != "Globex" ||
		len(one.History) == 0 || one.History[len(one.History)-1].Event != retryqueue.EventDeadLettered || one.Metadata[retryqueue.MetaDeadReason] != "permanent" {
		t.Errorf("show dl-b: exit %d, %+v, %q", code, one, errOut)
	}
	code, out, errOut = runCmd(append([]string{"deadletters", "show"}, s.flags("1")...)...)
	if code != exitOK || !strings.Contains(out, "dl-a") || !strings.Contains(out, "history:") || !strings.Contains(out, "dead-lettered") || !strings.Contains(out, "payload (") {
		t.Errorf("show 1: exit %d, %q, %q", code, out, errOut)
	}
	for _, id := range []string{"999", "no-such-uuid"} {
		if code, _, errOut := runCmd(append([]string{"deadletters", "show", id}, s.flags()...)...); code != exitError || !strings.Contains(errOut, "no dead letter") {
			t.Errorf("show %s: exit %d, %q", id, code, errOut)
		}
	}
	for _, args := range [][]string{{"deadletters"}, {"deadletters", "show"}, {"deadletters", "list", "x"}, {"deadletters", "list", "-limit", "-1"}} {
		if code, _, _ := runCmd(args...); code != exitUsage {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
}

func TestPreview(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{
		{"hello", 32, "hello"},
		{"hello world", 5, "hello…"},
		{"a\x00b\nc", 32, `a.b\nc`},
		{"\xff\xfe\x00", 32, "hex:fffe00"},
		{"héllo", 2, "h.…"},
	} {
		if got := previewOf([]byte(tc.in), tc.n); got != tc.want {
			t.Errorf("previewOf(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
}

// Fields of a dead letter come from outside: control bytes in them (a
// terminal escape sequence) are shown quoted, never written raw.
func TestDeadLettersEscapeControlBytes(t *testing.T) {
	s := newStreams(t, nil, nil)
	pub, err := jsq.NewPublisher(jsq.PublisherConfig{Conn: natstest.Conn(t, s.url)})
	if err != nil {
		t.Fatal(err)
	}
	q, err := retryqueue.New(retryqueue.Config{Publisher: pub, Service: "orders/as2", RetryTopic: s.retry, DeadLetterTopic: s.dead})
	if err != nil {
		t.Fatal(err)
	}
	m := message.NewMessage("evil\x1b[2J", []byte("payload"))
	m.Metadata.Set(retryqueue.MetaOriginalTopic, "topic\x1b]0;pwned\x07")
	m.Metadata.Set("x-note\x1b[31m", "red\x1b[0m")
	if err := q.DeadLetterTo(context.Background(), m, "ACME", retryqueue.DeadReasonPermanent, errors.New("HTTP 400\x1b[1A")); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"deadletters", "list"}, {"deadletters", "show", "1"}} {
		code, out, errOut := runCmd(append(args, s.flags()...)...)
		if code != exitOK || !strings.Contains(out, `evil\x1b[2J`) {
			t.Fatalf("%v: exit %d, %q, %q", args, code, out, errOut)
		}
		if strings.ContainsAny(out, "\x1b\x07") {
			t.Errorf("%v writes control bytes raw:\n%q", args, out)
		}
	}
}
