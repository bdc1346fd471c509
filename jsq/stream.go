package jsq

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
)

// ValidateTopic returns an error wrapping [ErrInvalidTopic] unless topic is a
// valid JetStream stream name: non-empty, without '.', '*', '>', '/', '\\'
// or whitespace, at most 255 bytes.
func ValidateTopic(topic string) error {
	switch {
	case topic == "":
		return fmt.Errorf("%w: empty", ErrInvalidTopic)
	case len(topic) > 255:
		return fmt.Errorf("%w: %q longer than 255 bytes", ErrInvalidTopic, topic)
	case strings.ContainsAny(topic, ".*>/\\ \t\r\n"):
		return fmt.Errorf("%w: %q contains one of . * > / \\ or whitespace", ErrInvalidTopic, topic)
	}
	return nil
}

// StreamConfig returns the stream for topic: named topic, with the single
// subject topic, file storage, limits retention, no limits.
func StreamConfig(topic string) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:      topic,
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
	s, err := js.Stream(ctx, topic)
	if err == nil {
		return checkedStream(s, want)
	}
	if !errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, fmt.Errorf("jsq: look up stream %q: %w", topic, err)
	}
	s, err = js.CreateStream(ctx, want)
	if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
		// Created concurrently by someone else, maybe otherwise.
		if s, err = js.Stream(ctx, topic); err == nil {
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
