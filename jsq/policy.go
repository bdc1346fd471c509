package jsq

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
)

// FieldMismatch is one field in which an existing stream or consumer
// differs from what jsq would create.
type FieldMismatch struct {
	// Field is the JetStream configuration field: "MaxDeliver", "AckWait",
	// "Subjects", ...
	Field string
	// Existing is the field's value on the server.
	Existing any
	// Want is the value jsq would set.
	Want any
}

// ConfigMismatchError is returned when an existing stream or consumer
// differs from jsq's in fields jsq sets (see the package doc, "Existing
// streams and consumers"). jsq never updates an existing stream or consumer:
// it refuses it, unchanged, with this error. It matches [ErrConfigMismatch]
// with [errors.Is].
type ConfigMismatchError struct {
	// Stream is the stream's name.
	Stream string
	// Consumer is the durable consumer's name; empty for a stream mismatch.
	Consumer string
	// Fields lists every differing field, in a fixed order.
	Fields []FieldMismatch
}

// Error names the stream or consumer and every differing field with its
// value on the server and the value jsq wants.
func (e *ConfigMismatchError) Error() string {
	var b strings.Builder
	if e.Consumer != "" {
		fmt.Fprintf(&b, "jsq: existing consumer %q on stream %q", e.Consumer, e.Stream)
	} else {
		fmt.Fprintf(&b, "jsq: existing stream %q", e.Stream)
	}
	b.WriteString(" differs and is left unchanged: ")
	for i, f := range e.Fields {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s is %v, want %v", f.Field, f.Existing, f.Want)
	}
	b.WriteString(" (edit or delete it, or configure floodgate to match)")
	return b.String()
}

// Is reports whether target is [ErrConfigMismatch].
func (e *ConfigMismatchError) Is(target error) bool { return target == ErrConfigMismatch }

// CheckStream compares an existing stream's configuration with want, the one
// jsq would create ([StreamConfig], or a variant of it), in the fields jsq
// sets and relies on: Subjects (as a set: the topic's messages, and only
// they) and Storage (file: a stored message survives a server restart). It
// returns nil when they are equal, and a [*ConfigMismatchError] listing the
// differing ones otherwise. Retention is set on creation but not compared:
// limits, work-queue and interest retention all keep a source message until
// jsq's durable consumer acks it, so it is the operator's, like every other
// field (replicas, placement, limits, ...); a caller that needs one checks
// it itself, as retryqueue.Provision does.
func CheckStream(existing, want jetstream.StreamConfig) error {
	var diff []FieldMismatch
	if len(want.Subjects) > 0 && !sameSet(existing.Subjects, want.Subjects) {
		diff = append(diff, FieldMismatch{"Subjects", existing.Subjects, want.Subjects})
	}
	if existing.Storage != want.Storage {
		diff = append(diff, FieldMismatch{"Storage", existing.Storage, want.Storage})
	}
	if len(diff) == 0 {
		return nil
	}
	return &ConfigMismatchError{Stream: existing.Name, Fields: diff}
}

// CheckConsumer compares an existing consumer's configuration with want in
// the fields jsq and floodgate's drainer set: AckPolicy, DeliverPolicy,
// DeliverSubject (empty: a pull consumer), and AckWait, MaxDeliver and
// MaxAckPending unless want leaves them zero (the server's default, which
// any existing value satisfies). It returns nil when they are equal, and a
// [*ConfigMismatchError] listing the differing ones otherwise. Every other
// field (filter subjects, replicas, ...) is the operator's.
func CheckConsumer(stream string, existing, want jetstream.ConsumerConfig) error {
	var diff []FieldMismatch
	if existing.AckPolicy != want.AckPolicy {
		diff = append(diff, FieldMismatch{"AckPolicy", existing.AckPolicy, want.AckPolicy})
	}
	if existing.DeliverPolicy != want.DeliverPolicy {
		diff = append(diff, FieldMismatch{"DeliverPolicy", existing.DeliverPolicy, want.DeliverPolicy})
	}
	if existing.DeliverSubject != want.DeliverSubject {
		diff = append(diff, FieldMismatch{"DeliverSubject", fmt.Sprintf("%q", existing.DeliverSubject), fmt.Sprintf("%q", want.DeliverSubject)})
	}
	if want.AckWait != 0 && existing.AckWait != want.AckWait {
		diff = append(diff, FieldMismatch{"AckWait", existing.AckWait, want.AckWait})
	}
	if want.MaxDeliver != 0 && existing.MaxDeliver != want.MaxDeliver {
		diff = append(diff, FieldMismatch{"MaxDeliver", limit(existing.MaxDeliver), limit(want.MaxDeliver)})
	}
	if want.MaxAckPending != 0 && existing.MaxAckPending != want.MaxAckPending {
		diff = append(diff, FieldMismatch{"MaxAckPending", limit(existing.MaxAckPending), limit(want.MaxAckPending)})
	}
	if len(diff) == 0 {
		return nil
	}
	name := existing.Durable
	if name == "" {
		name = existing.Name
	}
	return &ConfigMismatchError{Stream: stream, Consumer: name, Fields: diff}
}

// EnsureConsumer returns the durable consumer want.Durable on stream,
// creating it with want if it does not exist. An existing one (also one
// created concurrently) is bound as it is if [CheckConsumer] finds it equal
// in the fields jsq sets, and refused, unchanged, with a
// [*ConfigMismatchError] otherwise: EnsureConsumer never updates a
// consumer. Other errors are the JetStream API's, wrapped.
func EnsureConsumer(ctx context.Context, js jetstream.JetStream, stream string, want jetstream.ConsumerConfig) (jetstream.Consumer, error) {
	return ensureConsumer(ctx, js, stream, want, CheckConsumer)
}

// ensureConsumer is [EnsureConsumer] comparing an existing consumer with
// check.
func ensureConsumer(ctx context.Context, js jetstream.JetStream, stream string, want jetstream.ConsumerConfig,
	check func(stream string, existing, want jetstream.ConsumerConfig) error) (jetstream.Consumer, error) {
	for range 2 {
		c, err := js.Consumer(ctx, stream, want.Durable)
		if err == nil {
			if err := check(stream, c.CachedInfo().Config, want); err != nil {
				return nil, err
			}
			return c, nil
		}
		if !errors.Is(err, jetstream.ErrConsumerNotFound) {
			return nil, fmt.Errorf("jsq: look up consumer %q on %q: %w", want.Durable, stream, err)
		}
		c, err = js.CreateConsumer(ctx, stream, want)
		if err == nil {
			return c, nil
		}
		if !errors.Is(err, jetstream.ErrConsumerExists) {
			return nil, fmt.Errorf("jsq: create consumer %q on %q: %w", want.Durable, stream, err)
		}
		// Created concurrently with another configuration: compare it.
	}
	return nil, fmt.Errorf("jsq: consumer %q on %q: created and deleted concurrently", want.Durable, stream)
}

// limit formats a count where -1 means unlimited.
func limit(n int) string {
	if n < 0 {
		return fmt.Sprintf("%d (unlimited)", n)
	}
	return fmt.Sprint(n)
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(slices.Compact(a), slices.Compact(b))
}
