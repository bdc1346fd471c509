package asyncmdn

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/floodgate-go/floodgate/deliver"
	"github.com/floodgate-go/floodgate/deliver/as2"
	"github.com/floodgate-go/floodgate/metrics"
	"github.com/floodgate-go/floodgate/retryqueue"
)

// Defaults applied by [New] to zero fields of [Config].
const (
	DefaultMaxBodySize  = 1 << 20 // 1 MiB
	DefaultClaimLease   = time.Minute
	DefaultStoreTimeout = 5 * time.Second
	// DefaultEarlyRetryAfter is the default [Config.EarlyRetryAfter].
	DefaultEarlyRetryAfter = 30 * time.Second
)

// MetaMessageID is the metadata key of a dead letter made here: the AS2
// Message-ID the receipt was for.
const MetaMessageID = "as2_message_id"

// Clock tells the time; [Config.Clock] takes it so tests fix time.
type Clock = retryqueue.Clock

type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }

// Config configures [New].
type Config struct {
	// Store holds the pending receipts: the same bucket every sending
	// replica's [as2.Config.Receipts] writes to. Required. When its
	// [StoreConfig.Service] is set, it must equal Queue.Service().
	Store *Store
	// Senders judge the MDNs: the record's AS2 From and To pick the
	// Sender whose receipt policy (MDNCert, RequireSignedMDN, RequireMIC,
	// WarnOnMICMismatch) applies. Required: at least one; no two with the
	// same From and To; each Sender's AsyncMDNTimeout below the bucket's
	// TTL ([StoreConfig.TTL]), else its records would vanish without a dead
	// letter.
	Senders []*as2.Sender
	// Queue dead-letters negative receipts and timeouts, on the route of
	// the record's partner key (its AS2 To when Send had none). Required.
	// Its Service() is the Resolver's service: records naming another
	// service ([as2.PendingReceipt.Service]) are left to that service's
	// Resolver.
	Queue *retryqueue.Queue
	// MaxBodySize bounds the MDN read by the endpoint, in bytes; a larger
	// body is answered 413. Optional. Default 1 MiB. Must not be negative.
	MaxBodySize int64
	// ClaimLease is how long a replica's claim on a record it is
	// dead-lettering holds before another replica may take it over.
	// Optional. Default 1 minute. Must not be negative.
	ClaimLease time.Duration
	// StoreTimeout bounds each KV call when the caller's context has no
	// deadline. Optional. Default 5s. Must not be negative.
	StoreTimeout time.Duration
	// OnOutcome, when set, is called once per resolved record, after the
	// outcome is durable (record deleted, dead letter confirmed), on the
	// goroutine of the request or sweep. Optional.
	OnOutcome func(Outcome)
	// Clock tells the time for the endpoint's claims. Optional. Default
	// wall time. The sweep takes its time as an argument ([Resolver.SweepAt]).
	Clock Clock
	// EarlyRetryAfter is the Retry-After sent with the 503 that answers an
	// MDN whose record is not stored yet (see [Resolver.ServeHTTP]), in
	// whole seconds. Optional. Default 30s. Must not be negative.
	EarlyRetryAfter time.Duration
	// Metrics, when set, counts every answer of the endpoint and every
	// record the sweep dead-letters (floodgate_as2_async_receipts_total by
	// outcome and reason), and the records pending after each sweep
	// (floodgate_as2_async_pending_receipts). Optional.
	Metrics *metrics.Metrics
}

// Outcome is what became of one pending receipt.
type Outcome struct {
	// Receipt is the record resolved.
	Receipt *as2.PendingReceipt
	// MDN is the receipt received, or nil for a timeout.
	MDN *as2.MDN
	// Err is nil for a delivered message, a [*deliver.Warning] for one
	// delivered with an imperfect receipt, a permanent [*deliver.Error]
	// for a negative receipt, or an error wrapping [ErrMDNTimeout].
	Err error
	// DeadReason is the dead letter's reason, "" when delivered:
	// [retryqueue.DeadReasonPermanent] or [retryqueue.DeadReasonMDNTimeout].
	DeadReason string
	// At is when it was resolved.
	At time.Time
}

