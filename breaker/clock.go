package breaker

import "time"

// Clock tells the breaker the time. The default is the wall clock. Tests
// inject a fake (see package breakertest) and never sleep.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
}

// Timer is a pending call scheduled by [TimerClock.AfterFunc]. *time.Timer
// implements it.
type Timer interface {
	// Stop prevents the call from running; it reports whether it did.
	Stop() bool
}

// TimerClock is a [Clock] that can also schedule calls. With one (the wall
// clock is one), the breaker leaves the open state on a timer even when no
// call arrives, expires unreported probes, ends ramp steps and adaptive
// intervals on time, and polls [Config.HealthCheck]. With a plain Clock it
// does all of that lazily, on the next call to Allow, State or Snapshot, and
// never runs health checks.
type TimerClock interface {
	Clock
	// AfterFunc calls f in its own goroutine (or, for a fake clock, from the
	// goroutine that advances it) once d has elapsed on this clock. It must
	// not call f before returning: the breaker schedules under its lock.
	AfterFunc(d time.Duration, f func()) Timer
}

// IsWallClock reports whether c is the default [Clock], the wall clock
// ([time.Now]) that a breaker made without [Config.Clock] reports in
// [Breaker.Config]: a caller can then take a breaker's times as wall
// times, and need not read [time.Now] besides.
func IsWallClock(c Clock) bool {
	_, ok := c.(wallClock)
	return ok
}

// wallClock is the default clock.
type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }

func (wallClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }
