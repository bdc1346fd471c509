package asyncmdn

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/floodgate-go/floodgate/deliver/as2"
	"github.com/floodgate-go/floodgate/retryqueue"
	"github.com/nats-io/nats.go/jetstream"
)

// Defaults applied by [NewStore] to zero fields of [StoreConfig].
const (
	DefaultBucket       = "floodgate_as2_receipts"
	DefaultTTL          = 7 * 24 * time.Hour
	DefaultMaxValueSize = 1 << 20 // 1 MiB
)

// recordOverhead is what a record holds besides its payload, at most:
// Message-ID, AS2 IDs, MIC, times, metadata.
const recordOverhead = 64 << 10

// StoreConfig configures [NewStore].
type StoreConfig struct {
	// Bucket is the KV bucket's name. Optional. Default
	// "floodgate_as2_receipts". Letters, digits, '-' and '_'. One bucket
	// per service (retryqueue.Config.Service) is recommended: the
	// least-privilege grants ([ServiceAccess]) are per bucket, so services
	// sharing one can read and change each other's records. Services that
	// share a bucket must each set [StoreConfig.Service], so that each
	// [Resolver] resolves and dead-letters only its own records; records
	// without a service are resolved by every Resolver on the bucket, into
	// its own Queue's route. Their Message-IDs must differ too
	// (as2.Config.MessageIDDomain per service): a record is keyed by
	// Message-ID alone, so two services sending the same message id under
	// one domain replace each other's record.
	Bucket string
	// Service is the service whose records this Store writes: the
	// retryqueue.Config.Service (Queue.Service()) of the route its
	// messages come from. [Store.PutPending] stamps it on each record
	// ([as2.PendingReceipt.Service]), and [New] requires it to equal the
	// Resolver's Config.Queue.Service(). Optional. Default "": records
	// name no service, and the bucket should serve one service. When set,
	// printable UTF-8 without leading or trailing space (the rule of
	// retryqueue.Config.Service).
	Service string
	// TTL is the bucket's MaxAge: a record, resolved or not, is removed
	// this long after it was written. A backstop only: the sweep
	// dead-letters a record at its deadline, so TTL must be longer than
	// the longest [as2.Config.AsyncMDNTimeout] plus the sweep interval, or
	// a record would vanish without a dead letter. Optional. Default 7
	// days. Must not be negative.
	TTL time.Duration
	// MaxValueSize bounds an encoded record, in bytes, and so the payload
	// a record can carry ([Store.MaxPayload]). Optional. Default 1 MiB.
	// At least 128 KiB; at most the server's max_payload (the connection's
	// MaxPayload, 1 MiB by default in nats-server).
	MaxValueSize int32
	// Replicas is the bucket's replica count. Optional. Default 1.
	Replicas int
	// Storage is the bucket's storage. Optional. Default file storage.
	Storage jetstream.StorageType
}

var validBucket = regexp.MustCompile(`^[-_A-Za-z0-9]+$`)

func (c *StoreConfig) setDefaults() {
	if c.Bucket == "" {
		c.Bucket = DefaultBucket
	}
	if c.TTL == 0 {
		c.TTL = DefaultTTL
	}
	if c.MaxValueSize == 0 {
		c.MaxValueSize = DefaultMaxValueSize
	}
	if c.Replicas == 0 {
		c.Replicas = 1
	}
}

func (c StoreConfig) validate() error {
	switch {
	case !validBucket.MatchString(c.Bucket):
		return fmt.Errorf("%w: StoreConfig.Bucket %q, allowed [-_A-Za-z0-9]+", ErrInvalidConfig, c.Bucket)
	case c.Service != "" && !retryqueue.ValidService(c.Service):
		return fmt.Errorf("%w: StoreConfig.Service %q, allowed printable UTF-8 without leading or trailing space (as retryqueue.Config.Service)", ErrInvalidConfig, c.Service)
	case c.TTL < 0:
		return fmt.Errorf("%w: StoreConfig.TTL %v must not be negative", ErrInvalidConfig, c.TTL)
	case c.MaxValueSize < 2*recordOverhead:
		return fmt.Errorf("%w: StoreConfig.MaxValueSize %d, allowed >= %d", ErrInvalidConfig, c.MaxValueSize, 2*recordOverhead)
	case c.Replicas < 1:
		return fmt.Errorf("%w: StoreConfig.Replicas %d, allowed >= 1", ErrInvalidConfig, c.Replicas)
	}
	return nil
}

