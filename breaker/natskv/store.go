package natskv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/floodgate-go/floodgate/breaker"
)

// DefaultBucket is the default [Config.Bucket].
const DefaultBucket = "floodgate_breakers"

// Config configures [New].
type Config struct {
	// Bucket is the KV bucket's name. Optional. Default "floodgate_breakers".
	Bucket string

	// Replicas is the bucket's stream replicas. Optional. Default 1; range
	// 1..5. Use 3 on a production cluster.
	Replicas int

	// Storage is the bucket's storage. Optional. Default
	// jetstream.FileStorage.
	Storage jetstream.StorageType

	// MarkerTTL is how long the bucket keeps the marker of an expired probe
	// lease. Optional. Default 1s; range >= 1s.
	MarkerTTL time.Duration

	// Bind uses an existing bucket as is instead of creating or updating
	// it (for tools such as "floodgate status" that must not change it).
	// Optional. Default false.
	Bind bool
}

func (c *Config) setDefaults() {
	if c.Bucket == "" {
		c.Bucket = DefaultBucket
	}
	if c.Replicas == 0 {
		c.Replicas = 1
	}
	if c.MarkerTTL == 0 {
		c.MarkerTTL = time.Second
	}
}

// Validate reports whether c, with defaults applied to its zero fields, is
// valid: the check [New] makes. It does not modify c. The error wraps
// [ErrInvalidConfig] and names the field and its allowed range.
func (c Config) Validate() error {
	c.setDefaults()
	return c.validate()
}

// validate requires defaults set.
func (c *Config) validate() error {
	switch {
	case !validBucket.MatchString(c.Bucket):
		return fmt.Errorf("%w: Bucket %q, allowed [-_A-Za-z0-9]+", ErrInvalidConfig, c.Bucket)
	case c.Replicas < 1 || c.Replicas > 5:
		return fmt.Errorf("%w: Replicas %d, allowed 1..5", ErrInvalidConfig, c.Replicas)
	case c.MarkerTTL < time.Second:
		return fmt.Errorf("%w: MarkerTTL %v, allowed >= 1s", ErrInvalidConfig, c.MarkerTTL)
	}
	return nil
}

// validName is one KV key token, or two joined by a dot.
var validName = regexp.MustCompile(`^[-_=A-Za-z0-9]+(\.[-_=A-Za-z0-9]+)?$`)

// validBucket is JetStream's rule for a KV bucket name: no '=', unlike a key.
var validBucket = regexp.MustCompile(`^[-_A-Za-z0-9]+$`)

// Store is a [breaker.Store] on a JetStream KV bucket. It is safe for
// concurrent use. It holds no connection of its own: it works as long as
// the JetStream context's connection does.
type Store struct {
	js  jetstream.JetStream
	kv  jetstream.KeyValue
	hub *watchHub
}

var _ breaker.Store = (*Store)(nil)

// New creates (or updates, or with [Config.Bind] only binds) the bucket and
// returns a Store on it. It returns an error wrapping [ErrInvalidConfig],
// or JetStream's error.
func New(ctx context.Context, js jetstream.JetStream, cfg Config) (*Store, error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("invalid config: %w", err)
	}
	var kv jetstream.KeyValue
	var err error
	if cfg.Bind {
		kv, err = js.KeyValue(ctx, cfg.Bucket)
	} else {
		kv, err = js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket:         cfg.Bucket,
			Description:    "floodgate fleet-wide circuit breakers: shared state and probe leases",
			History:        1,
			Replicas:       cfg.Replicas,
			Storage:        cfg.Storage,
			LimitMarkerTTL: cfg.MarkerTTL,
		})
	}
	if err != nil {
		return nil, fmt.Errorf("natskv: bucket %s: %w", cfg.Bucket, err)
	}
	return &Store{js: js, kv: kv, hub: hubFor(js, kv)}, nil
}

// ValidateName returns an error wrapping [ErrInvalidName] unless name can
// name a breaker in the bucket: one KV key token, or two joined by one dot
// ("<service token>.<partner token>", see the package doc), each token
// [-_=A-Za-z0-9]+ (no spaces, no wildcards, not empty), at most
// [MaxNameLen] bytes.
func ValidateName(name string) error {
	if len(name) > MaxNameLen || !validName.MatchString(name) {
		return fmt.Errorf("%w: %q, allowed one or two tokens of [-_=A-Za-z0-9]+ joined by '.', at most %d bytes", ErrInvalidName, name, MaxNameLen)
	}
	return nil
}

// MaxNameLen is the longest breaker name [ValidateName] accepts, in bytes:
// two partner tokens (64 bytes each) and a dot, with room to spare.
const MaxNameLen = 200

// CheckName is [ValidateName], so that [breaker.JoinFleet] rejects a name
// the store cannot hold ([breaker.NameChecker]).
func (s *Store) CheckName(name string) error { return ValidateName(name) }

func stateKey(name string) (string, error) {
	if err := ValidateName(name); err != nil {
		return "", err
	}
	return name + ".state", nil
}

func probeKey(name string, slot int) string { return name + ".probe." + strconv.Itoa(slot) }

// isConflict reports a compare-and-swap conflict: a wrong last sequence,
// reported as code 10071 by R1 streams and 10164 by replicated ones, and not
// always wrapped by nats.go (Create over a deleted key).
func isConflict(err error) bool {
	if errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		return true
	}
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}

