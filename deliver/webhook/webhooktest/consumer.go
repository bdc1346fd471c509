package webhooktest

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"mime"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/floodgate-go/floodgate/deliver/webhook"
	"github.com/floodgate-go/floodgate/internal/faultscript"
)

// Configuration errors, returned (wrapped, naming the field) by
// [Config.Validate] and [New].
var (
	// ErrPhaseDuration: a Phase's Duration is negative, or zero on a phase
	// that is not the last one.
	ErrPhaseDuration = errors.New("webhooktest: phase duration must be > 0, or 0 (forever) on the last phase only")
	// ErrLatency: a latency is negative.
	ErrLatency = errors.New("webhooktest: latency must not be negative")
	// ErrSlowFraction: a SlowFraction is not within [0, 1].
	ErrSlowFraction = errors.New("webhooktest: slow fraction must be within [0, 1]")
	// ErrStatus: a Phase's Status is not 0 or an HTTP status 100 to 599.
	ErrStatus = errors.New("webhooktest: status must be 0 or 100 to 599")
)

// Phase is one step of the fault script.
type Phase struct {
	// Name labels the phase in timelines. Optional. Default "phase N".
	Name string
	// Duration is how long the phase lasts. Optional: 0 means forever, and
	// is allowed on the last phase only. The last phase lasts forever
	// whatever its Duration. Must not be negative.
	Duration time.Duration
	// Latency is how long a request waits before it is processed.
	// Optional. Default 0. Must not be negative.
	Latency time.Duration
	// SlowFraction is the fraction of requests that wait SlowLatency
	// instead of Latency. Optional. Default 0. Within [0, 1].
	SlowFraction float64
	// SlowLatency is the latency of the slow requests. Optional. Default 0.
	// Must not be negative.
	SlowLatency time.Duration
	// Status, when non-zero, is answered (after the latency) instead of
	// processing the request, e.g. 503. Optional. Default 0 (process, 200).
	Status int
	// RetryAfter is sent as Retry-After (whole seconds) with Status.
	// Optional. Default 0 (no header).
	RetryAfter time.Duration
}

// Degraded returns the fault script of the geofence design note: from t=0
// until recoverAt, a fraction slowFraction of requests (at least 0.01 for
// the P99 to show it) take spike (e.g. 900 ms) and the others fast; from
// recoverAt on every request takes fast.
func Degraded(recoverAt, fast, spike time.Duration, slowFraction float64) []Phase {
	return []Phase{
		{Name: "degraded", Duration: recoverAt, Latency: fast, SlowFraction: slowFraction, SlowLatency: spike},
		{Name: "recovered", Latency: fast},
	}
}

// Clock tells the time of the fault script. Its Now must be safe for
// concurrent use.
type Clock interface {
	Now() time.Time
}

type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }

// Config configures a [Consumer].
type Config struct {
	// Secret verifies the signature headers with a [webhook.Verifier]: a
	// request that fails gets HTTP 401, a replay 429 (Retry-After: 1), and
	// neither is processed. Optional: nil or empty skips verification.
	Secret []byte
	// Scheme is the signature headers verified
	// ([webhook.VerifierConfig].Scheme). Optional. Default
	// webhook.SchemeStandardWebhooks.
	Scheme webhook.Scheme
	// Tolerance is the timestamp tolerance of the verification, within
	// [webhook.MinTolerance, webhook.MaxTolerance]. Optional. Default
	// [webhook.DefaultTolerance].
	Tolerance time.Duration
	// Script is the fault script. Optional. Default: no latency, forever.
	Script []Phase
	// Clock tells the script's time (and the signature check's). Optional.
	// Default: the wall clock. Latencies are always real time.
	Clock Clock
	// MaxBodySize bounds a request body, in bytes; a larger one gets HTTP
	// 413. Optional. Default 1 MiB. Must not be negative.
	MaxBodySize int64
}

func (c *Config) setDefaults() {
	if len(c.Script) == 0 {
		c.Script = []Phase{{}}
	} else {
		c.Script = append([]Phase(nil), c.Script...)
	}
	for i := range c.Script {
		if c.Script[i].Name == "" {
			c.Script[i].Name = "phase " + strconv.Itoa(i+1)
		}
	}
	if c.Clock == nil {
		c.Clock = wallClock{}
	}
	if c.MaxBodySize == 0 {
		c.MaxBodySize = 1 << 20
	}
}

// Validate reports whether c, with defaults applied to its zero fields, is
// valid: the check [New] makes. It does not modify c. The error names the
// field and wraps the sentinel that states its allowed range:
// [ErrPhaseDuration], [ErrLatency], [ErrSlowFraction] or [ErrStatus], or
// for the verification settings (Scheme, Tolerance) the error of
// [webhook.VerifierConfig.Validate].
func (c Config) Validate() error {
	c.setDefaults() // copies Script: the caller's phases stay as they are
	return c.validate()
}

