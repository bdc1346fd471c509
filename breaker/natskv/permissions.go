package natskv

import "github.com/nats-io/nats.go/jetstream"

// ServiceAccess returns the subjects a service's user publishes to for a
// [Store] on bucket: the bucket's keys ($KV.<bucket>.>, writes of the
// shared states and probe leases), and the JetStream API of its stream
// KV_<bucket> that [New] and the store use (create or update the bucket,
// read entries, open the watch as an ordered consumer, answer its flow
// control). A watch of the bucket ([Store.Watch]) reads every key, and
// stream-level reads cannot be limited to some keys, so the grant assumes
// the bucket is the service's own: give each service its own
// [Config.Bucket] (see the permissions package).
func ServiceAccess(bucket string) []string {
	return append(OperatorAccess(bucket, true), jetstream.DefaultAPIPrefix+"STREAM.UPDATE."+stream(bucket))
}

// OperatorAccess returns the subjects an operator's user publishes to for
// the bucket. Read-only (write false): read entries and list keys ("floodgate
// status"). Read-write adds writing the keys and creating the bucket
// ("floodgate open", "close", "reset").
func OperatorAccess(bucket string, write bool) []string {
	p, s := jetstream.DefaultAPIPrefix, stream(bucket)
	out := []string{
		p + "STREAM.INFO." + s,
		p + "STREAM.MSG.GET." + s,
		p + "DIRECT.GET." + s,
		p + "DIRECT.GET." + s + ".>",
		p + "CONSUMER.CREATE." + s + ".>",
		p + "CONSUMER.DELETE." + s + ".*",
		"$JS.FC." + s + ".>",
	}
	if write {
		out = append(out, "$KV."+bucket+".>", p+"STREAM.CREATE."+s)
	}
	return out
}

// stream is the stream behind bucket (ADR-8).
func stream(bucket string) string { return "KV_" + bucket }