// Delivered reports whether the message was delivered (Err nil or a
// warning).
func (o Outcome) Delivered() bool { return o.DeadReason == "" }

// Resolver serves the receipt endpoint ([Resolver.ServeHTTP]) and sweeps
// deadlines ([Resolver.SweepAt]). Every replica runs one on the shared
// [Store]; each record is resolved once. It is safe for concurrent use.
type Resolver struct {
	cfg     Config
	senders map[[2]string]*as2.Sender
	domains map[string]bool // the Senders' MessageIDDomains, lower case
	ttl     time.Duration   // the bucket's TTL; 0 for none
	longest time.Duration   // the longest Senders' AsyncMDNTimeout
}

var _ http.Handler = (*Resolver)(nil)

func (c *Config) setDefaults() {
	if c.MaxBodySize == 0 {
		c.MaxBodySize = DefaultMaxBodySize
	}
	if c.ClaimLease == 0 {
		c.ClaimLease = DefaultClaimLease
	}
	if c.StoreTimeout == 0 {
		c.StoreTimeout = DefaultStoreTimeout
	}
	if c.Clock == nil {
		c.Clock = wallClock{}
	}
	if c.EarlyRetryAfter == 0 {
		c.EarlyRetryAfter = DefaultEarlyRetryAfter
	}
}

// New validates cfg and returns a Resolver. It reads the bucket's TTL
// from the server (bounded by Config.StoreTimeout). The error wraps
// "invalid config" and [ErrInvalidConfig], naming the field (also for a
// Sender whose AsyncMDNTimeout is not below the bucket's TTL, and for a
// Store whose StoreConfig.Service is not Config.Queue.Service()), or is
// JetStream's error reading the bucket.
func New(cfg Config) (*Resolver, error) {
	cfg.setDefaults()
	bad := func(f string, a ...any) (*Resolver, error) {
		return nil, fmt.Errorf("invalid config: %w: "+f, append([]any{ErrInvalidConfig}, a...)...)
	}
	switch {
	case cfg.Store == nil:
		return bad("Config.Store is required")
	case cfg.Queue == nil:
		return bad("Config.Queue is required")
	case len(cfg.Senders) == 0:
		return bad("Config.Senders: at least one sender is required")
	case cfg.Store.service != "" && cfg.Store.service != cfg.Queue.Service():
		return bad("Config.Store's StoreConfig.Service %q must equal Config.Queue.Service() %q (retryqueue.Config.Service): the Store writes records of one service, the Queue dead-letters on another's route",
			cfg.Store.service, cfg.Queue.Service())
	case cfg.MaxBodySize < 0 || cfg.ClaimLease < 0 || cfg.StoreTimeout < 0 || cfg.EarlyRetryAfter < 0:
		return bad("Config.MaxBodySize, ClaimLease, StoreTimeout and EarlyRetryAfter must not be negative")
	}
	r := &Resolver{cfg: cfg, senders: map[[2]string]*as2.Sender{}, domains: map[string]bool{}}
	for i, s := range cfg.Senders {
		if s == nil {
			return bad("Config.Senders[%d] is nil", i)
		}
		k := [2]string{s.Config().From, s.Config().To}
		if _, dup := r.senders[k]; dup {
			return bad("Config.Senders[%d]: a second sender from %q to %q", i, k[0], k[1])
		}
		r.senders[k] = s
		r.domains[strings.ToLower(s.Config().MessageIDDomain)] = true
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.StoreTimeout)
	defer cancel()
	st, err := cfg.Store.kv.Status(ctx)
	if err != nil {
		return nil, fmt.Errorf("asyncmdn: bucket %s: %w", cfg.Store.kv.Bucket(), err)
	}
	r.ttl = st.TTL()
	for i, s := range cfg.Senders {
		t := s.Config().AsyncMDNTimeout
		if r.ttl > 0 && t >= r.ttl {
			return bad("Config.Senders[%d] (from %q to %q): as2.Config.AsyncMDNTimeout %v, allowed < the bucket's TTL %v (StoreConfig.TTL): its records would vanish without a dead letter",
				i, s.Config().From, s.Config().To, t, r.ttl)
		}
		r.longest = max(r.longest, t)
	}
	return r, nil
}

