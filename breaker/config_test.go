package breaker_test

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/internal/configtest"
)

func TestOpenWindowStep(t *testing.T) {
	s := time.Second
	tests := []struct {
		name string
		cfg  breaker.Config
		want []time.Duration // trips 1, 2, 3, …
	}{
		{"defaults (geofence ladder)", breaker.Config{}, []time.Duration{s, 2 * s, 4 * s, 8 * s, 16 * s, 30 * s, 30 * s}},
		{"factor 3", breaker.Config{BaseOpenWindow: 100 * time.Millisecond, MaxOpenWindow: 2 * s, BackoffFactor: 3},
			[]time.Duration{100 * time.Millisecond, 300 * time.Millisecond, 900 * time.Millisecond, 2 * s, 2 * s}},
		{"fractional factor", breaker.Config{BaseOpenWindow: s, BackoffFactor: 1.5, MaxOpenWindow: 4 * s},
			[]time.Duration{s, 1500 * time.Millisecond, 2250 * time.Millisecond, 3375 * time.Millisecond, 4 * s}},
		{"fixed", breaker.Config{BaseOpenWindow: 5 * s, FixedOpenWindow: true}, []time.Duration{5 * s, 5 * s, 5 * s}},
		{"factor 1", breaker.Config{BaseOpenWindow: 2 * s, BackoffFactor: 1}, []time.Duration{2 * s, 2 * s}},
		{"base above default cap", breaker.Config{BaseOpenWindow: time.Minute}, []time.Duration{time.Minute, time.Minute}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for i, want := range tt.want {
				if got := tt.cfg.OpenWindowStep(i + 1); got != want {
					t.Errorf("trip %d: %v, want %v", i+1, got, want)
				}
			}
		})
	}
	var c breaker.Config
	if got := c.OpenWindowStep(0); got != s {
		t.Errorf("trip 0: %v", got)
	}
	if got := c.OpenWindowStep(math.MaxInt32); got != 30*s {
		t.Errorf("huge trip: %v", got)
	}
}

func TestOpenWindowJitter(t *testing.T) {
	c := breaker.Config{Jitter: 0.25}
	for _, tc := range []struct {
		u    float64
		want time.Duration
	}{{0, 1500 * time.Millisecond}, {0.5, 2 * time.Second}, {0.75, 2250 * time.Millisecond}} {
		if got := c.OpenWindow(2, tc.u); got != tc.want {
			t.Errorf("u=%v: %v want %v", tc.u, got, tc.want)
		}
	}
	c.DisableJitter = true
	if got := c.OpenWindow(2, 0); got != 2*time.Second {
		t.Errorf("no jitter: %v", got)
	}
	// draws are uniform-ish, in [0,1), pure
	lo, hi := 1.0, 0.0
	for k := uint64(1); k <= 10000; k++ {
		u := breaker.JitterDraw(42, k)
		if u < 0 || u >= 1 {
			t.Fatalf("draw %v", u)
		}
		lo, hi = min(lo, u), max(hi, u)
		if breaker.JitterDraw(42, k) != u {
			t.Fatal("not pure")
		}
	}
	if lo > 0.01 || hi < 0.99 {
		t.Fatalf("draws not spread: [%v, %v]", lo, hi)
	}
	if breaker.JitterDraw(1, 1) == breaker.JitterDraw(2, 1) {
		t.Fatal("seed ignored")
	}
}

