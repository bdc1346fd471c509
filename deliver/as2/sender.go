package as2

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/floodgate-go/floodgate/deliver"
	"github.com/floodgate-go/floodgate/internal/redact"
)

// opSend is the Op of every error Send returns.
const opSend = "as2 send"

// Sender sends AS2 messages to one partner. Create it with [NewSender]. It is
// safe for concurrent use; it keeps no per-message state.
type Sender struct {
	cfg    Config
	client *http.Client
	sign   signAlg    // digest of signatures and MICs
	enc    encryptAlg // content encryption, when EncryptionCert is set
	steps  []bodyStep // compress, sign, encrypt, in the configured order
	signAt int        // index of the sign step in steps, or -1
	echo   []string   // what an error page may echo of the URL and must not be quoted (redact.EchoSecrets)
}

// NewSender validates cfg, applies its defaults and returns a Sender. The
// error, if any, is "invalid config: ..." wrapping the error of
// [Config.Validate], which names the field.
func NewSender(cfg Config) (*Sender, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("invalid config: %w", err)
	}
	cfg.setDefaults()
	s := &Sender{cfg: cfg, client: cfg.HTTPClient, echo: redact.EchoSecrets(cfg.URL, nil)}
	var err error
	if s.sign, err = lookupSignAlg(cfg.SignAlgorithm); err != nil {
		return nil, fmt.Errorf("invalid config: Config.SignAlgorithm: %w", err) // unreachable after Validate
	}
	if s.enc, err = lookupEncryptAlg(cfg.EncryptAlgorithm); err != nil {
		return nil, fmt.Errorf("invalid config: Config.EncryptAlgorithm: %w", err)
	}
	s.signAt = -1
	if cfg.Compression == CompressBeforeSign {
		s.steps = append(s.steps, compressStep())
	}
	if cfg.SigningCert != nil {
		s.signAt = len(s.steps)
		s.steps = append(s.steps, s.signStep())
	}
	if cfg.Compression == CompressAfterSign {
		s.steps = append(s.steps, compressStep())
	}
	if cfg.EncryptionCert != nil {
		s.steps = append(s.steps, s.encryptStep())
	}
	return s, nil
}

// Config returns the sender's configuration with defaults applied.
func (s *Sender) Config() Config { return s.cfg }

// Send sends payload as one AS2 message and, under [MDNSync], waits for the
// synchronous MDN. Under [MDNAsync] a 2xx answer is a success (nil, nil)
// only once the pending receipt is stored in Config.Receipts (its MDN is
// judged later by [Sender.ResolveReceipt]); if it cannot be stored Send
// returns a retryable error wrapping [ErrPendingStore], and a payload
// larger than the store's MaxPayload is refused before sending, a
// permanent error wrapping [ErrPendingTooLarge]. id is the message's unique, stable id (the Watermill
// message UUID): the Message-ID is [MessageID](id, Config.MessageIDDomain),
// the same on every attempt, so the partner can discard a duplicate.
//
// Send returns the MDN and nil when the partner processed the message and
// the receipt is all that was asked for (nil and nil under [MDNNone]: any
// 2xx is the delivery). It returns a [*deliver.Warning], the message
// delivered but its receipt imperfect, never to be resent, with the MDN if
// one was read, for:
//
//   - a 2xx whose body is no readable MDN ([ErrNoMDN], [ErrMalformedMDN],
//     or larger than Config.MaxMDNSize) under [MDNSync]: delivered,
//     unconfirmed ([deliver.WarnUnconfirmed]);
//   - an unsigned "processed" MDN when a signed one was asked for as
//     optional ([ErrMDNUnsigned], [deliver.WarnMDNUnsigned]);
//   - a "processed" MDN without Received-Content-MIC when a signed one was
//     asked for and Config.RequireMIC is false ([ErrMICMissing],
//     [deliver.WarnMICMissing]);
//   - a MIC mismatch when Config.WarnOnMICMismatch is set ([ErrMICMismatch],
//     [deliver.WarnMICMismatch]);
//   - an MDN whose disposition is "processed/warning: ..." ([ErrMDNWarning],
//     [deliver.WarnMDNWarning]).
//
// With several, the Warning's Reason is the first in this order and its
// cause joins them all. Otherwise Send returns a [*deliver.Error] whose
// Kind is:
//
//   - [deliver.ErrRetryable] for a transport error or timeout (Config.Timeout
//     or ctx), an error reading the response, and HTTP 5xx, 429 or 408
//     (RetryAfter set from Retry-After);
//   - [deliver.ErrPermanent] for other HTTP statuses, an MDN whose
//     disposition is not processed ([ErrNotProcessed], Disposition set), an
//     MDN for another Message-ID ([ErrMDNMismatch]), a MIC mismatch without
//     Config.WarnOnMICMismatch ([ErrMICMismatch]), a message that cannot be
//     built ([ErrMessageID], [ErrEmptyPayload]); and, when Config.MDNCert
//     asks for a signed MDN, a signature that does not verify
//     ([ErrMDNSignature]), an unsigned MDN with Config.RequireSignedMDN
//     ([ErrMDNUnsigned]) and a missing MIC with Config.RequireMIC
//     ([ErrMICMissing]).
//
// A signed MDN whose signer is not trusted (see [Sender.VerifyMDNAt]:
// expired or not yet valid at Config.Now, not the pinned certificate, not
// chained to Config.TrustRoots) gives a [*deliver.ParkError] (reason
// [deliver.ParkAS2Trust]) holding a retryable [*deliver.Error] whose cause
// is the [*TrustError]: the partner is parked, the message kept.
//
// When an MDN was read but rejected, Send returns it together with the
// error. Without Config.MDNCert, an MDN without Original-Message-ID, or
// without Received-Content-MIC (unless Config.RequireMIC), or with a MIC in
// an algorithm this package cannot compute, is accepted on its disposition
// alone (it answers this very HTTP request). ctx bounds the whole exchange
// along with Config.Timeout.
func (s *Sender) Send(ctx context.Context, id string, payload []byte) (*MDN, error) {
	return s.send(ctx, id, payload, s.cfg.Filename)
}

// send is Send with the payload's filename ("" for none).
func (s *Sender) send(ctx context.Context, id string, payload []byte, filename string) (*MDN, error) {
	out, err := s.buildAt(id, payload, filename, time.Now())
	if err != nil {
		return nil, &deliver.Error{Kind: deliver.ErrPermanent, Op: opSend, Cause: err}
	}
	if err := s.checkAsyncPayload(ctx, id, payload, out); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()

	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.cfg.URL, bytes.NewReader(out.Body))
	if err != nil {
		return nil, &deliver.Error{Kind: deliver.ErrPermanent, Op: opSend, Cause: redact.URLError(err)}
	}
	req.Header = wireHeader(out.Header)
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, &deliver.Error{Kind: deliver.ErrRetryable, Op: opSend, Cause: redact.URLError(err)} // no path secret
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, s.cfg.MaxMDNSize+1))
	if err != nil {
		return nil, &deliver.Error{Kind: deliver.ErrRetryable, Op: opSend, StatusCode: resp.StatusCode,
			Cause: fmt.Errorf("reading response: %w", err)}
	}

	if err := deliver.ClassifyHTTP(resp.StatusCode, resp.Header.Get("Retry-After")); err != nil {
		var de *deliver.Error
		if errors.As(err, &de) {
			de.Op = opSend
			if snippet := redact.Snippet(body, maxSnippet, s.echo); snippet != "" {
				de.Cause = fmt.Errorf("%w: %s", de.Cause, snippet)
			}
		}
		return nil, err
	}
	switch s.cfg.MDNMode {
	case MDNNone:
		return nil, nil // no MDN asked for: the 2xx is the delivery
	case MDNAsync:
		// The MDN comes later: the 2xx is the delivery once its pending
		// receipt is stored (async.go).
		return nil, s.recordPending(ctx, id, payload, out, resp.StatusCode, time.Now())
	}
	if int64(len(body)) > s.cfg.MaxMDNSize {
		return nil, unconfirmed(resp.StatusCode, fmt.Errorf("%w: response larger than %d bytes", ErrNoMDN, s.cfg.MaxMDNSize))
	}
	var warns receiptWarnings
	mdn, err := s.readMDN(resp.Header.Get("Content-Type"), body, &warns)
	var untrusted *TrustError
	switch {
	case errors.Is(err, ErrNoMDN) || errors.Is(err, ErrMalformedMDN):
		return nil, unconfirmed(resp.StatusCode, err)
	case errors.As(err, &untrusted):
		return mdn, park(resp.StatusCode, mdn, err)
	case err != nil:
		de := &deliver.Error{Kind: deliver.ErrPermanent, Op: opSend, StatusCode: resp.StatusCode, Cause: err}
		if mdn != nil {
			de.Disposition = mdn.DispositionField
		}
		return mdn, de
	}
	if err := s.verifyMDN(out, mdn, &warns); err != nil {
		return mdn, &deliver.Error{Kind: deliver.ErrPermanent, Op: opSend, StatusCode: resp.StatusCode,
			Disposition: mdn.DispositionField, Cause: err}
	}
	warnDisposition(mdn, &warns)
	return mdn, warns.err()
}

// unconfirmed is the warning of a 2xx answer without a usable MDN: the
// partner has the message, so a resend would deliver it twice.
func unconfirmed(status int, cause error) error {
	return &deliver.Warning{Op: opSend, Reason: deliver.WarnUnconfirmed,
		Cause: fmt.Errorf("HTTP %d without a usable MDN, delivered unconfirmed: %w", status, cause)}
}

