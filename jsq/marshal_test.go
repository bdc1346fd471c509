package jsq_test

import (
	"testing"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/floodgate-go/floodgate/jsq"
)

// TestMarshalHeaders: every metadata key becomes a header of one value, the
// UUID header is the message's UUID (a metadata key of that name loses), and
// the values, which share one array, stay apart when one is appended to.
func TestMarshalHeaders(t *testing.T) {
	m := message.NewMessage("uuid-1", []byte("body"))
	want := map[string]string{"a": "1", "b": "2", "c": "3", "d": "4", "e": "5"}
	for k, v := range want {
		m.Metadata.Set(k, v)
	}
	m.Metadata.Set(jsq.UUIDHeader, "forged")
	nm := jsq.Marshal("topic.x", m)
	if nm.Subject != "topic.x" || string(nm.Data) != "body" {
		t.Fatalf("subject %q, data %q", nm.Subject, nm.Data)
	}
	if got := nm.Header.Values(jsq.UUIDHeader); len(got) != 1 || got[0] != "uuid-1" {
		t.Fatalf("%s = %q, want [uuid-1]", jsq.UUIDHeader, got)
	}
	if len(nm.Header) != len(want)+1 {
		t.Fatalf("%d headers, want %d", len(nm.Header), len(want)+1)
	}
	for k := range want {
		nm.Header.Add(k, "extra")
	}
	for k, v := range want {
		if got := nm.Header.Values(k); len(got) != 2 || got[0] != v || got[1] != "extra" {
			t.Errorf("header %s = %q, want [%s extra]", k, got, v)
		}
	}
	if got := nm.Header.Values(jsq.UUIDHeader); len(got) != 1 || got[0] != "uuid-1" {
		t.Errorf("%s = %q after appends, want [uuid-1]", jsq.UUIDHeader, got)
	}
}
