package permissions_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/floodgate-go/floodgate/deliver/as2/asyncmdn"
	"github.com/floodgate-go/floodgate/jsq"
	"github.com/floodgate-go/floodgate/permissions"
)

func TestReceiptBucketAndSources(t *testing.T) {
	cfg := permissions.Config{Role: permissions.RoleService, Service: "s", RetryTopic: "retry_s", DeadLetterTopic: "dead_s",
		ReceiptBucket: "rcpt_s", Sources: []permissions.Source{{Topic: "edi.in"}, {Topic: "flat", Consumer: "mine"}}}
	s, err := permissions.Generate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	want := append(asyncmdn.ServiceAccess("rcpt_s"), jsq.SubscriberAccess("edi.in", jsq.DefaultConsumerName("edi.in"))...)
	want = append(want, jsq.SubscriberAccess("flat", "mine")...)
	for _, w := range want {
		if !slices.Contains(s.Publish.Allow, w) {
			t.Errorf("publish allow lacks %q", w)
		}
	}
	for _, a := range s.Publish.Allow {
		if strings.HasPrefix(a, "$JS.API.CONSUMER.") && strings.Contains(a, ".flat.") && !strings.Contains(a, ".flat.mine") {
			t.Errorf("grant %q reaches another consumer of the source", a)
		}
	}
	ro := cfg
	ro.Role = permissions.RoleReadOnly
	if s, err = permissions.Generate(ro); err != nil {
		t.Fatal(err)
	}
	if slices.Contains(s.Publish.Allow, "$KV.rcpt_s.>") || !slices.Contains(s.Publish.Allow, "$JS.API.STREAM.INFO.KV_rcpt_s") {
		t.Errorf("read-only receipt bucket grant %q", s.Publish.Allow)
	}
	for field, c := range map[string]permissions.Config{
		"ReceiptBucket":       {Role: permissions.RoleReadOnly, ReceiptBucket: "a.>"},
		"Sources[0].Topic":    {Role: permissions.RoleReadOnly, Sources: []permissions.Source{{Topic: "a.*"}}},
		"Sources[0].Consumer": {Role: permissions.RoleReadOnly, Sources: []permissions.Source{{Topic: "a", Consumer: "x.>"}}},
	} {
		if _, err := permissions.Generate(c); !errors.Is(err, permissions.ErrInvalidConfig) || !strings.Contains(err.Error(), field) {
			t.Errorf("%s: err %v, want ErrInvalidConfig naming the field", field, err)
		}
	}
}
