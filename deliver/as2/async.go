package as2

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"strings"
	"time"

	"github.com/floodgate-go/floodgate/deliver"
	"github.com/floodgate-go/floodgate/internal/redact"
)

// MDNAsync asks for an asynchronous MDN (RFC 4130 §7.3): the request
// carries Receipt-Delivery-Option: [Config.AsyncMDNURL], the partner
// answers the POST with a bare 2xx, and posts the MDN to that URL later,
// possibly hours later. A value of [Config.MDNMode].
const MDNAsync = "async"

// DefaultAsyncMDNTimeout is the default [Config.AsyncMDNTimeout].
const DefaultAsyncMDNTimeout = 24 * time.Hour

// PendingReceipt is the record of a message sent under [MDNAsync] whose MDN
// has not arrived yet: what the receipt endpoint needs to check the MDN
// (Message-ID, MIC, whether a signed receipt was asked for) and what a
// dead letter needs to carry the original message (ID, Payload, Metadata,
// Partner). [Sender.Send] builds it and hands it to [Config.Receipts]
// before it reports success. Its JSON form is what a store keeps.
type PendingReceipt struct {
	// MessageID is the Message-ID sent, "<id@domain>": the key the MDN's
	// Original-Message-ID resolves.
	MessageID string `json:"message_id"`
	// ID is the id passed to Send (the Watermill message UUID).
	ID string `json:"id"`
	// From and To are the AS2 IDs of the message (Config.From, Config.To):
	// they name the Sender whose receipt policy judges the MDN.
	From string `json:"from"`
	To   string `json:"to"`
	// Partner is the partner key of the message's route, from
	// [WithOriginal], or "" when Send was not given one.
	Partner string `json:"partner,omitempty"`
	// Service is the service whose route the message came from
	// (retryqueue.Config.Service), stamped by a store that knows it
	// (asyncmdn.StoreConfig.Service), or "" for a store of one service.
	// Send leaves it "". A resolver dead-letters only records of its own
	// service, or of none.
	Service string `json:"service,omitempty"`
	// MIC is the Received-Content-MIC the partner should return,
	// "<base64>, <alg>" (RFC 4130 §7.3.1), and MICAlg its algorithm in
	// RFC 5751 spelling ("sha-256").
	MIC    string `json:"mic"`
	MICAlg string `json:"micalg"`
	// SignedReceipt reports that a signed MDN was asked for
	// (Config.MDNCert or Config.TrustRoots set); RequireSignedMDN that it
	// was asked as "required".
	SignedReceipt    bool `json:"signed_receipt,omitempty"`
	RequireSignedMDN bool `json:"require_signed_mdn,omitempty"`
	// SentAt is when the partner answered 2xx; Deadline is SentAt +
	// Config.AsyncMDNTimeout, after which a missing MDN is dead-lettered
	// (reason "mdn-timeout").
	SentAt   time.Time `json:"sent_at"`
	Deadline time.Time `json:"deadline"`
	// ClaimedUntil is set by the store while a replica dead-letters the
	// record (a lease, so one replica does it); zero otherwise.
	ClaimedUntil time.Time `json:"claimed_until,omitzero"`
	// Payload is the original payload, as passed to Send (not the signed or
	// encrypted body): a dead letter carries it for an operator to replay.
	Payload []byte `json:"payload"`
	// Metadata is the original message's metadata, from [WithOriginal].
	Metadata map[string]string `json:"metadata,omitempty"`
}

// ReceiptStore keeps pending receipts durably, shared by every replica
// whose receipt endpoint may receive the MDN. deliver/as2 calls it from
// [Sender.Send] under [MDNAsync]; a JetStream KV implementation lives in
// package asyncmdn. Implementations must be safe for concurrent use.
type ReceiptStore interface {
	// MaxPayload returns the largest payload, in bytes, a record can carry.
	// Send refuses a larger one before sending it ([ErrPendingTooLarge]).
	MaxPayload() int
	// MaxRecordSize returns the largest record, in bytes, the store keeps:
	// a PendingReceipt's JSON encoding, ClaimedUntil set. Send refuses,
	// before sending anything, a message whose record (payload and
	// metadata, both untrusted) would be larger ([ErrPendingTooLarge]).
	MaxRecordSize() int
	// PutPending stores p durably and returns nil only once it is stored
	// (for JetStream: acknowledged by the server); an error wrapping
	// [ErrPendingTooLarge] for a record larger than MaxRecordSize. Storing a record for a
	// Message-ID already stored replaces it (a resend of the same message).
	PutPending(ctx context.Context, p *PendingReceipt) error
}

// Errors of asynchronous MDNs.
var (
	// ErrPendingStore: the partner answered 2xx but the pending receipt
	// could not be stored. Send returns it in a retryable [*deliver.Error],
	// also wrapping [deliver.ErrLocal] (the floodgate middleware reports it
	// to the breaker as neutral: the partner did its part), so the message
	// is not acked and is sent again: with the same
	// Message-ID, which the partner uses to discard the duplicate
	// (RFC 4130 §5.3.2 ([MessageID]); a partner that does not may process
	// it twice, the price of never losing the receipt's record).
	ErrPendingStore = errors.New("as2: pending receipt not stored")
	// ErrPendingTooLarge: under [MDNAsync] the payload is larger than the
	// receipt store's MaxPayload, or the whole record (payload, metadata)
	// larger than its MaxRecordSize, so it could not be stored. Send
	// returns it in a permanent [*deliver.Error] before sending anything
	// (and, should the store still refuse the record after the partner's
	// 2xx, permanent too: sending it again could never store it).
	ErrPendingTooLarge = errors.New("as2: payload too large for a pending receipt")
	// ErrUnknownReceipt: an asynchronous MDN answers no pending receipt
	// (unknown Original-Message-ID, or already resolved).
	ErrUnknownReceipt = errors.New("as2: MDN answers no pending receipt")
)

type originalKey struct{}

type original struct {
	partner  string
	metadata map[string]string
}

// WithOriginal returns ctx carrying the partner key and metadata of the
// message about to be sent, for the [PendingReceipt] that [Sender.Send]
// records under [MDNAsync], so that a dead letter (mdn-timeout, a failed
// receipt) carries the original message. metadata is copied. Under other
// MDN modes it is ignored.
func WithOriginal(ctx context.Context, partnerKey string, metadata map[string]string) context.Context {
	return context.WithValue(ctx, originalKey{}, original{partner: partnerKey, metadata: maps.Clone(metadata)})
}

