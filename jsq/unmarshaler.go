package jsq

import (
	"fmt"
	"sort"
	"strings"

	wmnats "github.com/ThreeDotsLabs/watermill-nats/v2/pkg/nats"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"
)

// UUIDHeader is the NATS header holding the Watermill message UUID, as in
// watermill-nats.
const UUIDHeader = wmnats.WatermillUUIDHdr

// MetaMalformed is the metadata key [Unmarshal] sets on a message whose
// headers could not be mapped to metadata faithfully; its value says why.
const MetaMalformed = "floodgate_malformed"

// uuidNamespace derives stable UUIDs for messages that carry none.
var uuidNamespace = uuid.MustParse("4a1b8d0e-6f0c-4f38-9d55-2c7f0c3b9e61")

// Reserved reports whether a NATS header belongs to the server or the wire
// format rather than to the message metadata: the UUID header and every
// header starting with "Nats-" (Nats-Msg-Id, Nats-Expected-*, Nats-Rollup,
// ...). Reserved headers never become metadata, and metadata keys that are
// reserved are not copied into diverted messages.
func Reserved(header string) bool {
	return header == UUIDHeader || strings.HasPrefix(header, "Nats-")
}

// Unmarshal turns a JetStream message into a Watermill message: UUID from
// the UUID header, payload from the data, metadata from the other
// non-[Reserved] headers. It never fails:
//   - a header with several values keeps its first value, and the message
//     gets metadata [MetaMalformed] naming the header;
//   - a message without a UUID header gets a UUID derived from its stream
//     name and stream sequence, stable across redeliveries (random if the
//     JetStream metadata is unavailable).
//
// The message context is not set.
func Unmarshal(msg jetstream.Msg) *message.Message {
	hdr := msg.Headers()
	md := make(message.Metadata, len(hdr))
	var multi []string
	for k, v := range hdr {
		if Reserved(k) || len(v) == 0 {
			continue
		}
		md.Set(k, v[0])
		if len(v) > 1 {
			multi = append(multi, k)
		}
	}
	if len(multi) > 0 {
		sort.Strings(multi)
		md.Set(MetaMalformed, fmt.Sprintf("multiple values in NATS header %q", multi))
	}
	id := hdr.Get(UUIDHeader)
	if id == "" {
		if meta, err := msg.Metadata(); err == nil {
			id = uuid.NewSHA1(uuidNamespace, fmt.Appendf(nil, "%s:%d", meta.Stream, meta.Sequence.Stream)).String()
		} else {
			id = uuid.NewString()
		}
	}
	m := message.NewMessage(id, msg.Data())
	m.Metadata = md
	return m
}

// Unmarshaler is a watermill-nats pkg/jetstream Unmarshaler using
// [Unmarshal]; its error is always nil.
type Unmarshaler struct{}

// Unmarshal implements watermill-nats' jetstream.Unmarshaler with [Unmarshal].
func (Unmarshaler) Unmarshal(msg jetstream.Msg) (*message.Message, error) {
	return Unmarshal(msg), nil
}
