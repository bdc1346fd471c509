package retryqueue

import (
	"strings"

	"github.com/floodgate-go/floodgate/jsq"
	"github.com/floodgate-go/floodgate/partner"
)

// ServiceAccess returns the subjects a service's user publishes to for
// cfg's retry queue (defaults applied): its routes' retry and dead-letter
// subjects (RetryTopic.<service token>.* and DeadLetterTopic.<service
// token>.*, [RouteSubject]), the JetStream API of its retry stream,
// dead-letter stream and payload bucket (create and read all three; consume
// and acknowledge the retry stream; read the bucket's objects and purge
// its replaced ones), and its
// payload bucket's subjects ($O.<bucket>.>). The drainers' consumers
// ([ConsumerName]) are on the service's own streams.
//
// The stream-level APIs (info, get by sequence) cannot be limited to the
// service's subjects, so the grant assumes that the streams and bucket are
// the service's alone: give every service its own RetryTopic,
// DeadLetterTopic and PayloadBucket (see the permissions package).
func ServiceAccess(cfg Config) []string {
	cfg.setDefaults()
	out := []string{ServiceRoutes(cfg.RetryTopic, cfg.Service), ServiceRoutes(cfg.DeadLetterTopic, cfg.Service)}
	for _, s := range []string{cfg.RetryTopic, cfg.DeadLetterTopic, payloadStream(cfg.PayloadBucket)} {
		out = append(out, jsq.StreamCreateAPI(s)...)
		out = append(out, jsq.StreamReadAPI(s)...)
	}
	// The drainers consume the retry stream; restoring a too-large
	// payload reads the bucket. A service never consumes its dead letters.
	out = append(out, jsq.ConsumeAPI(cfg.RetryTopic)...)
	out = append(out, jsq.ReadConsumeAPI(payloadStream(cfg.PayloadBucket))...)
	// Replacing or deleting an object purges its chunks' subject.
	out = append(out, "$JS.API.STREAM.PURGE."+payloadStream(cfg.PayloadBucket))
	return append(out, payloadSubjects(cfg.PayloadBucket))
}

// OperatorAccess returns the subjects an operator's user publishes to for
// cfg's retry queue (defaults applied).
//
// Read-only (write false): the streams' and payload bucket's info (with
// per-subject counts) and their consumers' info and names, what "floodgate
// status" and "backlog" need; no message get, direct get or consumer, so
// the retry messages, dead letters and stored payloads (purchase orders)
// stay unreadable.
//
// Read-write adds reading the messages (gets, and ephemeral ordered reads
// of the dead-letter stream and payload bucket: "deadletters list" and
// "show", the full "backlog") and what "purge", "replay" and "migrate" do:
// publish to every route of both topics, purge and delete messages, update
// the streams, delete consumers, consume the retry stream.
func OperatorAccess(cfg Config, write bool) []string {
	cfg.setDefaults()
	var out []string
	streams := []string{cfg.RetryTopic, cfg.DeadLetterTopic, payloadStream(cfg.PayloadBucket)}
	for _, s := range streams {
		out = append(out, jsq.StreamInfoAPI(s)...)
	}
	if !write {
		return out
	}
	for _, s := range streams {
		out = append(out, jsq.StreamReadAPI(s)...)
	}
	out = append(out, jsq.ReadConsumeAPI(cfg.DeadLetterTopic)...)
	out = append(out, jsq.ReadConsumeAPI(payloadStream(cfg.PayloadBucket))...)
	out = append(out, StreamSubjects(cfg.RetryTopic), StreamSubjects(cfg.DeadLetterTopic), payloadSubjects(cfg.PayloadBucket))
	for _, s := range streams {
		out = append(out, jsq.StreamCreateAPI(s)...)
		out = append(out, jsq.StreamWriteAPI(s)...)
		out = append(out, jsq.ConsumeAPI(s)...)
	}
	return out
}

// ServiceRoutes is the subject of every route of service under topic, for
// a permission: [RouteSubject] with a wildcard for the partner token
// (topic.<service token>.*).
func ServiceRoutes(topic, service string) string {
	return strings.TrimSuffix(RouteSubject(topic, service, ""), partner.Token("")) + "*"
}

// payloadStream is the stream behind the Object Store bucket.
func payloadStream(bucket string) string { return "OBJ_" + bucket }

// payloadSubjects are the subjects of the Object Store bucket's chunks and
// metadata (ADR-20).
func payloadSubjects(bucket string) string { return "$O." + bucket + ".>" }