// validateAsync checks the asynchronous MDN fields; requires defaults set.
func (c Config) validateAsync() error {
	if c.MDNMode != MDNAsync {
		if c.AsyncMDNURL != "" || c.Receipts != nil {
			return fmt.Errorf("Config.AsyncMDNURL or Config.Receipts with MDNMode %q: %w: they need %q", c.MDNMode, ErrMDNMode, MDNAsync)
		}
		return nil
	}
	u, err := url.Parse(c.AsyncMDNURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || !printableASCII(c.AsyncMDNURL) || strings.ContainsAny(c.AsyncMDNURL, " ,") {
		return fmt.Errorf("Config.AsyncMDNURL %q: %w (required with MDNMode %q)", redact.HTTPURL(c.AsyncMDNURL), ErrURL, MDNAsync)
	}
	if c.Receipts == nil {
		return fmt.Errorf("Config.Receipts: %w: MDNMode %q needs a store for pending receipts", ErrMDNMode, MDNAsync)
	}
	if c.AsyncMDNTimeout < 0 {
		return fmt.Errorf("Config.AsyncMDNTimeout %v: %w", c.AsyncMDNTimeout, ErrNegative)
	}
	if !c.signedMDN() && !c.AllowUnsignedAsyncMDN {
		return fmt.Errorf("Config.MDNCert, Config.TrustRoots, Config.AllowUnsignedAsyncMDN with MDNMode %q: %w: unsigned, anyone who can reach the receipt endpoint could resolve a receipt", MDNAsync, ErrUnsignedAsyncMDN)
	}
	return nil
}

// pending returns the pending receipt of out, sent with payload, the
// partner answering at now.
func (s *Sender) pending(ctx context.Context, id string, payload []byte, out *Outbound, now time.Time) *PendingReceipt {
	p := &PendingReceipt{
		MessageID: out.MessageID, ID: id, From: s.cfg.From, To: s.cfg.To,
		MIC: out.MIC, MICAlg: s.sign.micalg,
		SignedReceipt: s.cfg.signedMDN(), RequireSignedMDN: s.cfg.RequireSignedMDN,
		SentAt: now.UTC(), Deadline: now.Add(s.cfg.AsyncMDNTimeout).UTC(),
		Payload: payload,
	}
	if o, ok := ctx.Value(originalKey{}).(original); ok {
		p.Partner, p.Metadata = o.partner, o.metadata
	}
	return p
}

// recordPending stores the pending receipt of out, sent with payload,
// after the partner answered 2xx. It returns nil only once it is stored.
func (s *Sender) recordPending(ctx context.Context, id string, payload []byte, out *Outbound, status int, now time.Time) error {
	p := s.pending(ctx, id, payload, out, now)
	// The store gets its own deadline: ctx may be nearly spent by the
	// exchange, and a record not stored means a resend.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.Timeout)
	defer cancel()
	if err := s.cfg.Receipts.PutPending(sctx, p); err != nil {
		kind := deliver.ErrRetryable
		if errors.Is(err, ErrPendingTooLarge) {
			kind = deliver.ErrPermanent // a resend could never store it
		}
		return &deliver.Error{Kind: kind, Op: opSend, StatusCode: status,
			Cause: fmt.Errorf("%w (%w): HTTP %d from the partner, then: %w", ErrPendingStore, deliver.ErrLocal, status, err)}
	}
	return nil
}

// checkAsyncPayload refuses, before sending, a message whose pending
// receipt the store could not keep: its payload, or its whole record as
// the store encodes it (metadata is untrusted and JSON escapes <, > and &
// as 6 bytes), a claim's ClaimedUntil included.
func (s *Sender) checkAsyncPayload(ctx context.Context, id string, payload []byte, out *Outbound) error {
	if s.cfg.MDNMode != MDNAsync {
		return nil
	}
	if max := s.cfg.Receipts.MaxPayload(); len(payload) > max {
		return &deliver.Error{Kind: deliver.ErrPermanent, Op: opSend,
			Cause: fmt.Errorf("%w: %d bytes, the store's limit is %d", ErrPendingTooLarge, len(payload), max)}
	}
	// The longest times RFC 3339 with nanoseconds spells.
	at := time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC)
	p := s.pending(ctx, id, payload, out, at)
	p.SentAt, p.Deadline, p.ClaimedUntil = at, at, at
	b, err := json.Marshal(p)
	if err != nil {
		return &deliver.Error{Kind: deliver.ErrPermanent, Op: opSend, Cause: fmt.Errorf("%w: %w", ErrPendingTooLarge, err)}
	}
	if max := s.cfg.Receipts.MaxRecordSize(); len(b) > max {
		return &deliver.Error{Kind: deliver.ErrPermanent, Op: opSend,
			Cause: fmt.Errorf("%w: record of %d bytes (payload %d, metadata %d keys), the store's limit is %d", ErrPendingTooLarge, len(b), len(payload), len(p.Metadata), max)}
	}
	return nil
}

