package retryqueue

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// PayloadBucketConfig returns the Object Store bucket [Provision] creates
// for [Config.PayloadBucket]: file storage, no TTL and no size limit (the
// payloads stay as long as their dead letters).
func PayloadBucketConfig(bucket string) jetstream.ObjectStoreConfig {
	return jetstream.ObjectStoreConfig{
		Bucket:      bucket,
		Description: "floodgate: payloads of dead letters too large for the dead-letter stream",
		Storage:     jetstream.FileStorage,
	}
}

// tooLarge reports whether err says a message exceeds the server's
// max_payload (the client checks it before sending), the stream's
// MaxMsgSize, or JetStream's bound on a stored message's headers (64 KiB,
// whatever max_payload is).
func tooLarge(err error) bool {
	if err == nil {
		return false
	}
	var api *jetstream.APIError
	return errors.Is(err, nats.ErrMaxPayload) || errors.Is(err, jetstream.ErrStreamMessageExceedsMaximum) ||
		errors.As(err, &api) && api.ErrorCode == jsErrCodeHeaderExceedsMaximum
}

// jsErrCodeHeaderExceedsMaximum is JetStream's refusal of a message whose
// headers exceed 64 KiB (nats-server's JSStreamHeaderExceedsMaximumErr,
// "header size exceeds maximum allowed of 64k"); nats.go names no
// constant for it.
const jsErrCodeHeaderExceedsMaximum jetstream.ErrorCode = 10097

// objectName is the name of the payload object of a message: the hex
// SHA-256 of its UUID, a zero byte and its payload. A redelivered message
// overwrites its own object; different messages never share one.
func objectName(uuid string, payload []byte) string {
	h := sha256.New()
	h.Write([]byte(uuid))
	h.Write([]byte{0})
	h.Write(payload)
	return hex.EncodeToString(h.Sum(nil))
}

// maxChunk is the Object Store's default chunk size.
const maxChunk = 128 * 1024

// deadLetterTooLarge publishes dead letter c, which does not fit the
// dead-letter stream, without its payload: the payload goes to the payload
// bucket first, and the dead letter references it. If even the dead letter
// without payload does not fit, the message's own metadata goes to the
// bucket too. Each object is confirmed before the dead letter is published,
// so a nil error means both are durable.
func (q *Queue) deadLetterTooLarge(ctx context.Context, subject string, c *message.Message) error {
	err := q.keepAside(ctx, subject, c)
	if err != nil {
		q.failed.Add(1)
	}
	return err
}

func (q *Queue) keepAside(ctx context.Context, topic string, c *message.Message) error {
	name := objectName(c.UUID, c.Payload)
	if err := q.putObject(ctx, name, c.Payload); err != nil {
		return fmt.Errorf("%w: %w: %s: payload to bucket %q: %w", ErrPublish, ErrTooLarge, c.UUID, q.cfg.PayloadBucket, err)
	}
	d := message.NewMessage(c.UUID, nil)
	for k, v := range c.Metadata {
		d.Metadata.Set(k, v)
	}
	d.Metadata.Set(MetaPayloadBucket, q.cfg.PayloadBucket)
	d.Metadata.Set(MetaPayloadObject, name)
	d.Metadata.Set(MetaPayloadSize, strconv.Itoa(len(c.Payload)))
	err := q.publish(ctx, topic, d)
	if !errors.Is(err, ErrTooLarge) {
		return err
	}
	// The message's own metadata is what is too large: keep it aside too.
	own := map[string]string{}
	for k, v := range d.Metadata {
		if !strings.HasPrefix(k, metaPrefix) {
			own[k] = v
			delete(d.Metadata, k)
		}
	}
	b, err := json.Marshal(own)
	if err != nil { // cannot happen: strings only
		return fmt.Errorf("%w: %s: metadata: %w", ErrPublish, c.UUID, err)
	}
	mname := name + ".metadata"
	if err := q.putObject(ctx, mname, b); err != nil {
		return fmt.Errorf("%w: %w: %s: metadata to bucket %q: %w", ErrPublish, ErrTooLarge, c.UUID, q.cfg.PayloadBucket, err)
	}
	d.Metadata.Set(MetaMetadataObject, mname)
	return q.publish(ctx, topic, d)
}