func decode(e jetstream.KeyValueEntry) (breaker.SharedState, error) {
	var st breaker.SharedState
	if e.Operation() != jetstream.KeyValuePut {
		return st, nil // deleted or purged: never tripped
	}
	if err := json.Unmarshal(e.Value(), &st); err != nil {
		return breaker.SharedState{}, fmt.Errorf("%w: %s revision %d: %w", ErrCorrupt, e.Key(), e.Revision(), err)
	}
	return st, nil
}

// Load implements [breaker.Store].
func (s *Store) Load(ctx context.Context, name string) (breaker.SharedState, uint64, error) {
	key, err := stateKey(name)
	if err != nil {
		return breaker.SharedState{}, 0, err
	}
	e, err := s.kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return breaker.SharedState{}, 0, nil
	}
	if errors.Is(err, jetstream.ErrKeyDeleted) && e != nil {
		return breaker.SharedState{}, e.Revision(), nil
	}
	if err != nil {
		return breaker.SharedState{}, 0, fmt.Errorf("natskv: load %s: %w", key, err)
	}
	st, err := decode(e)
	return st, e.Revision(), err
}

// CompareAndSwap implements [breaker.Store]: a KV Create when rev is 0,
// else a KV Update expecting rev.
func (s *Store) CompareAndSwap(ctx context.Context, name string, st breaker.SharedState, rev uint64) (uint64, error) {
	key, err := stateKey(name)
	if err != nil {
		return 0, err
	}
	val, err := json.Marshal(st)
	if err != nil {
		return 0, fmt.Errorf("natskv: encode: %w", err)
	}
	var nrev uint64
	if rev == 0 {
		nrev, err = s.kv.Create(ctx, key, val)
	} else {
		nrev, err = s.kv.Update(ctx, key, val, rev)
	}
	if isConflict(err) {
		return 0, fmt.Errorf("%w: %s not at revision %d: %w", breaker.ErrStaleRevision, key, rev, err)
	}
	if err != nil {
		return 0, fmt.Errorf("natskv: write %s: %w", key, err)
	}
	return nrev, nil
}

// AcquireProbe implements [breaker.Store]: it creates the first free key
// N.probe.i, trying the slots from a random one, with a per-key TTL of ttl
// (whole seconds, rounded up).
func (s *Store) AcquireProbe(ctx context.Context, name string, slots int, ttl time.Duration, holder string) (breaker.ProbeLease, error) {
	if _, err := stateKey(name); err != nil {
		return breaker.ProbeLease{}, err
	}
	ttl = (ttl + time.Second - 1).Truncate(time.Second)
	start := rand.IntN(max(1, slots))
	for k := range slots {
		i := (start + k) % slots
		rev, err := s.kv.Create(ctx, probeKey(name, i), []byte(holder), jetstream.KeyTTL(ttl))
		if isConflict(err) {
			continue // held, or taken by a racing replica
		}
		if err != nil {
			return breaker.ProbeLease{}, fmt.Errorf("natskv: probe slot %s: %w", probeKey(name, i), err)
		}
		return breaker.ProbeLease{Name: name, Slot: i, Revision: rev, Holder: holder}, nil
	}
	return breaker.ProbeLease{}, fmt.Errorf("%w: %d of %d held (%s)", breaker.ErrNoProbeSlot, slots, slots, name)
}

// ReleaseProbe implements [breaker.Store]: a delete of N.probe.i checked
// against the lease's revision.
func (s *Store) ReleaseProbe(ctx context.Context, l breaker.ProbeLease) error {
	err := s.kv.Delete(ctx, probeKey(l.Name, l.Slot), jetstream.LastRevision(l.Revision))
	if err == nil || isConflict(err) {
		return nil // expired, and maybe taken again: not ours to free
	}
	return fmt.Errorf("natskv: release %s: %w", probeKey(l.Name, l.Slot), err)
}

// Leases returns the probe leases of name currently held, by slot.
func (s *Store) Leases(ctx context.Context, name string) ([]breaker.ProbeLease, error) {
	if _, err := stateKey(name); err != nil {
		return nil, err
	}
	kl, err := s.kv.ListKeysFiltered(ctx, name+".probe.*")
	if err != nil {
		return nil, fmt.Errorf("natskv: list leases: %w", err)
	}
	var out []breaker.ProbeLease
	for k := range kl.Keys() {
		slot, err := strconv.Atoi(k[strings.LastIndexByte(k, '.')+1:])
		if err != nil {
			continue // name + ".probe" is a name too: its state key
		}
		e, err := s.kv.Get(ctx, k)
		if err != nil {
			continue // released or expired meanwhile
		}
		out = append(out, breaker.ProbeLease{Name: name, Slot: slot, Revision: e.Revision(), Holder: string(e.Value())})
	}
	return out, nil
}

// Names returns the names of the breakers with a shared state in the
// bucket (one or two tokens), sorted.
func (s *Store) Names(ctx context.Context) ([]string, error) {
	keys, err := s.kv.Keys(ctx)
	if errors.Is(err, jetstream.ErrNoKeysFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("natskv: list: %w", err)
	}
	var out []string
	for _, k := range keys {
		if n, ok := strings.CutSuffix(k, ".state"); ok {
			out = append(out, n)
		}
	}
	return out, nil
}