// Store is an [as2.ReceiptStore] on a JetStream KV bucket, shared by every
// replica. A record's key is "r." and the hex SHA-256 of the Message-ID
// without angle brackets, so no Message-ID, ours or one read from an MDN,
// can inject a subject token. It is safe for concurrent use.
type Store struct {
	kv      jetstream.KeyValue
	stream  jetstream.Stream // the bucket's stream, to tell a resolved record from an unknown one
	max     int32
	service string // StoreConfig.Service
	stamp   int    // bytes the service adds to an encoded record
}

var _ as2.ReceiptStore = (*Store)(nil)

// NewStore creates or updates the bucket and returns a Store on it. It
// returns an error wrapping "invalid config" and [ErrInvalidConfig]
// (naming the field, also for a MaxValueSize above the server's
// max_payload), or JetStream's error.
func NewStore(ctx context.Context, js jetstream.JetStream, cfg StoreConfig) (*Store, error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("invalid config: %w", err)
	}
	if nc := js.Conn(); nc != nil && nc.MaxPayload() > 0 && int64(cfg.MaxValueSize) > nc.MaxPayload() {
		return nil, fmt.Errorf("invalid config: %w: StoreConfig.MaxValueSize %d, allowed <= the server's max_payload %d",
			ErrInvalidConfig, cfg.MaxValueSize, nc.MaxPayload())
	}
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:       cfg.Bucket,
		Description:  "floodgate AS2 pending asynchronous receipts (RFC 4130 §7.3)",
		History:      1,
		TTL:          cfg.TTL,
		MaxValueSize: cfg.MaxValueSize,
		Replicas:     cfg.Replicas,
		Storage:      cfg.Storage,
	})
	if err != nil {
		return nil, fmt.Errorf("asyncmdn: bucket %s: %w", cfg.Bucket, err)
	}
	st, err := js.Stream(ctx, "KV_"+cfg.Bucket)
	if err != nil {
		return nil, fmt.Errorf("asyncmdn: bucket %s: %w", cfg.Bucket, err)
	}
	return &Store{kv: kv, stream: st, max: cfg.MaxValueSize, service: cfg.Service, stamp: stampSize(cfg.Service)}, nil
}

// stampSize is how many bytes service adds to a record's JSON encoding.
func stampSize(service string) int {
	if service == "" {
		return 0
	}
	b, _ := json.Marshal(service)
	return len(`,"service":`) + len(b)
}

// Service returns [StoreConfig.Service]: the service stamped on the
// records this Store writes, or "".
func (s *Store) Service() string { return s.service }

// Key returns the KV key of the record for messageID (with or without
// angle brackets).
func Key(messageID string) string {
	id := strings.TrimSpace(messageID)
	id = strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(id, "<"), ">"))
	sum := sha256.Sum256([]byte(id))
	return "r." + hex.EncodeToString(sum[:])
}

// MaxPayload returns the largest payload, in bytes, a record carries:
// (MaxValueSize - 64 KiB) * 3 / 4, the payload being base64 in the JSON
// record.
func (s *Store) MaxPayload() int { return int(s.max-recordOverhead) / 4 * 3 }

// MaxRecordSize returns the largest encoded record, in bytes, that
// [as2.Sender.Send] may hand over: [StoreConfig.MaxValueSize], less what
// [StoreConfig.Service] adds to it when PutPending stamps it.
func (s *Store) MaxRecordSize() int { return int(s.max) - s.stamp }

