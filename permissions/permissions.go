// Package permissions generates the NATS permissions of a floodgate
// service's user and of an operator's read-only and read-write CLI users,
// from the functions that build floodgate's subjects, streams, consumers
// and keys ([retryqueue.ServiceAccess], [natskv.ServiceAccess],
// [asyncmdn.ServiceAccess], their OperatorAccess, and
// [jsq.SubscriberAccess]), so the grant cannot drift from what the code
// does.
// "floodgate permissions" prints it as a nats-server configuration block or
// JSON.
//
// Isolation is per stream: every service has its own retry stream,
// dead-letter stream, payload bucket, breaker bucket and pending-receipts
// bucket; on a source topic it may use only its own durable consumer.
// JetStream's stream-level APIs (stream info, get by sequence, purge, and a KV watch)
// name only the stream, so a permission cannot limit them to one service's
// subjects; with a stream per service, a service's user is granted them on
// its own streams only. Inside its streams the route layout (one subject and
// one consumer per partner) is unchanged.
//
// Replies (JetStream API answers, publish acknowledgements, fetched
// messages, KV watch updates) arrive on the requester's inbox. A service's
// user may subscribe only on [InboxPrefix] of its service; connect it with
// nats.CustomInboxPrefix(InboxPrefix(service)) ([InboxOption]). Operators'
// users subscribe on _INBOX.>, which no service uses.
package permissions

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/nats-io/nats.go"

	"github.com/floodgate-go/floodgate/breaker/natskv"
	"github.com/floodgate-go/floodgate/deliver/as2/asyncmdn"
	"github.com/floodgate-go/floodgate/jsq"
	"github.com/floodgate-go/floodgate/partner"
	"github.com/floodgate-go/floodgate/retryqueue"
)

// Role is whose permissions [Generate] builds.
type Role string

// Roles.
const (
	// RoleService is a service's replicas: divert, dead-letter and drain
	// its own routes, share its breakers.
	RoleService Role = "service"
	// RoleReadOnly is an operator running "floodgate status" and
	// "backlog": stream and consumer info (counts by route) and the
	// breaker bucket's states, which are operational state. It reads no
	// message: no retry message, dead letter or stored payload (their
	// contents are the partners' documents), so "backlog" shows counts by
	// route without the original topics and ages, and "deadletters" is
	// refused. It never changes anything.
	RoleReadOnly Role = "ro"
	// RoleReadWrite is an operator who also reads the messages
	// ("deadletters list" and "show", the full "backlog") and runs
	// "purge", "replay", "open", "close", "reset" and "migrate".
	RoleReadWrite Role = "rw"
)

// ErrInvalidConfig is returned (wrapped) by [Generate] for a bad [Config];
// the message names the field.
var ErrInvalidConfig = errors.New("permissions: invalid config")

// Config names the service and its assets. Take the names from the
// service's retryqueue.Config and natskv.Config.
type Config struct {
	// Role is whose permissions to generate. Required.
	Role Role
	// Service is retryqueue.Config.Service (or its derived name). Required
	// for RoleService.
	Service string
	// RetryTopic, DeadLetterTopic and PayloadBucket are the service's
	// retryqueue.Config fields. For RoleService they must be the service's
	// own (not shared with another service): [Generate] refuses
	// retryqueue.DefaultRetryTopic, retryqueue.DefaultDeadLetterTopic and
	// the default payload bucket "floodgate_dead_payloads".
	// Optional. Default the retryqueue defaults.
	RetryTopic, DeadLetterTopic, PayloadBucket string
	// FleetBucket is the service's natskv.Config.Bucket, the service's own;
	// for RoleService, natskv.DefaultBucket is refused.
	// Optional. Default "": no fleet breakers.
	FleetBucket string
	// ReceiptBucket is the service's asyncmdn.StoreConfig.Bucket, the KV
	// bucket of its pending asynchronous AS2 receipts
	// ([asyncmdn.ServiceAccess]), the service's own; for RoleService,
	// asyncmdn.DefaultBucket is refused.
	// Optional. Default "": no asynchronous MDNs.
	ReceiptBucket string
	// Sources are the topics the service consumes with a jsq.Subscriber,
	// each with its durable consumer ([jsq.SubscriberAccess]). Only the
	// service role uses them.
	// Optional. Default none.
	Sources []Source
}