// validate requires defaults set.
func (c *Config) validate() error {
	for i, p := range c.Script {
		field := fmt.Sprintf("Config.Script[%d]", i)
		if p.Duration < 0 || (p.Duration == 0 && i < len(c.Script)-1) {
			return fmt.Errorf("%s.Duration %v: %w", field, p.Duration, ErrPhaseDuration)
		}
		if p.Latency < 0 || p.SlowLatency < 0 || p.RetryAfter < 0 {
			return fmt.Errorf("%s latencies %v/%v/%v: %w", field, p.Latency, p.SlowLatency, p.RetryAfter, ErrLatency)
		}
		if !(p.SlowFraction >= 0 && p.SlowFraction <= 1) {
			return fmt.Errorf("%s.SlowFraction %v: %w", field, p.SlowFraction, ErrSlowFraction)
		}
		if p.Status != 0 && (p.Status < 100 || p.Status > 599) {
			return fmt.Errorf("%s.Status %d: %w", field, p.Status, ErrStatus)
		}
	}
	vc := c.verifierConfig()
	if len(vc.Secret) == 0 {
		vc.Secret = []byte{0} // check Scheme and Tolerance without a secret too
	}
	if err := vc.Validate(); err != nil {
		return fmt.Errorf("Config (verification): %w", err)
	}
	if c.MaxBodySize < 0 {
		return fmt.Errorf("Config.MaxBodySize %d: %w", c.MaxBodySize, ErrLatency)
	}
	return nil
}

// verifierConfig is the configuration of the consumer's verifier.
func (c *Config) verifierConfig() webhook.VerifierConfig {
	return webhook.VerifierConfig{Secret: c.Secret, Scheme: c.Scheme, Tolerance: c.Tolerance, Now: c.Clock.Now}
}

// Stats counts a consumer's requests by outcome. Every request ends in
// exactly one of Processed, Rejected, BadSignatures, Replays or
// BadRequests.
type Stats struct {
	// Requests is every request received.
	Requests int
	// Processed counts processed requests, duplicates included.
	Processed int
	// Unique is the number of distinct idempotency keys processed.
	Unique int
	// Duplicates counts processings of a key already processed:
	// Processed - Unique. The consumer applies the effect once; these are
	// the redeliveries it recognised.
	Duplicates int
	// Slow counts requests that waited SlowLatency.
	Slow int
	// Abandoned counts processed requests whose client had gone away
	// before the answer (the sender timed out; it will retry).
	Abandoned int
	// Rejected counts answers with a phase's Status.
	Rejected int
	// BadSignatures counts HTTP 401 answers: signature or timestamp wrong.
	BadSignatures int
	// Replays counts requests the verifier refused as replays
	// ([webhook.ErrReplay], HTTP 429) or for a full seen-set
	// ([webhook.ErrSeenFull], HTTP 503).
	Replays int
	// BadRequests counts HTTP 400, 405 and 413 answers: not POST, no
	// Idempotency-Key, invalid JSON, body too large.
	BadRequests int
	// MaxConcurrent is the largest number of requests in progress at once.
	MaxConcurrent int
}

// Consumer is a webhook endpoint following a fault script. Create it with
// [New]. All methods are safe for concurrent use.
type Consumer struct {
	cfg      Config
	verifier *webhook.Verifier // nil without a secret

	mu         sync.Mutex
	started    bool
	t0         time.Time
	perPhase   []int // requests seen per phase, for the slow selection
	deliveries map[string]int
	bodies     map[string][]byte // first body per key
	stats      Stats
	inflight   int
}

// New validates cfg, applies its defaults and returns a Consumer. The
// error, if any, is "invalid config: ..." naming the field.
func New(cfg Config) (*Consumer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("invalid config: %w", err)
	}
	cfg.setDefaults()
	var v *webhook.Verifier
	if len(cfg.Secret) > 0 {
		var err error
		if v, err = webhook.NewVerifier(cfg.verifierConfig()); err != nil {
			return nil, err
		}
	}
	return &Consumer{
		cfg:        cfg,
		verifier:   v,
		perPhase:   make([]int, len(cfg.Script)),
		deliveries: map[string]int{},
		bodies:     map[string][]byte{},
	}, nil
}

// Start sets the script's t=0 to now (Config.Clock); calling it again
// restarts the script. Records and stats are kept.
func (c *Consumer) Start() { c.StartAt(c.cfg.Clock.Now()) }

// StartAt sets the script's t=0 to t.
func (c *Consumer) StartAt(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.started, c.t0 = true, t
}

// Script returns the fault script with defaults applied.
func (c *Consumer) Script() []Phase { return append([]Phase(nil), c.cfg.Script...) }