// receiptWarnings collects what is imperfect about a receipt that is
// accepted: the first reason, and every cause.
type receiptWarnings struct {
	reason string
	causes []error
}

func (w *receiptWarnings) add(reason string, cause error) {
	if w.reason == "" {
		w.reason = reason
	}
	w.causes = append(w.causes, cause)
}

// err returns the [*deliver.Warning] of the collected warnings, or nil.
func (w *receiptWarnings) err() error {
	if len(w.causes) == 0 {
		return nil
	}
	return &deliver.Warning{Op: opSend, Reason: w.reason, Cause: errors.Join(w.causes...)}
}

// readMDN parses the response as an MDN, and verifies its signature when a
// signed MDN was requested (Config.MDNCert set). An unsigned MDN is a
// warning when the request was optional and the MDN says processed, else
// an error; an unsigned MDN that reports a failure wraps both
// ErrMDNUnsigned and ErrNotProcessed.
func (s *Sender) readMDN(contentType string, body []byte, warns *receiptWarnings) (*MDN, error) {
	if !s.cfg.signedMDN() {
		return ParseMDN(contentType, body)
	}
	mdn, err := s.VerifyMDNAt(contentType, body, s.cfg.now())
	if errors.Is(err, ErrMDNUnsigned) && mdn != nil {
		switch {
		case !mdn.Processed():
			err = fmt.Errorf("%w; %w: %s", err, ErrNotProcessed, mdn.DispositionField)
		case s.cfg.RequireSignedMDN:
			err = fmt.Errorf("%w: a signed MDN is required", err)
		default: // RFC 3798 §2.2, RFC 4130 §7.3: optional, so allowed
			warns.add(deliver.WarnMDNUnsigned, err)
			err = nil
		}
	}
	return mdn, err
}

// verifyMDN checks a parsed MDN against the message it answers: the
// Original-Message-ID, the disposition, and the MIC, as the receipt
// policies of Config say; what is accepted but imperfect goes to warns.
func (s *Sender) verifyMDN(out *Outbound, mdn *MDN, warns *receiptWarnings) error {
	match := func(received string) (bool, error) { return micMatches(received, out.micContent) }
	return s.checkReceipt(out.MessageID, out.MIC, match, mdn, warns)
}

// checkReceipt is verifyMDN for the message msgID whose MIC was mic;
// micOK compares a received MIC with it (sync: recomputed from the
// content; async: compared with the MIC recorded).
func (s *Sender) checkReceipt(msgID, mic string, micOK func(string) (bool, error), mdn *MDN, warns *receiptWarnings) error {
	if mdn.OriginalMessageID != "" && normalizeMessageID(mdn.OriginalMessageID) != normalizeMessageID(msgID) {
		return fmt.Errorf("%w: Original-Message-ID %s, sent %s", ErrMDNMismatch, mdn.OriginalMessageID, msgID)
	}
	if !mdn.Processed() {
		return fmt.Errorf("%w: %s", ErrNotProcessed, mdn.DispositionField)
	}
	requested := s.cfg.signedMDN()
	if mdn.ReceivedContentMIC == "" {
		err := fmt.Errorf("%w: sent %q", ErrMICMissing, mic)
		switch {
		case s.cfg.RequireMIC:
			return err
		case requested:
			warns.add(deliver.WarnMICMissing, err)
		}
		return nil
	}
	ok, err := micOK(mdn.ReceivedContentMIC)
	var mismatch error
	switch {
	case errors.Is(err, ErrMICAlgorithm) && !requested:
		// We did not ask for a MIC (unsigned MDN requested) and cannot
		// compute this one: the disposition stands alone.
	case err != nil:
		mismatch = fmt.Errorf("%w: %v", ErrMICMismatch, err)
	case !ok:
		mismatch = fmt.Errorf("%w: received %q, sent %q", ErrMICMismatch, mdn.ReceivedContentMIC, mic)
	}
	if mismatch != nil {
		if !s.cfg.WarnOnMICMismatch {
			return mismatch
		}
		warns.add(deliver.WarnMICMismatch, mismatch)
	}
	return nil
}

// warnDisposition adds the warning of a "processed/warning: ..." MDN
// (RFC 4130 §7.4.3) to warns: processed, but the partner reports a problem.
func warnDisposition(mdn *MDN, warns *receiptWarnings) {
	if mdn.Processed() && strings.HasPrefix(strings.ToLower(mdn.Modifier), "warning") {
		warns.add(deliver.WarnMDNWarning, fmt.Errorf("%w: %s", ErrMDNWarning, mdn.DispositionField))
	}
}

// maxSnippet bounds the response text quoted in an error.
const maxSnippet = 200
