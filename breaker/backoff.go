package breaker

import (
	"math"
	"time"
)

// OpenWindowStep returns the open window for the trip-th consecutive trip
// (trip >= 1; smaller values are treated as 1) before jitter:
// min(MaxOpenWindow, BaseOpenWindow × BackoffFactor^(trip-1)), or
// BaseOpenWindow when FixedOpenWindow is set. Zero fields take their
// defaults. It is a pure function of the trip count: with the defaults the
// steps are 1s, 2s, 4s, 8s, 16s, 30s, 30s, …
func (c *Config) OpenWindowStep(trip int) time.Duration {
	cc := *c
	cc.setDefaults()
	return cc.step(trip)
}

// OpenWindow returns the jittered open window for the trip-th consecutive
// trip given a uniform draw u in [0,1): OpenWindowStep(trip) × (1 - Jitter +
// 2·Jitter·u), so it lies within ±Jitter of its step. A [Breaker] takes u
// from [JitterDraw] with its seed. Zero fields take their defaults.
func (c *Config) OpenWindow(trip int, u float64) time.Duration {
	cc := *c
	cc.setDefaults()
	return cc.jittered(cc.step(trip), u)
}

// JitterDraw returns the uniform draw in [0,1) that a breaker seeded with
// seed uses for its k-th trip since it was created (k >= 1). It is a pure
// function (SplitMix64), so a seeded breaker's windows can be predicted.
func JitterDraw(seed, k uint64) float64 {
	return float64(splitmix64(seed+k*0x9E3779B97F4A7C15)>>11) / (1 << 53)
}

func splitmix64(x uint64) uint64 {
	x += 0x9E3779B97F4A7C15
	x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9
	x = (x ^ (x >> 27)) * 0x94D049BB133111EB
	return x ^ (x >> 31)
}

// step requires defaults set. The product is computed in float64 and
// compared with the cap before converting, so it never overflows.
func (c *Config) step(trip int) time.Duration {
	if trip < 1 {
		trip = 1
	}
	if c.FixedOpenWindow || c.BackoffFactor == 1 {
		return c.BaseOpenWindow
	}
	w := float64(c.BaseOpenWindow) * math.Pow(c.BackoffFactor, float64(trip-1))
	if math.IsInf(w, 0) || math.IsNaN(w) || w >= float64(c.MaxOpenWindow) {
		return c.MaxOpenWindow
	}
	return time.Duration(w)
}

// jittered requires defaults set.
func (c *Config) jittered(step time.Duration, u float64) time.Duration {
	if c.DisableJitter || c.Jitter == 0 {
		return step
	}
	f := 1 - c.Jitter + 2*c.Jitter*u
	return time.Duration(math.Round(float64(step) * f))
}