// TestSeededWindows: a seeded breaker's windows are predictable and within
// ±jitter of their steps.
func TestSeededWindows(t *testing.T) {
	b, clk := newTest(t, func(c *breaker.Config) {
		c.DisableJitter = false
		c.Jitter = 0.2
		c.Seed = 7
	})
	cfg := b.Config()
	trip(t, b, clk)
	for k := 1; k <= 8; k++ {
		s := b.SnapshotAt(clk.Now())
		step := cfg.OpenWindowStep(k)
		want := cfg.OpenWindow(k, breaker.JitterDraw(7, uint64(k)))
		if s.OpenWindowStep != step || s.OpenWindow != want {
			t.Fatalf("trip %d: %v/%v want %v/%v", k, s.OpenWindow, s.OpenWindowStep, want, step)
		}
		if float64(s.OpenWindow) < 0.8*float64(step) || float64(s.OpenWindow) > 1.2*float64(step) {
			t.Fatalf("window %v outside ±20%% of %v", s.OpenWindow, step)
		}
		clk.Advance(s.OpenWindow)
		call(t, b, clk, errBoom, 0)
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		field string
		mod   func(*breaker.Config)
	}{
		{"WindowSize", func(c *breaker.Config) { c.WindowSize = -1 }},
		{"WindowSize", func(c *breaker.Config) { c.WindowSize = 1 << 21 }},
		{"MinimumCalls", func(c *breaker.Config) { c.WindowSize = 5; c.MinimumCalls = 6 }},
		{"MinimumCalls", func(c *breaker.Config) { c.MinimumCalls = -2 }},
		{"WindowDuration", func(c *breaker.Config) { c.WindowDuration = -time.Second }},
		{"WindowDuration", func(c *breaker.Config) { c.WindowDuration = 5 * time.Millisecond }},
		{"WindowBuckets", func(c *breaker.Config) { c.WindowDuration = time.Second; c.WindowBuckets = -1 }},
		{"FailureRateThreshold", func(c *breaker.Config) { c.FailureRateThreshold = 1.5 }},
		{"FailureRateThreshold", func(c *breaker.Config) { c.FailureRateThreshold = -0.1 }},
		{"FailureRateThreshold", func(c *breaker.Config) { c.FailureRateThreshold = math.NaN() }},
		{"SlowCallDuration", func(c *breaker.Config) { c.SlowCallDuration = -1 }},
		{"SlowCallRateThreshold", func(c *breaker.Config) { c.SlowCallRateThreshold = 2 }},
		{"ConsecutiveFailures", func(c *breaker.Config) { c.ConsecutiveFailures = -1 }},
		{"BaseOpenWindow", func(c *breaker.Config) { c.BaseOpenWindow = -time.Second }},
		{"MaxOpenWindow", func(c *breaker.Config) { c.BaseOpenWindow = 2 * time.Second; c.MaxOpenWindow = time.Second }},
		{"MaxOpenWindow", func(c *breaker.Config) { c.MaxOpenWindow = breaker.MaxOpenWindowLimit + 1 }},
		{"BaseOpenWindow", func(c *breaker.Config) { c.BaseOpenWindow = 1<<63 - 1 }},
		{"BackoffFactor", func(c *breaker.Config) { c.BackoffFactor = 0.5 }},
		{"Jitter", func(c *breaker.Config) { c.Jitter = 1 }},
		{"Jitter", func(c *breaker.Config) { c.Jitter = -0.1 }},
		{"ProbeConcurrency", func(c *breaker.Config) { c.ProbeConcurrency = -1 }},
		{"SuccessesToClose", func(c *breaker.Config) { c.SuccessesToClose = -3 }},
		{"MaxProbeWait", func(c *breaker.Config) { c.MaxProbeWait = -time.Second }},
		{"MaxProbeWait", func(c *breaker.Config) { c.MaxProbeWait = time.Second }}, // < SlowCallDuration 5s
		{"HalfOpenPolicy", func(c *breaker.Config) { c.HalfOpenPolicy = 9 }},
		{"RampSteps[1]", func(c *breaker.Config) { c.RampSteps = []float64{0.5, 0.4, 1} }},
		{"RampSteps[0]", func(c *breaker.Config) { c.RampSteps = []float64{0, 1} }},
		{"RampSteps", func(c *breaker.Config) { c.RampSteps = []float64{0.2, 0.5} }},
		{"RampSteps", func(c *breaker.Config) { c.RampSteps = []float64{} }},
		{"RampStepDuration", func(c *breaker.Config) { c.RampStepDuration = -1 }},
		{"RampMaxFailureRate", func(c *breaker.Config) { c.RampMaxFailureRate = 3 }},
		{"RampMinCalls", func(c *breaker.Config) { c.RampMinCalls = -1 }},
		{"RampWindow", func(c *breaker.Config) { c.RampWindow = -1 }},
		{"RampAggression", func(c *breaker.Config) { c.RampAggression = -1 }},
		{"RampMinShare", func(c *breaker.Config) { c.RampMinShare = 1.5 }},
		{"AdaptiveMinShare", func(c *breaker.Config) { c.AdaptiveMinShare = 1 }},
		{"AdaptiveInterval", func(c *breaker.Config) { c.AdaptiveInterval = -1 }},
		{"AdaptiveIncrease", func(c *breaker.Config) { c.AdaptiveIncrease = 2 }},
		{"AdaptiveHold", func(c *breaker.Config) { c.AdaptiveHold = -1 }},
		{"AdaptiveHold", func(c *breaker.Config) { c.AdaptiveHold = 1001 }},
		{"AdaptiveBackoff", func(c *breaker.Config) { c.AdaptiveBackoff = 1 }},
		{"AdaptiveTolerance", func(c *breaker.Config) { c.AdaptiveTolerance = 1 }},
		{"AdaptiveLatencyRatio", func(c *breaker.Config) { c.AdaptiveLatencyRatio = 0.5 }},
		{"HealthCheckInterval", func(c *breaker.Config) { c.HealthCheckInterval = -1 }},
		{"HealthCheckTimeout", func(c *breaker.Config) { c.HealthCheckTimeout = -1 }},
	}
	for _, tt := range tests {
		t.Run(tt.field, func(t *testing.T) {
			var c breaker.Config
			tt.mod(&c)
			err := c.Validate()
			var ce *breaker.ConfigError
			if !errors.Is(err, breaker.ErrInvalidConfig) || !errors.As(err, &ce) || ce.Field != tt.field {
				t.Fatalf("Validate: %v", err)
			}
			if !strings.HasPrefix(err.Error(), "breaker: ") || !strings.Contains(err.Error(), "allowed") {
				t.Fatalf("message %q", err)
			}
			b, err := breaker.New(c)
			if b != nil || !errors.Is(err, breaker.ErrInvalidConfig) || !strings.HasPrefix(err.Error(), "invalid config: ") {
				t.Fatalf("New: %v", err)
			}
		})
	}
	var zero breaker.Config
	if err := zero.Validate(); err != nil {
		t.Fatalf("zero config: %v", err)
	}
	if zero.WindowSize != 0 {
		t.Fatal("Validate modified the config")
	}
	small := breaker.Config{WindowSize: 5}
	if err := small.Validate(); err != nil {
		t.Fatalf("small window with default minimum: %v", err)
	}
}

