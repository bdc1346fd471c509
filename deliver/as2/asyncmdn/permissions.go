package asyncmdn

import (
	"github.com/nats-io/nats.go/jetstream"

	"github.com/floodgate-go/floodgate/jsq"
)

// ServiceAccess returns the subjects a service's user publishes to for a
// [Store] on bucket and a [Resolver] on it: the bucket's keys
// ($KV.<bucket>.>: put a pending receipt, claim and delete it), and the
// JetStream API of its stream KV_<bucket> that [NewStore] and the store
// use (create or update the bucket, read records, list keys through an
// ordered consumer and answer its flow control). A key list reads every
// record, and stream-level reads cannot be limited to some keys (keys are
// hashed Message-IDs, not per service), so the grant isolates a service
// only on its own [StoreConfig.Bucket], as recommended (see the
// permissions package): services sharing a bucket ([StoreConfig.Service])
// each get all of it, and can read and change each other's records. The dead letters the
// Resolver writes are the retry queue's (retryqueue.ServiceAccess).
func ServiceAccess(bucket string) []string {
	return append(OperatorAccess(bucket, true), jetstream.DefaultAPIPrefix+"STREAM.UPDATE."+stream(bucket))
}

// OperatorAccess returns the subjects an operator's user publishes to for
// the bucket. Read-only (write false): the bucket's stream info and its
// consumers' info and names, never a record, since a pending receipt holds
// the partner's document (payload and metadata), as the retry queue's
// read-only grant withholds its messages. Read-write adds reading, writing
// and deleting records and creating the bucket.
func OperatorAccess(bucket string, write bool) []string {
	s := stream(bucket)
	if !write {
		return jsq.StreamInfoAPI(s)
	}
	out := append(jsq.StreamReadAPI(s), jsq.ReadConsumeAPI(s)...)
	out = append(out, "$JS.FC."+s+".>", "$KV."+bucket+".>")
	return append(out, jsq.StreamCreateAPI(s)...)
}

// stream is the stream behind bucket (ADR-8).
func stream(bucket string) string { return "KV_" + bucket }
