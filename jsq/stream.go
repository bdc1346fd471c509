package jsq

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/floodgate-go/floodgate/partner"
)

// ValidateTopic returns an error wrapping [ErrInvalidTopic] unless topic is a
// valid topic: a NATS subject of one or more non-empty tokens separated by
// '.' ("edi_orders", "edi.orders.850"), without '*', '>', '/', '\\' or
// whitespace, at most 255 bytes. A topic without '.' (a flat topic) is its
// stream's name ([StreamName]) and may not contain '=', which is reserved
// for the stream names of hierarchical topics, so the two never collide.
func ValidateTopic(topic string) error {
	switch {
	case topic == "":
		return fmt.Errorf("%w: empty", ErrInvalidTopic)
	case len(topic) > 255:
		return fmt.Errorf("%w: %q longer than 255 bytes", ErrInvalidTopic, topic)
	case strings.ContainsAny(topic, "*>/\\ \t\r\n\f\v"):
		return fmt.Errorf("%w: %q contains one of * > / \\ or whitespace", ErrInvalidTopic, topic)
	case topic[0] == '.' || topic[len(topic)-1] == '.' || strings.Contains(topic, ".."):
		return fmt.Errorf("%w: %q has an empty subject token", ErrInvalidTopic, topic)
	case !strings.Contains(topic, ".") && strings.Contains(topic, "="):
		return fmt.Errorf("%w: %q: a topic without '.' is its stream's name and may not contain '=' (reserved for hierarchical topics' streams)", ErrInvalidTopic, topic)
	}
	return nil
}

// ValidateStreamName returns an error wrapping [ErrInvalidTopic] unless
// name is a valid JetStream stream name that floodgate also uses as a
// subject prefix (the retry and dead-letter topics): non-empty, without '.',
// '*', '>', '/', '\\' or whitespace, at most 255 bytes.
func ValidateStreamName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: empty", ErrInvalidTopic)
	case len(name) > 255:
		return fmt.Errorf("%w: %q longer than 255 bytes", ErrInvalidTopic, name)
	case strings.ContainsAny(name, ".*>/\\ \t\r\n\f\v"):
		return fmt.Errorf("%w: %q contains one of . * > / \\ or whitespace", ErrInvalidTopic, name)
	}
	return nil
}

// StreamName returns the name of topic's stream: the topic itself for a
// flat topic (no '.'), as in earlier releases; for a hierarchical topic,
// [partner.Token] of it ("edi.orders.850" → "edi=2Eorders=2E850"), the
// injective encoding floodgate uses for partner keys. A token of a topic
// with a '.' contains '=', which no flat topic does ([ValidateTopic]), so
// distinct topics never share a stream. It does not validate topic.
func StreamName(topic string) string {
	if !strings.Contains(topic, ".") {
		return topic
	}
	return partner.Token(topic)
}

// StreamConfig returns the stream for topic: named [StreamName](topic), with
// the single subject topic, file storage, limits retention, no limits.
func StreamConfig(topic string) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:      StreamName(topic),
		Subjects:  []string{topic},
		Storage:   jetstream.FileStorage,
		Retention: jetstream.LimitsPolicy,
	}
}

// EnsureStream returns the stream for topic, creating it with
// [StreamConfig] if it does not exist. An existing stream (also one created
// concurrently) is used as it is if [CheckStream] finds it equal to
// [StreamConfig] in the fields jsq relies on (Subjects, Storage), and
// refused, unchanged, with a [*ConfigMismatchError] otherwise: EnsureStream
// never updates a stream. It returns an error wrapping [ErrInvalidTopic], a
// [*ConfigMismatchError], or the JetStream API error.
func EnsureStream(ctx context.Context, js jetstream.JetStream, topic string) (jetstream.Stream, error) {
	if err := ValidateTopic(topic); err != nil {
		return nil, err
	}
	want := StreamConfig(topic)
	s, err := js.Stream(ctx, want.Name)
	if err == nil {
		return checkedStream(s, want)
	}
	if !errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, fmt.Errorf("jsq: look up stream %q: %w", topic, err)
	}
	s, err = js.CreateStream(ctx, want)
	if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
		// Created concurrently by someone else, maybe otherwise.
		if s, err = js.Stream(ctx, want.Name); err == nil {
			return checkedStream(s, want)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("jsq: create stream %q: %w", topic, err)
	}
	return s, nil
}

func checkedStream(s jetstream.Stream, want jetstream.StreamConfig) (jetstream.Stream, error) {
	if err := CheckStream(s.CachedInfo().Config, want); err != nil {
		return nil, err
	}
	return s, nil
}