// ResolveReceipt judges an asynchronous MDN (the Content-Type and body
// posted to the receipt endpoint) for the pending receipt p, with the
// same receipt policy as a synchronous one ([Sender.Send]): MDNCert
// verifies the signature, RequireSignedMDN, RequireMIC and
// WarnOnMICMismatch decide what an unsigned MDN, a missing MIC or a
// mismatch is. It returns the MDN and nil (processed), a
// [*deliver.Warning] (processed, imperfect receipt), or a permanent
// [*deliver.Error] (not processed, MIC mismatch, another Message-ID); an
// error wrapping [ErrMDNSignature] (the MDN does not verify, its signer
// fails the trust model as a [*TrustError], or it is unsigned, also
// wrapping [ErrMDNUnsigned], while a signed MDN was asked for: MDNCert or
// TrustRoots set, RequireSignedMDN or not): it proves nothing, since
// anyone can post to the receipt endpoint, so the caller must leave p
// pending, to be resolved by a genuine MDN or dead-lettered at its
// deadline), or
// [ErrNoMDN] / [ErrMalformedMDN] (no MDN at all). Unlike the synchronous
// case, the MDN must name p's Message-ID in Original-Message-ID, and the
// MIC is compared with p.MIC (the content is not kept), so a MIC in
// another algorithm than p.MICAlg is a mismatch. p must come from this
// Sender's partner (p.From and p.To); ResolveReceipt is safe for
// concurrent use.
func (s *Sender) ResolveReceipt(p *PendingReceipt, contentType string, body []byte) (*MDN, error) {
	if int64(len(body)) > s.cfg.MaxMDNSize {
		return nil, fmt.Errorf("%w: larger than %d bytes", ErrNoMDN, s.cfg.MaxMDNSize)
	}
	var warns receiptWarnings
	mdn, err := s.readMDN(contentType, body, &warns)
	if s.cfg.signedMDN() && (errors.Is(err, ErrMDNUnsigned) || errors.Is(warns.err(), ErrMDNUnsigned)) {
		// Anyone can post to the receipt endpoint: when a signed MDN was
		// asked for, an unsigned one proves nothing, whatever it says.
		return mdn, fmt.Errorf("%w: %w: a signed MDN was asked for, and an asynchronous one proves nothing unsigned", ErrMDNSignature, ErrMDNUnsigned)
	}
	var te *TrustError
	if errors.As(err, &te) && !errors.Is(err, ErrMDNSignature) {
		// Signed by a certificate we do not trust: anyone can post to the
		// endpoint, so it proves nothing and parks nothing.
		err = fmt.Errorf("%w: %w", ErrMDNSignature, err)
	}
	switch {
	case errors.Is(err, ErrNoMDN) || errors.Is(err, ErrMalformedMDN) || errors.Is(err, ErrMDNSignature):
		return mdn, err
	case err != nil:
		de := &deliver.Error{Kind: deliver.ErrPermanent, Op: opSend, Cause: err}
		if mdn != nil {
			de.Disposition = mdn.DispositionField
		}
		return mdn, de
	}
	if normalizeMessageID(mdn.OriginalMessageID) != normalizeMessageID(p.MessageID) {
		return mdn, &deliver.Error{Kind: deliver.ErrPermanent, Op: opSend, Disposition: mdn.DispositionField,
			Cause: fmt.Errorf("%w: Original-Message-ID %q, pending %s", ErrMDNMismatch, mdn.OriginalMessageID, p.MessageID)}
	}
	match := func(received string) (bool, error) { return micStringsMatch(received, p.MIC) }
	if err := s.checkReceipt(p.MessageID, p.MIC, match, mdn, &warns); err != nil {
		return mdn, &deliver.Error{Kind: deliver.ErrPermanent, Op: opSend, Disposition: mdn.DispositionField, Cause: err}
	}
	return mdn, warns.err()
}

// micStringsMatch compares a received MIC with the one computed at send
// time: same digest, and an algorithm of the same hash.
func micStringsMatch(received, sent string) (bool, error) {
	rd, ra, err := ParseMIC(received)
	if err != nil {
		return false, err
	}
	sd, sa, err := ParseMIC(sent)
	if err != nil {
		return false, err
	}
	if newMICHash(ra) == nil {
		return false, fmt.Errorf("%w: %q", ErrMICAlgorithm, ra)
	}
	if canonicalMICAlg(ra) != canonicalMICAlg(sa) {
		return false, fmt.Errorf("%w: received %q, computed %q only", ErrMICAlgorithm, ra, sa)
	}
	return rd == sd, nil
}

// canonicalMICAlg folds the RFC 3851 and RFC 5751 spellings together.
func canonicalMICAlg(alg string) string {
	return strings.ReplaceAll(strings.ToLower(strings.TrimSpace(alg)), "-", "")
}