// storeCtx bounds a KV call by StoreTimeout unless ctx has a deadline.
func (r *Resolver) storeCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, r.cfg.StoreTimeout)
}

// ServeHTTP is the receipt endpoint, the URL of [as2.Config.AsyncMDNURL]:
// it reads an asynchronous MDN (POST, at most Config.MaxBodySize bytes),
// finds its pending record by Original-Message-ID, judges it with the
// record's Sender ([as2.Sender.ResolveReceipt]) and resolves the record.
// RFC 4130 §7.3 leaves a failed post to the partner; AS2 products retry a
// post answered 5xx (or not answered) and give up on a 4xx, so a 4xx is
// sent only when posting the same MDN again cannot help. Answers:
//
//   - 200: resolved (delivered, or dead-lettered for a negative receipt),
//     or the record was resolved already ([ErrResolved]: a duplicate of an
//     MDN, or a late one after an mdn-timeout dead letter): nothing to do,
//     nothing resolved again;
//   - 400: no readable MDN, or no Original-Message-ID;
//   - 403: the signature does not verify with the partner's MDNCert
//     (or its signer is not trusted), or what it signs names another
//     Original-Message-ID than the one the record was found by (a genuine
//     MDN re-wrapped so that MIME parsers disagree), or the MDN is
//     unsigned while the
//     Sender asked for a signed one (MDNCert or TrustRoots set): nothing
//     resolved, anyone could have posted it; the record stays pending,
//     for a genuine MDN or the deadline sweep (mdn-timeout). A Sender
//     without MDNCert or TrustRoots accepts unsigned MDNs: then anyone who
//     can reach the endpoint and knows a Message-ID can resolve a record;
//   - 404: no record was ever stored (within the bucket's TTL) for that
//     Message-ID, and its domain is no Sender's MessageIDDomain: not ours;
//   - 405 not a POST; 413 body too large;
//   - 500: no Sender for the record's partner ([ErrNoSender]);
//   - 503 with Retry-After: the MDN may be early (no record yet, and the
//     Message-ID has one of our Senders' MessageIDDomain: Send stores the
//     record after the partner's 2xx, so a quick partner can post first;
//     Retry-After is Config.EarlyRetryAfter), or another replica holds a
//     claim on the record (Retry-After: the claim's remaining lease), or
//     the store or the dead-letter stream failed (Retry-After:
//     EarlyRetryAfter); and, as for an unknown record of ours, an MDN
//     whose record names another service ([as2.PendingReceipt.Service]
//     not Config.Queue.Service(); Retry-After: EarlyRetryAfter, counted
//     as reason "early", the same answer and text as an early MDN): this
//     Resolver neither judges, resolves nor dead-letters it. The record
//     is pending in the shared bucket, so the MDN may be genuine, and a
//     retry may reach that service's endpoint (one receipt URL in front of
//     several services); a 4xx would make the partner give up. Should it
//     never get there, that service's sweep dead-letters the record at its
//     deadline (mdn-timeout), never resending it.
//
// Every answer is counted in Config.Metrics.
func (r *Resolver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	a := r.serve(w, req)
	r.cfg.Metrics.ObserveAS2Receipt(a.Outcome, a.Reason)
	if a.Status == http.StatusMethodNotAllowed {
		w.Header().Set("Allow", http.MethodPost)
	}
	if a.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int((a.RetryAfter+time.Second-1)/time.Second)))
	}
	http.Error(w, a.Text, a.Status)
}

func (r *Resolver) serve(w http.ResponseWriter, req *http.Request) Answer {
	if req.Method != http.MethodPost {
		return Answer{Status: http.StatusMethodNotAllowed, Text: "asynchronous MDNs are POSTed", Outcome: metrics.ReceiptRefused, Reason: metrics.ReasonMethod}
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, req.Body, r.cfg.MaxBodySize))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return Answer{Status: http.StatusRequestEntityTooLarge, Text: "MDN larger than the endpoint accepts", Outcome: metrics.ReceiptRefused, Reason: metrics.ReasonTooLarge}
		}
		return Answer{Status: http.StatusBadRequest, Text: "reading the MDN failed", Outcome: metrics.ReceiptRefused, Reason: metrics.ReasonNotMDN}
	}
	return r.Resolve(req.Context(), req.Header.Get("Content-Type"), body)
}