// putObject stores data as object name in the payload bucket, bounded by
// PublishTimeout, in chunks that fit the server's max_payload.
func (q *Queue) putObject(ctx context.Context, name string, data []byte) error {
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), q.cfg.PublishTimeout)
	defer cancel()
	obs, err := q.cfg.JetStream.ObjectStore(pctx, q.cfg.PayloadBucket)
	if err != nil {
		return err
	}
	chunk := int64(maxChunk)
	if nc := q.cfg.JetStream.Conn(); nc != nil && nc.MaxPayload() > 0 {
		// A chunk travels alone, with a short subject and no headers.
		chunk = min(chunk, nc.MaxPayload())
	}
	meta := jetstream.ObjectMeta{Name: name, Opts: &jetstream.ObjectMetaOptions{ChunkSize: uint32(chunk)}}
	_, err = obs.Put(pctx, meta, bytes.NewReader(data))
	return err
}

// Restore returns dead letter m as it was before its payload was kept
// aside: a copy with the payload read back from [MetaPayloadObject], byte
// for byte, the message's own metadata read back from [MetaMetadataObject]
// when it had to be kept aside too, and the reference keys removed. A dead
// letter without [MetaPayloadObject] is returned as a copy, unchanged.
//
// It returns an error wrapping [ErrPayloadUnavailable] when no
// [Config.JetStream] is set or an object is missing (removed when a
// duplicate of this dead letter was replayed or purged, or by hand), or the
// JetStream error. It is bounded by ctx. Safe for concurrent use.
func (q *Queue) Restore(ctx context.Context, m *message.Message) (*message.Message, error) {
	out := message.NewMessage(m.UUID, m.Payload)
	for k, v := range m.Metadata {
		out.Metadata.Set(k, v)
	}
	name := m.Metadata.Get(MetaPayloadObject)
	if name == "" {
		return out, nil
	}
	if q.cfg.JetStream == nil {
		return nil, fmt.Errorf("%w: %s: no Config.JetStream to read bucket %q", ErrPayloadUnavailable, m.UUID, m.Metadata.Get(MetaPayloadBucket))
	}
	bucket := m.Metadata.Get(MetaPayloadBucket)
	obs, err := q.cfg.JetStream.ObjectStore(ctx, bucket)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: bucket %q: %w", ErrPayloadUnavailable, m.UUID, bucket, err)
	}
	get := func(name string) ([]byte, error) {
		b, err := obs.GetBytes(ctx, name)
		if errors.Is(err, jetstream.ErrObjectNotFound) {
			return nil, fmt.Errorf("%w: %s: object %q not in bucket %q (removed with a duplicate of this dead letter, or by hand)", ErrPayloadUnavailable, m.UUID, name, bucket)
		}
		if err != nil {
			return nil, fmt.Errorf("retryqueue: restore %s: object %q in bucket %q: %w", m.UUID, name, bucket, err)
		}
		return b, nil
	}
	payload, err := get(name)
	if err != nil {
		return nil, err
	}
	if mname := m.Metadata.Get(MetaMetadataObject); mname != "" {
		b, err := get(mname)
		if err != nil {
			return nil, err
		}
		var own map[string]string
		if err := json.Unmarshal(b, &own); err != nil {
			return nil, fmt.Errorf("%w: %s: object %q is not a JSON object of strings: %w", ErrPayloadUnavailable, m.UUID, mname, err)
		}
		for k, v := range own {
			out.Metadata.Set(k, v)
		}
	}
	for _, k := range payloadRefKeys {
		delete(out.Metadata, k)
	}
	out.Payload = payload
	return out, nil
}

// removeObjects deletes the objects dead letter m references, if any; one
// already gone is not an error.
func (q *Queue) removeObjects(ctx context.Context, m *message.Message) error {
	name := m.Metadata.Get(MetaPayloadObject)
	if name == "" || q.cfg.JetStream == nil {
		return nil
	}
	obs, err := q.cfg.JetStream.ObjectStore(ctx, m.Metadata.Get(MetaPayloadBucket))
	if err != nil {
		return err
	}
	for _, n := range []string{name, m.Metadata.Get(MetaMetadataObject)} {
		if n == "" {
			continue
		}
		if err := obs.Delete(ctx, n); err != nil && !errors.Is(err, jetstream.ErrObjectNotFound) {
			return err
		}
	}
	return nil
}
