package as2

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/floodgate-go/floodgate/deliver"
)

// opSend is the Op of every error Send returns.
const opSend = "as2 send"

// Sender sends AS2 messages to one partner. Create it with [NewSender]. It is
// safe for concurrent use; it keeps no per-message state.
type Sender struct {
	cfg    Config
	client *http.Client
	steps  []bodyStep // signing, encryption: none yet
}

// NewSender validates cfg, applies its defaults and returns a Sender. The
// error, if any, is "invalid config: ..." wrapping the error of
// [Config.Validate], which names the field.
func NewSender(cfg Config) (*Sender, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("invalid config: %w", err)
	}
	cfg.setDefaults()
	return &Sender{cfg: cfg, client: cfg.HTTPClient}, nil
}

// Config returns the sender's configuration with defaults applied.
func (s *Sender) Config() Config { return s.cfg }

// Send sends payload as one AS2 message and waits for the synchronous MDN.
// id is the message's unique, stable id (the Watermill message UUID): the
// Message-ID is [MessageID](id, Config.MessageIDDomain), the same on every
// attempt, so the partner can discard a duplicate.
//
// Send returns the MDN when the partner processed the message. Otherwise it
// returns a [*deliver.Error] whose Kind is:
//
//   - [deliver.ErrRetryable] for a transport error or timeout (Config.Timeout
//     or ctx), HTTP 5xx, 429 or 408 (RetryAfter set from Retry-After), and a
//     2xx whose body is not a readable MDN ([ErrNoMDN], [ErrMalformedMDN]);
//   - [deliver.ErrPermanent] for other HTTP statuses, an MDN whose
//     disposition is not processed ([ErrNotProcessed], Disposition set), an
//     MDN for another Message-ID ([ErrMDNMismatch]), a Received-Content-MIC
//     that differs from the one computed ([ErrMICMismatch]), and a message that
//     cannot be built ([ErrMessageID], [ErrEmptyPayload]).
//
// When an MDN was read but rejected, Send returns it together with the
// error. An MDN without Original-Message-ID, or without Received-Content-MIC,
// or with a MIC in an algorithm this package cannot compute, is accepted on
// its disposition alone (it answers this very HTTP request). ctx bounds the
// whole exchange along with Config.Timeout.
func (s *Sender) Send(ctx context.Context, id string, payload []byte) (*MDN, error) {
	out, err := s.Build(id, payload)
	if err != nil {
		return nil, &deliver.Error{Kind: deliver.ErrPermanent, Op: opSend, Cause: err}
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()

	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.cfg.URL, bytes.NewReader(out.Body))
	if err != nil {
		return nil, &deliver.Error{Kind: deliver.ErrPermanent, Op: opSend, Cause: err}
	}
	req.Header = wireHeader(out.Header)
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, &deliver.Error{Kind: deliver.ErrRetryable, Op: opSend, Cause: err}
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
			if snippet := bodySnippet(body); snippet != "" {
				de.Cause = fmt.Errorf("%w: %s", de.Cause, snippet)
			}
		}
		return nil, err
	}
	if int64(len(body)) > s.cfg.MaxMDNSize {
		return nil, &deliver.Error{Kind: deliver.ErrRetryable, Op: opSend, StatusCode: resp.StatusCode,
			Cause: fmt.Errorf("%w: response larger than %d bytes", ErrNoMDN, s.cfg.MaxMDNSize)}
	}
	mdn, err := ParseMDN(resp.Header.Get("Content-Type"), body)
	if err != nil {
		return nil, &deliver.Error{Kind: deliver.ErrRetryable, Op: opSend, StatusCode: resp.StatusCode, Cause: err}
	}
	if err := s.verifyMDN(out, mdn); err != nil {
		return mdn, &deliver.Error{Kind: deliver.ErrPermanent, Op: opSend, StatusCode: resp.StatusCode,
			Disposition: mdn.DispositionField, Cause: err}
	}
	return mdn, nil
}

// verifyMDN checks a parsed MDN against the message it answers: the
// Original-Message-ID, the disposition, and the MIC. Verifying the MDN's
// signature belongs before ParseMDN, on the multipart/signed entity.
func (s *Sender) verifyMDN(out *Outbound, mdn *MDN) error {
	if mdn.OriginalMessageID != "" && normalizeMessageID(mdn.OriginalMessageID) != normalizeMessageID(out.MessageID) {
		return fmt.Errorf("%w: Original-Message-ID %s, sent %s", ErrMDNMismatch, mdn.OriginalMessageID, out.MessageID)
	}
	if !mdn.Processed() {
		return fmt.Errorf("%w: %s", ErrNotProcessed, mdn.DispositionField)
	}
	if mdn.ReceivedContentMIC != "" {
		ok, err := micMatches(mdn.ReceivedContentMIC, out.micContent)
		switch {
		case errors.Is(err, ErrMICAlgorithm):
			// We did not ask for a MIC (unsigned MDN requested) and cannot
			// compute this one: the disposition stands alone.
		case err != nil:
			return fmt.Errorf("%w: %v", ErrMICMismatch, err)
		case !ok:
			return fmt.Errorf("%w: received %q, sent %q", ErrMICMismatch, mdn.ReceivedContentMIC, out.MIC)
		}
	}
	return nil
}

// maxSnippet bounds the response text quoted in an error.
const maxSnippet = 200

// bodySnippet returns the start of an error response body as one line of
// printable text, for error messages.
func bodySnippet(b []byte) string {
	if len(b) > maxSnippet {
		b = b[:maxSnippet]
	}
	for len(b) > 0 && !utf8.Valid(b) {
		b = b[:len(b)-1]
	}
	s := strings.Join(strings.Fields(string(b)), " ")
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return -1
		}
		return r
	}, s)
}
