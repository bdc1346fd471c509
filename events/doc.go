// Package events publishes a breaker's state transitions as Watermill
// messages, for other services and dashboards, and logs them through
// Watermill's [watermill.LoggerAdapter].
//
// # Model
//
// A [Notifier] is a listener on one or more breakers ([Notifier.Watch]).
// Breaker listeners run after the breaker's lock is released but on the
// goroutine that caused the transition (a delivery, a timer), so they must
// not block. The listener therefore only logs the transition (one Info line
// with the fields breaker, from, to, reason, window and generation; there are
// no per-message log lines) and puts it into a bounded buffer
// ([Config.Buffer], default 64). One goroutine publishes from the buffer, in
// transition order, each publish bounded by [Config.PublishTimeout].
//
// When the buffer is full — the broker is slow or down while the breaker
// flaps — the transition is dropped: counted in [Stats.Dropped] and logged at
// Error level. A publish that fails or times out is not retried: it is
// counted in [Stats.Failed] and logged. Transition messages are
// observations, not work items; the breaker's current state is always
// available from its Snapshot and from the metrics package, and the
// generation number in each message lets a consumer notice a gap.
//
// # Message
//
// Each transition is one message on [Config.Topic] (default
// "floodgate_transitions"), with a new UUID, metadata floodgate_event =
// "transition", floodgate_breaker, floodgate_from and floodgate_to (for
// routing without decoding), and a JSON body ([Transition]):
//
//	{"breaker":"northwind-as2","from":"closed","to":"open",
//	 "reason":"failure rate 0.60 >= 0.50 over 10 calls",
//	 "at":"2026-11-30T08:00:00.123Z","window_s":1.04,"generation":7,
//	 "consecutive_trips":1}
//
// [Decode] reads it back.
package events