// Answer is the endpoint's answer to one MDN ([Resolver.Resolve]).
type Answer struct {
	// Status is the HTTP status, Text the body ([Resolver.ServeHTTP]).
	Status int
	Text   string
	// RetryAfter, when > 0, is sent as Retry-After (whole seconds, rounded
	// up) with a 503.
	RetryAfter time.Duration
	// Outcome and Reason are the labels the answer is counted under in
	// floodgate_as2_async_receipts_total: one of the metrics.Receipt*
	// outcomes, and its reason.
	Outcome, Reason string
}

// Resolve is the endpoint's work on one MDN: its Content-Type and body. It
// returns what ServeHTTP answers (see there); it does not count it in
// Config.Metrics (ServeHTTP does), while Config.OnOutcome is called for a
// record it resolves.
func (r *Resolver) Resolve(ctx context.Context, contentType string, body []byte) Answer {
	refused := func(status int, reason, text string) Answer {
		return Answer{Status: status, Text: text, Outcome: metrics.ReceiptRefused, Reason: reason}
	}
	later := func(reason, text string, after time.Duration) Answer {
		return Answer{Status: http.StatusServiceUnavailable, Text: text, RetryAfter: max(after, time.Second), Outcome: metrics.ReceiptRetryLater, Reason: reason}
	}
	// Find the record first from the unverified MDN: its signature can
	// only be judged with the record's Sender.
	parsed, err := as2.ParseMDN(contentType, body)
	if err != nil {
		return refused(http.StatusBadRequest, metrics.ReasonNotMDN, "not an MDN: "+err.Error())
	}
	if strings.TrimSpace(parsed.OriginalMessageID) == "" {
		return refused(http.StatusBadRequest, metrics.ReasonNotMDN, "MDN has no Original-Message-ID")
	}
	sctx, cancel := r.storeCtx(ctx)
	defer cancel()
	rec, rev, err := r.cfg.Store.Get(sctx, parsed.OriginalMessageID)
	switch {
	case errors.Is(err, ErrResolved):
		return Answer{Status: http.StatusOK, Text: "receipt already resolved", Outcome: metrics.ReceiptDuplicate, Reason: metrics.ReasonNone}
	case errors.Is(err, as2.ErrUnknownReceipt) && r.ours(parsed.OriginalMessageID):
		return later(metrics.ReasonEarly, "no pending receipt for this Original-Message-ID yet", r.cfg.EarlyRetryAfter)
	case errors.Is(err, as2.ErrUnknownReceipt):
		return refused(http.StatusNotFound, metrics.ReasonUnknown, "no pending receipt for this Original-Message-ID")
	case err != nil:
		return later(metrics.ReasonUnavailable, "receipt store unavailable", r.cfg.EarlyRetryAfter)
	case !r.mine(rec):
		// Another service's record: absent from this service's view, so
		// answered as an early MDN (no record of ours yet), before any
		// Sender of ours judges it.
		return later(metrics.ReasonEarly, "no pending receipt for this Original-Message-ID yet", r.cfg.EarlyRetryAfter)
	}
	s := r.senders[[2]string{rec.From, rec.To}]
	if s == nil {
		return refused(http.StatusInternalServerError, metrics.ReasonNoSender, fmt.Sprintf("%v: from %q to %q", ErrNoSender, rec.From, rec.To))
	}
	mdn, verr := s.ResolveReceipt(rec, contentType, body)
	switch {
	case errors.Is(verr, as2.ErrMDNUnsigned) && errors.Is(verr, as2.ErrMDNSignature):
		return refused(http.StatusForbidden, metrics.ReasonUnsigned, "MDN unsigned: a signed MDN was asked for")
	case errors.Is(verr, as2.ErrMDNSignature):
		return refused(http.StatusForbidden, metrics.ReasonSignature, "MDN signature does not verify")
	case errors.Is(verr, as2.ErrMDNMismatch):
		// The record was found by the Original-Message-ID read before the
		// signature was checked; the signed report names another message.
		// ParseMDN and the verification split the body alike, so no MIME
		// re-wrapping gets here; kept as a second check: such a post proves
		// nothing about this record.
		return refused(http.StatusForbidden, metrics.ReasonSignature, "MDN signature does not cover this Original-Message-ID")
	case errors.Is(verr, as2.ErrNoMDN) || errors.Is(verr, as2.ErrMalformedMDN):
		return refused(http.StatusBadRequest, metrics.ReasonNotMDN, "not an MDN")
	}
	now := r.cfg.Clock.Now()
	if !rec.ClaimedUntil.IsZero() && now.Before(rec.ClaimedUntil) {
		return later(metrics.ReasonClaimed, "receipt being resolved by another replica", rec.ClaimedUntil.Sub(now))
	}
	out := Outcome{Receipt: rec, MDN: mdn, Err: verr, At: now}
	if verr == nil || deliver.IsWarning(verr) {
		if err := r.cfg.Store.remove(sctx, rec, rev); err != nil {
			return r.lost(err)
		}
		r.report(out)
		a := Answer{Status: http.StatusOK, Text: "receipt accepted: delivered", Outcome: metrics.ReceiptDelivered, Reason: metrics.ReasonNone}
		if w := deliver.AsWarning(verr); w != nil {
			a.Outcome, a.Reason = metrics.ReceiptWarning, w.Reason
		}
		return a
	}
	out.DeadReason = retryqueue.DeadReasonPermanent
	if err := r.deadLetter(ctx, rec, rev, now, out.DeadReason, verr); err != nil {
		return r.lost(err)
	}
	r.report(out)
	return Answer{Status: http.StatusOK, Text: "receipt accepted: not processed, dead-lettered", Outcome: metrics.ReceiptDeadLettered, Reason: out.DeadReason}
}