// Source is a topic a service consumes with a jsq.Subscriber.
type Source struct {
	// Topic is the topic passed to Subscribe. Required; [jsq.ValidateTopic].
	Topic string
	// Consumer is the durable consumer's name, the subscriber's
	// jsq.SubscriberConfig.ConsumerName of Topic. Optional. Default
	// [jsq.DefaultConsumerName](Topic).
	Consumer string
}

// Rules is an allow and a deny list of subjects (nats-server semantics: a
// subject is permitted when an allow entry matches and no deny entry does).
type Rules struct {
	Allow []string `json:"allow,omitempty"`
	Deny  []string `json:"deny,omitempty"`
}

// Set is one user's permissions, as nats-server's authorization block
// takes them.
type Set struct {
	Publish   Rules `json:"publish"`
	Subscribe Rules `json:"subscribe"`
}

// InboxPrefix is the inbox prefix of service's connections:
// "_INBOX_floodgate." + the service's token ([partner.Token]), so replies
// to one service reach no other service's user.
func InboxPrefix(service string) string { return "_INBOX_floodgate." + partner.Token(service) }

// InboxOption is the connection option that sets [InboxPrefix] of service.
func InboxOption(service string) nats.Option {
	return nats.CustomInboxPrefix(InboxPrefix(service))
}