// Validate has a value receiver, like every config's in the module: it
// takes a value or a composite literal, applies the defaults to its own
// copy, and leaves the caller's config as it is.
func TestValidateOnValues(t *testing.T) {
	// fieldIs reports whether err is a ConfigError for the field.
	fieldIs := func(err error, field string) bool {
		var ce *breaker.ConfigError
		return errors.As(err, &ce) && ce.Field == field
	}
	t.Run("Config", func(t *testing.T) {
		configtest.Run(t, breaker.ErrInvalidConfig, []configtest.Case[breaker.Config]{
			{Name: "minimal", Cfg: breaker.Config{}},
			{Name: "WindowSize", Cfg: breaker.Config{WindowSize: 5}},
			{Name: "SuccessesToClose", Cfg: breaker.Config{SuccessesToClose: -1}, Want: "SuccessesToClose"},
			{Name: "MaxOpenWindow", Cfg: breaker.Config{MaxOpenWindow: time.Millisecond}, Want: "MaxOpenWindow"},
			// Cross-field rules (the table in the package doc).
			{Name: "MaxProbeWait below SlowCallDuration", Cfg: breaker.Config{SlowCallDuration: 10 * time.Second, MaxProbeWait: 5 * time.Second}, Want: "MaxProbeWait"},
			{Name: "MaxProbeWait equal to SlowCallDuration", Cfg: breaker.Config{SlowCallDuration: 10 * time.Second, MaxProbeWait: 10 * time.Second}},
			{Name: "MaxProbeWait default follows SlowCallDuration", Cfg: breaker.Config{SlowCallDuration: time.Minute}},
			{Name: "MinimumCalls above WindowSize", Cfg: breaker.Config{WindowSize: 5, MinimumCalls: 6}, Want: "MinimumCalls"},
		}, &configtest.Options[breaker.Config]{Match: fieldIs})
	})
	t.Run("rule message", func(t *testing.T) {
		err := breaker.Config{SlowCallDuration: 10 * time.Second, MaxProbeWait: 5 * time.Second}.Validate()
		for _, want := range []string{"MaxProbeWait", "SlowCallDuration", "SlowCallDuration <= MaxProbeWait"} {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("Validate = %v, want it to name %q", err, want)
			}
		}
	})
	t.Run("FleetConfig", func(t *testing.T) {
		st := breaker.NewMemoryStore(nil)
		configtest.Run(t, breaker.ErrInvalidConfig, []configtest.Case[breaker.FleetConfig]{
			{Name: "minimal", Cfg: breaker.FleetConfig{Store: st}},
			{Name: "ProbeLeaseTTL", Cfg: breaker.FleetConfig{Store: st, ProbeLeaseTTL: time.Millisecond}, Want: "FleetConfig.ProbeLeaseTTL"},
			{Name: "Store", Cfg: breaker.FleetConfig{}, Want: "FleetConfig.Store"},
		}, &configtest.Options[breaker.FleetConfig]{Match: fieldIs})
	})
}