// mine reports whether rec is this Resolver's to resolve: it names no
// service, or the Queue's.
func (r *Resolver) mine(rec *as2.PendingReceipt) bool {
	return rec.Service == "" || rec.Service == r.cfg.Queue.Service()
}

// ours reports whether messageID's domain is one of the Senders'
// MessageIDDomain: a Message-ID we may have sent.
func (r *Resolver) ours(messageID string) bool {
	id := strings.TrimSuffix(strings.TrimSpace(messageID), ">")
	at := strings.LastIndexByte(id, '@')
	return at >= 0 && r.domains[strings.ToLower(strings.TrimSpace(id[at+1:]))]
}

// lost answers a resolution another replica won, or a store failure.
func (r *Resolver) lost(err error) Answer {
	if errors.Is(err, ErrClaimed) {
		return Answer{Status: http.StatusOK, Text: "receipt already resolved", Outcome: metrics.ReceiptDuplicate, Reason: metrics.ReasonNone}
	}
	return Answer{Status: http.StatusServiceUnavailable, Text: "receipt store or dead-letter stream unavailable",
		RetryAfter: max(r.cfg.EarlyRetryAfter, time.Second), Outcome: metrics.ReceiptRetryLater, Reason: metrics.ReasonUnavailable}
}

// deadLetter claims rec (read at rev), dead-letters its message with
// reason and cause, then deletes the record.
func (r *Resolver) deadLetter(ctx context.Context, rec *as2.PendingReceipt, rev uint64, now time.Time, reason string, cause error) error {
	sctx, cancel := r.storeCtx(context.WithoutCancel(ctx))
	defer cancel()
	crev, err := r.cfg.Store.claim(sctx, rec, rev, now.Add(r.cfg.ClaimLease))
	if err != nil {
		return err
	}
	msg := message.NewMessage(rec.ID, rec.Payload)
	msg.Metadata = maps.Clone(message.Metadata(rec.Metadata))
	if msg.Metadata == nil {
		msg.Metadata = message.Metadata{}
	}
	msg.Metadata.Set(MetaMessageID, rec.MessageID)
	key := rec.Partner
	if key == "" {
		key = rec.To
	}
	// sctx, not ctx: a client gone after the dead letter is stored must not
	// fail it, or the claim expires and the record is dead-lettered twice.
	if err := r.cfg.Queue.DeadLetterTo(sctx, msg, key, reason, cause); err != nil {
		return err // the claim expires; the record is resolved again
	}
	if err := r.cfg.Store.remove(sctx, rec, crev); err != nil && !errors.Is(err, ErrClaimed) {
		return fmt.Errorf("asyncmdn: dead-lettered %s, record not deleted: %w", rec.MessageID, err)
	}
	return nil
}