// Generate returns the permissions of cfg's role, or an error wrapping
// [ErrInvalidConfig] naming the field. It is a pure function.
func Generate(cfg Config) (Set, error) {
	rq := retryqueue.Config{Service: cfg.Service, RetryTopic: cfg.RetryTopic, DeadLetterTopic: cfg.DeadLetterTopic, PayloadBucket: cfg.PayloadBucket}
	// A name becomes a subject token: a '.', '*' or '>' in it would widen
	// the grant.
	for _, f := range []struct{ field, v string }{{"RetryTopic", cfg.RetryTopic}, {"DeadLetterTopic", cfg.DeadLetterTopic}, {"PayloadBucket", cfg.PayloadBucket}} {
		if f.v == "" {
			continue
		}
		if err := jsq.ValidateStreamName(f.v); err != nil {
			return Set{}, fmt.Errorf("%w: %s: %w", ErrInvalidConfig, f.field, err)
		}
	}
	if cfg.FleetBucket != "" {
		if err := (natskv.Config{Bucket: cfg.FleetBucket}).Validate(); err != nil {
			return Set{}, fmt.Errorf("%w: FleetBucket: %w", ErrInvalidConfig, err)
		}
	}
	if cfg.ReceiptBucket != "" {
		if err := jsq.ValidateStreamName(cfg.ReceiptBucket); err != nil {
			return Set{}, fmt.Errorf("%w: ReceiptBucket: %w", ErrInvalidConfig, err)
		}
	}
	var sources []string
	for i, src := range cfg.Sources {
		if err := jsq.ValidateTopic(src.Topic); err != nil {
			return Set{}, fmt.Errorf("%w: Sources[%d].Topic: %w", ErrInvalidConfig, i, err)
		}
		if src.Consumer == "" {
			src.Consumer = jsq.DefaultConsumerName(src.Topic)
		}
		if err := jsq.ValidateStreamName(src.Consumer); err != nil {
			return Set{}, fmt.Errorf("%w: Sources[%d].Consumer: %w", ErrInvalidConfig, i, err)
		}
		sources = append(sources, jsq.SubscriberAccess(src.Topic, src.Consumer)...)
	}
	var s Set
	switch cfg.Role {
	case RoleService:
		if cfg.Service == "" {
			return Set{}, fmt.Errorf("%w: Service is required for role %q", ErrInvalidConfig, cfg.Role)
		}
		if cfg.RetryTopic == "" || cfg.DeadLetterTopic == "" {
			return Set{}, fmt.Errorf("%w: RetryTopic and DeadLetterTopic must be the service's own streams (isolation is per stream), not empty", ErrInvalidConfig)
		}
		for _, f := range []struct{ field, v, shared string }{
			{"RetryTopic", cfg.RetryTopic, retryqueue.DefaultRetryTopic},
			{"DeadLetterTopic", cfg.DeadLetterTopic, retryqueue.DefaultDeadLetterTopic},
			{"PayloadBucket", cfg.PayloadBucket, defaultPayloadBucket},
			{"FleetBucket", cfg.FleetBucket, natskv.DefaultBucket},
			{"ReceiptBucket", cfg.ReceiptBucket, asyncmdn.DefaultBucket},
		} {
			if f.v == f.shared {
				return Set{}, fmt.Errorf("%w: %s %q is the shared default; a service's grant must name its own (isolation is per stream and bucket)", ErrInvalidConfig, f.field, f.v)
			}
		}
		s.Publish.Allow = retryqueue.ServiceAccess(rq)
		if cfg.FleetBucket != "" {
			s.Publish.Allow = append(s.Publish.Allow, natskv.ServiceAccess(cfg.FleetBucket)...)
		}
		if cfg.ReceiptBucket != "" {
			s.Publish.Allow = append(s.Publish.Allow, asyncmdn.ServiceAccess(cfg.ReceiptBucket)...)
		}
		s.Publish.Allow = append(s.Publish.Allow, sources...)
		s.Subscribe.Allow = []string{InboxPrefix(cfg.Service) + ".>"}
	case RoleReadOnly, RoleReadWrite:
		w := cfg.Role == RoleReadWrite
		s.Publish.Allow = retryqueue.OperatorAccess(rq, w)
		if cfg.FleetBucket != "" {
			s.Publish.Allow = append(s.Publish.Allow, natskv.OperatorAccess(cfg.FleetBucket, w)...)
		}
		if cfg.ReceiptBucket != "" {
			s.Publish.Allow = append(s.Publish.Allow, asyncmdn.OperatorAccess(cfg.ReceiptBucket, w)...)
		}
		s.Subscribe.Allow = []string{"_INBOX.>"}
	default:
		return Set{}, fmt.Errorf("%w: Role %q, want %q, %q or %q", ErrInvalidConfig, cfg.Role, RoleService, RoleReadOnly, RoleReadWrite)
	}
	s.Publish.Allow = append(s.Publish.Allow, "$JS.API.INFO")
	slices.Sort(s.Publish.Allow)
	s.Publish.Allow = slices.Compact(s.Publish.Allow)
	return s, nil
}

// defaultPayloadBucket is retryqueue's PayloadBucket when both it and
// DeadLetterTopic are left to their defaults.
const defaultPayloadBucket = retryqueue.DefaultDeadLetterTopic + "_payloads"

// JSON returns s as indented JSON.
func (s Set) JSON() []byte {
	b, _ := json.MarshalIndent(s, "", "  ")
	return append(b, '\n')
}

// NATSConf returns s as the permissions block of a nats-server
// authorization user: permissions: { publish: { allow: [...] } ... }.
func (s Set) NATSConf() string {
	var b strings.Builder
	b.WriteString("permissions: {\n")
	for _, r := range []struct {
		name  string
		rules Rules
	}{{"publish", s.Publish}, {"subscribe", s.Subscribe}} {
		fmt.Fprintf(&b, "  %s: {\n", r.name)
		list := func(k string, v []string) {
			if len(v) == 0 {
				return
			}
			fmt.Fprintf(&b, "    %s: [\n", k)
			for _, x := range v {
				fmt.Fprintf(&b, "      %q\n", x)
			}
			b.WriteString("    ]\n")
		}
		list("allow", r.rules.Allow)
		list("deny", r.rules.Deny)
		b.WriteString("  }\n")
	}
	b.WriteString("}\n")
	return b.String()
}
