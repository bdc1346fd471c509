package events

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/floodgate-go/floodgate/breaker"
)

// Metadata keys and the event type value set on every transition message.
const (
	MetaEvent   = "floodgate_event"
	MetaBreaker = "floodgate_breaker"
	MetaFrom    = "floodgate_from"
	MetaTo      = "floodgate_to"

	// EventTransition is the value of [MetaEvent].
	EventTransition = "transition"
)

// Transition is the JSON body of a transition message.
type Transition struct {
	// Breaker is the breaker's name ([breaker.Config.Name]).
	Breaker string `json:"breaker"`
	// From and To are "closed", "open" or "half-open".
	From string `json:"from"`
	To   string `json:"to"`
	// Reason says why, in words.
	Reason string `json:"reason"`
	// At is the breaker clock's time of the transition, RFC 3339 with
	// nanoseconds, UTC.
	At time.Time `json:"at"`
	// WindowS is the jittered open window in seconds when To is "open",
	// else 0.
	WindowS float64 `json:"window_s"`
	// Generation is the state period entered; it grows by one per
	// transition, so a gap means a transition was not received.
	Generation uint64 `json:"generation"`
	// ConsecutiveTrips counts trips since the last clean close.
	ConsecutiveTrips int `json:"consecutive_trips"`
}

// FromBreaker converts a breaker transition.
func FromBreaker(t breaker.Transition) Transition {
	return Transition{
		Breaker:          t.Breaker,
		From:             t.From.String(),
		To:               t.To.String(),
		Reason:           t.Reason,
		At:               t.At.UTC(),
		WindowS:          t.Window.Seconds(),
		Generation:       t.Generation,
		ConsecutiveTrips: t.ConsecutiveTrips,
	}
}

// Message returns t as a Watermill message with a new UUID (uuid is the
// UUID to use).
func (t Transition) Message(uuid string) (*message.Message, error) {
	body, err := json.Marshal(t)
	if err != nil {
		return nil, fmt.Errorf("events: encode transition: %w", err)
	}
	m := message.NewMessage(uuid, body)
	m.Metadata.Set(MetaEvent, EventTransition)
	m.Metadata.Set(MetaBreaker, t.Breaker)
	m.Metadata.Set(MetaFrom, t.From)
	m.Metadata.Set(MetaTo, t.To)
	return m, nil
}

// Decode reads a transition message. It returns an error wrapping
// [ErrNotTransition] when msg is not one.
func Decode(msg *message.Message) (Transition, error) {
	var t Transition
	if ev := msg.Metadata.Get(MetaEvent); ev != EventTransition {
		return t, fmt.Errorf("%w: %s = %q", ErrNotTransition, MetaEvent, ev)
	}
	if err := json.Unmarshal(msg.Payload, &t); err != nil {
		return t, fmt.Errorf("%w: %w", ErrNotTransition, err)
	}
	return t, nil
}