func (r *Resolver) report(o Outcome) {
	if r.cfg.OnOutcome != nil {
		r.cfg.OnOutcome(o)
	}
}

// Sweep is [Resolver.SweepAt] at the current time of Config.Clock.
func (r *Resolver) Sweep(ctx context.Context) (int, error) { return r.SweepAt(ctx, r.cfg.Clock.Now()) }

// SweepAt dead-letters, with reason [retryqueue.DeadReasonMDNTimeout], every
// pending record of its service (naming Config.Queue.Service(), or no
// service) whose deadline is at or before now and that no replica
// holds a live claim on, and returns how many it dead-lettered; records
// naming another service are left to that service's Resolver. Replicas
// sweeping at once dead-letter each record once (a claim by revision).
// Errors of single records are joined; the others are still swept. It
// never resends anything. It counts each dead letter in Config.Metrics,
// and sets the pending gauge to its service's records left (those listed,
// less those it dead-lettered and other services' records).
func (r *Resolver) SweepAt(ctx context.Context, now time.Time) (int, error) {
	lctx, cancel := r.storeCtx(ctx)
	keys, err := r.cfg.Store.keys(lctx)
	cancel()
	if err != nil {
		return 0, fmt.Errorf("asyncmdn: listing pending receipts: %w", err)
	}
	n, others := 0, 0
	var errs []error
	for _, k := range keys {
		if ctx.Err() != nil {
			return n, errors.Join(append(errs, ctx.Err())...)
		}
		gctx, cancel := r.storeCtx(ctx)
		rec, rev, err := r.cfg.Store.get(gctx, k)
		cancel()
		switch {
		case errors.Is(err, as2.ErrUnknownReceipt):
			continue // resolved meanwhile
		case err != nil:
			errs = append(errs, err)
			continue
		case !r.mine(rec):
			others++ // another service's Resolver sweeps it
			continue
		case now.Before(rec.Deadline) || now.Before(rec.ClaimedUntil):
			continue
		}
		cause := fmt.Errorf("%w: %s sent %s, deadline %s", ErrMDNTimeout, rec.MessageID,
			rec.SentAt.Format(time.RFC3339), rec.Deadline.Format(time.RFC3339))
		err = r.deadLetter(ctx, rec, rev, now, retryqueue.DeadReasonMDNTimeout, cause)
		switch {
		case errors.Is(err, ErrClaimed):
			continue // another replica has it
		case err != nil:
			errs = append(errs, err)
			continue
		}
		n++
		r.cfg.Metrics.ObserveAS2Receipt(metrics.ReceiptDeadLettered, retryqueue.DeadReasonMDNTimeout)
		r.report(Outcome{Receipt: rec, Err: cause, DeadReason: retryqueue.DeadReasonMDNTimeout, At: now})
	}
	r.cfg.Metrics.SetAS2PendingReceipts(len(keys) - n - others)
	return n, errors.Join(errs...)
}

// Run sweeps every interval until ctx is done, and returns ctx's error.
// Sweep errors go to onError when it is not nil. interval must be > 0,
// and the longest Senders' AsyncMDNTimeout plus interval below the
// bucket's TTL, or a record could expire before a sweep dead-letters it
// (else it returns an error wrapping [ErrInvalidConfig]); a minute suits
// deadlines of hours.
func (r *Resolver) Run(ctx context.Context, interval time.Duration, onError func(error)) error {
	if interval <= 0 {
		return fmt.Errorf("%w: sweep interval %v, allowed > 0", ErrInvalidConfig, interval)
	}
	if r.ttl > 0 && r.longest+interval >= r.ttl {
		return fmt.Errorf("%w: sweep interval %v, allowed < the bucket's TTL %v less the longest as2.Config.AsyncMDNTimeout %v",
			ErrInvalidConfig, interval, r.ttl, r.longest)
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			if _, err := r.Sweep(ctx); err != nil && onError != nil {
				onError(err)
			}
		}
	}
}
