package jsq

import "github.com/nats-io/nats.go/jetstream"

// The JetStream API subjects a client publishes requests to, for a NATS
// user's permissions (see the permissions package and "floodgate
// permissions"). Every request's reply arrives on the client's inbox
// (nats.CustomInboxPrefix), which the user must be allowed to subscribe
// on. The subjects follow the server's API (ADR-1, nats-server
// jetstream_api.go) under [jetstream.DefaultAPIPrefix].
//
// Stream-level requests (stream info, get by sequence, purge) name only the
// stream: a permission cannot limit them to some subjects of it. Grant them
// only on streams the user may read (or change) whole.

// StreamReadAPI returns the API subjects that read stream whole: its info
// (with per-subject counts), any message by sequence or subject (stored get
// and direct get), and its consumers' info and names. It is
// [StreamInfoAPI] plus the message gets.
func StreamReadAPI(stream string) []string {
	p := jetstream.DefaultAPIPrefix
	return append(StreamInfoAPI(stream),
		p+"STREAM.MSG.GET."+stream,
		p+"DIRECT.GET."+stream,
		p+"DIRECT.GET."+stream+".>",
	)
}

// StreamInfoAPI returns the API subjects that read stream's state but no
// message: its info (counts, and with a subject filter the count of each
// subject, which names the routes but carries no content) and its
// consumers' info, list and names.
func StreamInfoAPI(stream string) []string {
	p := jetstream.DefaultAPIPrefix
	return []string{
		p + "STREAM.INFO." + stream,
		p + "CONSUMER.INFO." + stream + ".*",
		p + "CONSUMER.LIST." + stream,
		p + "CONSUMER.NAMES." + stream,
	}
}

// StreamCreateAPI returns the API subject that creates stream (a
// Provision or bucket creation on first start).
func StreamCreateAPI(stream string) []string {
	return []string{jetstream.DefaultAPIPrefix + "STREAM.CREATE." + stream}
}

// StreamWriteAPI returns the API subjects that change stream's content or
// configuration: purge, delete a message, update (a migration), and delete
// a consumer.
func StreamWriteAPI(stream string) []string {
	p := jetstream.DefaultAPIPrefix
	return []string{
		p + "STREAM.PURGE." + stream,
		p + "STREAM.MSG.DELETE." + stream,
		p + "STREAM.UPDATE." + stream,
		p + "CONSUMER.DELETE." + stream + ".*",
	}
}

// ConsumeAPI returns the subjects that consume stream: create or bind a
// consumer (any name and filter), pull its messages, and acknowledge them
// ($JS.ACK.<stream>.>). On a work-queue stream an acknowledgement removes
// the message.
func ConsumeAPI(stream string) []string {
	p := jetstream.DefaultAPIPrefix
	return []string{
		p + "CONSUMER.CREATE." + stream + ".>",
		p + "CONSUMER.DURABLE.CREATE." + stream + ".>",
		p + "CONSUMER.MSG.NEXT." + stream + ".*",
		"$JS.ACK." + stream + ".>",
	}
}

// ReadConsumeAPI returns the subjects that create an ephemeral consumer on
// stream to read it (an ordered consumer), fetch from it and delete it when
// done, with no acknowledgement: on a limits stream, reading never removes
// a message.
func ReadConsumeAPI(stream string) []string {
	p := jetstream.DefaultAPIPrefix
	return []string{
		p + "CONSUMER.CREATE." + stream + ".>",
		p + "CONSUMER.MSG.NEXT." + stream + ".*",
		p + "CONSUMER.DELETE." + stream + ".*",
	}
}

// AccountAPI returns the API subjects that read the account: its JetStream
// info and the stream names and list.
func AccountAPI() []string {
	p := jetstream.DefaultAPIPrefix
	return []string{p + "INFO", p + "STREAM.NAMES", p + "STREAM.LIST"}
}

// SubscriberAccess returns the subjects a [Subscriber] publishes to when it
// subscribes to topic with the durable consumer named consumer (its
// [SubscriberConfig.ConsumerName] of topic): read the topic's stream
// ([StreamName]) and create it if missing ([EnsureStream]), read or create
// that one consumer ([EnsureConsumer]), pull its messages, and acknowledge,
// nack or mark them in progress ($JS.ACK.<stream>.<consumer>.>). No other
// consumer of the stream can be created, read or drained with it.
func SubscriberAccess(topic, consumer string) []string {
	p, s := jetstream.DefaultAPIPrefix, StreamName(topic)
	return append(StreamCreateAPI(s),
		p+"STREAM.INFO."+s,
		p+"CONSUMER.INFO."+s+"."+consumer,
		p+"CONSUMER.CREATE."+s+"."+consumer,
		p+"CONSUMER.CREATE."+s+"."+consumer+".>",
		p+"CONSUMER.DURABLE.CREATE."+s+"."+consumer,
		p+"CONSUMER.MSG.NEXT."+s+"."+consumer,
		"$JS.ACK."+s+"."+consumer+".>",
	)
}