// PutPending stores p under its Message-ID, replacing a record of the same
// Message-ID, and returns once the server acknowledged it. With
// [StoreConfig.Service] set, the record stored names that service
// (p itself is not changed); without, p is stored as given. It returns an
// error wrapping [ErrRecordTooLarge] and [as2.ErrPendingTooLarge], or
// JetStream's error.
func (s *Store) PutPending(ctx context.Context, p *as2.PendingReceipt) error {
	if s.service != "" && p.Service != s.service {
		c := *p
		c.Service = s.service
		p = &c
	}
	b, err := json.Marshal(p)
	if err != nil {
		return err
	}
	if len(b) > int(s.max) {
		return fmt.Errorf("%w (%w): %d bytes, limit %d", ErrRecordTooLarge, as2.ErrPendingTooLarge, len(b), s.max)
	}
	_, err = s.kv.Put(ctx, Key(p.MessageID), b)
	return err
}

// Get returns the pending record for messageID and its revision. It
// returns an error wrapping [as2.ErrUnknownReceipt] when there is none,
// also wrapping [ErrResolved] when the record was resolved (deleted)
// within the bucket's TTL.
func (s *Store) Get(ctx context.Context, messageID string) (*as2.PendingReceipt, uint64, error) {
	return s.get(ctx, Key(messageID))
}

func (s *Store) get(ctx context.Context, key string) (*as2.PendingReceipt, uint64, error) {
	e, err := s.kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		if s.resolved(ctx, key) {
			return nil, 0, fmt.Errorf("%w: %w: key %s", as2.ErrUnknownReceipt, ErrResolved, key)
		}
		return nil, 0, fmt.Errorf("%w: key %s", as2.ErrUnknownReceipt, key)
	}
	if err != nil {
		return nil, 0, err
	}
	var p as2.PendingReceipt
	if err := json.Unmarshal(e.Value(), &p); err != nil {
		return nil, 0, fmt.Errorf("asyncmdn: record %s: %w", key, err)
	}
	return &p, e.Revision(), nil
}

// resolved reports whether key's last entry is a delete marker: its
// record was resolved, and the marker is kept until the bucket's TTL. An
// error reading it reports false (unknown), the cautious answer.
func (s *Store) resolved(ctx context.Context, key string) bool {
	m, err := s.stream.GetLastMsgForSubject(ctx, "$KV."+s.kv.Bucket()+"."+key)
	if err != nil {
		return false
	}
	op := m.Header.Get("KV-Operation")
	return op == "DEL" || op == "PURGE"
}

// claim marks p, read at revision rev, as being resolved until until; it
// returns the new revision, or an error wrapping [ErrClaimed] when
// another replica changed it first.
func (s *Store) claim(ctx context.Context, p *as2.PendingReceipt, rev uint64, until time.Time) (uint64, error) {
	c := *p
	c.ClaimedUntil = until.UTC()
	b, err := json.Marshal(&c)
	if err != nil {
		return 0, err
	}
	n, err := s.kv.Update(ctx, Key(p.MessageID), b, rev)
	if revisionMismatch(err) {
		return 0, fmt.Errorf("%w: %s", ErrClaimed, p.MessageID)
	}
	return n, err
}

// remove deletes p's record if it is still at revision rev; an error
// wrapping [ErrClaimed] otherwise.
func (s *Store) remove(ctx context.Context, p *as2.PendingReceipt, rev uint64) error {
	err := s.kv.Delete(ctx, Key(p.MessageID), jetstream.LastRevision(rev))
	if revisionMismatch(err) {
		return fmt.Errorf("%w: %s", ErrClaimed, p.MessageID)
	}
	return err
}

// keys lists the keys of the records, resolved ones excluded.
func (s *Store) keys(ctx context.Context) ([]string, error) {
	l, err := s.kv.ListKeys(ctx)
	if err != nil {
		if errors.Is(err, jetstream.ErrNoKeysFound) {
			return nil, nil
		}
		return nil, err
	}
	defer l.Stop()
	var keys []string
	for k := range l.Keys() {
		keys = append(keys, k)
	}
	return keys, nil
}

// revisionMismatch reports whether err is a KV write refused because the
// key's revision changed.
func revisionMismatch(err error) bool {
	return errors.Is(err, jetstream.ErrKeyRevisionMismatch) || errors.Is(err, jetstream.ErrKeyExists)
}