// PhaseAt returns the phase in force at t: the first before the script has
// started, the last after its end.
func (c *Consumer) PhaseAt(t time.Time) Phase {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cfg.Script[c.phaseIndex(t)]
}

// phaseIndex requires c.mu held.
func (c *Consumer) phaseIndex(t time.Time) int {
	if !c.started {
		return 0
	}
	return faultscript.Index(c.cfg.Script, func(ph Phase) time.Duration { return ph.Duration }, t.Sub(c.t0))
}

// Deliveries returns a copy of the idempotency keys processed, with the
// number of times each was processed; a count above 1 is a duplicate.
func (c *Consumer) Deliveries() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int, len(c.deliveries))
	for k, v := range c.deliveries {
		out[k] = v
	}
	return out
}

// Body returns the body first processed for key, and whether there is one.
func (c *Consumer) Body(key string) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b, ok := c.bodies[key]
	return append([]byte(nil), b...), ok
}

// Stats returns the counters so far.
func (c *Consumer) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stats
}

func (c *Consumer) count(f func(*Stats)) {
	c.mu.Lock()
	f(&c.stats)
	c.mu.Unlock()
}

// slowNext reports whether the n-th request (1-based) of a phase with
// fraction f is slow: floor(n·f) > floor((n-1)·f).
func slowNext(n int, f float64) bool {
	return math.Floor(float64(n)*f) > math.Floor(float64(n-1)*f)
}

// ServeHTTP handles one webhook request according to the phase in force
// when it arrives.
func (c *Consumer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	now := c.cfg.Clock.Now()
	c.mu.Lock()
	if !c.started {
		c.started, c.t0 = true, now
	}
	idx := c.phaseIndex(now)
	ph := c.cfg.Script[idx]
	c.perPhase[idx]++
	slow := slowNext(c.perPhase[idx], ph.SlowFraction)
	c.stats.Requests++
	c.inflight++
	c.stats.MaxConcurrent = max(c.stats.MaxConcurrent, c.inflight)
	if slow {
		c.stats.Slow++
	}
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.inflight--
		c.mu.Unlock()
	}()

	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, c.cfg.MaxBodySize))
	if err != nil {
		c.count(func(s *Stats) { s.BadRequests++ })
		http.Error(w, err.Error(), http.StatusRequestEntityTooLarge)
		return
	}
	latency := ph.Latency
	if slow {
		latency = ph.SlowLatency
	}
	if latency > 0 {
		// The work takes its time whether or not the client waits.
		time.Sleep(latency)
	}
	abandoned := r.Context().Err() != nil

	if ph.Status != 0 {
		c.count(func(s *Stats) { s.Rejected++ })
		if ph.RetryAfter > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(int(ph.RetryAfter.Round(time.Second)/time.Second)))
		}
		http.Error(w, "consumer unavailable ("+ph.Name+")", ph.Status)
		return
	}
	if r.Method != http.MethodPost {
		c.count(func(s *Stats) { s.BadRequests++ })
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "webhooks are POSTed", http.StatusMethodNotAllowed)
		return
	}
	key := r.Header.Get(webhook.HeaderWebhookID)
	if key == "" {
		key = r.Header.Get(webhook.HeaderIdempotencyKey)
	}
	if key == "" {
		c.count(func(s *Stats) { s.BadRequests++ })
		http.Error(w, "missing "+webhook.HeaderWebhookID+" and "+webhook.HeaderIdempotencyKey, http.StatusBadRequest)
		return
	}
	if c.verifier != nil {
		err := c.verifier.VerifyAt(r.Header, body, c.cfg.Clock.Now())
		switch {
		case errors.Is(err, webhook.ErrReplay), errors.Is(err, webhook.ErrSeenFull):
			// Possibly genuine (a retry within the second of the previous
			// attempt): answer so that the sender retries.
			c.count(func(s *Stats) { s.Replays++ })
			w.Header().Set("Retry-After", "1")
			status := http.StatusTooManyRequests
			if errors.Is(err, webhook.ErrSeenFull) {
				status = http.StatusServiceUnavailable
			}
			http.Error(w, err.Error(), status)
			return
		case err != nil:
			c.count(func(s *Stats) { s.BadSignatures++ })
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
	}
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt == "application/json" && !json.Valid(body) {
		c.count(func(s *Stats) { s.BadRequests++ })
		http.Error(w, "invalid JSON", http.StatusBadRequest)
		return
	}

	c.mu.Lock()
	c.deliveries[key]++
	c.stats.Processed++
	if c.deliveries[key] == 1 {
		c.stats.Unique++
		c.bodies[key] = body
	} else {
		c.stats.Duplicates++
	}
	if abandoned {
		c.stats.Abandoned++
	}
	c.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}
