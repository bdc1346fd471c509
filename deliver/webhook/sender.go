package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/floodgate-go/floodgate/deliver"
	"github.com/floodgate-go/floodgate/internal/redact"
)

// opSend is the Op of every error Send returns.
const opSend = "webhook send"

// maxIdempotencyKey is the longest id accepted as an Idempotency-Key.
const maxIdempotencyKey = 255

// userAgent names the sender.
const userAgent = "floodgate-webhook"

// Sender posts messages to one webhook endpoint. Create it with [NewSender].
// It is safe for concurrent use; it keeps no per-message state.
type Sender struct {
	cfg  Config
	echo []string // what an error page may echo of the request and must not be quoted (redact.EchoSecrets)
}

// NewSender validates cfg, applies its defaults and returns a Sender. The
// error, if any, is "invalid config: ..." wrapping the error of
// [Config.Validate], which names the field.
func NewSender(cfg Config) (*Sender, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("invalid config: %w", err)
	}
	cfg.setDefaults()
	return &Sender{cfg: cfg, echo: redact.EchoSecrets(cfg.URL, cfg.Header)}, nil
}

// Config returns the sender's configuration with defaults applied.
func (s *Sender) Config() Config { return s.cfg }

// NewRequest builds the request Send would make for the message id with
// payload: method POST, body, Content-Type, Idempotency-Key, webhook-id
// (Standard Webhooks), and the timestamp and signature headers of
// Config.Scheme when a secret is configured, the timestamp being
// Config.Now(). It returns an error wrapping [ErrIdempotencyKey] or
// [ErrInvalidJSON].
func (s *Sender) NewRequest(ctx context.Context, id string, payload []byte) (*http.Request, error) {
	if !validKey(id) {
		return nil, fmt.Errorf("%w: %.64q", ErrIdempotencyKey, id)
	}
	if s.cfg.Scheme.standard() && strings.Contains(id, ".") {
		return nil, fmt.Errorf("%w: %q holds '.'", ErrIdempotencyKey, id)
	}
	if s.cfg.BodyFormat == FormatJSON && !json.Valid(payload) {
		return nil, ErrInvalidJSON
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.cfg.URL, bytes.NewReader(payload))
	if err != nil {
		return nil, err
	}
	for k, v := range s.cfg.Header {
		req.Header[k] = append([]string(nil), v...)
	}
	req.Header.Set("Content-Type", s.cfg.ContentType)
	req.Header.Set("User-Agent", userAgent)
	req.Header.Set(HeaderIdempotencyKey, id)
	if s.cfg.Scheme.standard() {
		req.Header.Set(HeaderWebhookID, id)
	}
	if len(s.cfg.Secret) == 0 {
		return req, nil
	}
	ts := s.cfg.Now().Unix()
	if s.cfg.Scheme.standard() {
		req.Header.Set(HeaderWebhookTimestamp, strconv.FormatInt(ts, 10))
		req.Header.Set(HeaderWebhookSignature, Sign(s.cfg.Secret, id, ts, payload))
	}
	if s.cfg.Scheme.floodgate() {
		req.Header.Set(HeaderTimestamp, strconv.FormatInt(ts, 10))
		req.Header.Set(HeaderSignature, SignFloodgate(s.cfg.Secret, ts, payload))
	}
	return req, nil
}

// Send posts payload as the message id (the Watermill message UUID, sent as
// the Idempotency-Key on every attempt) and returns nil when the endpoint
// answered 2xx. Otherwise it returns a [*deliver.Error] whose Kind is:
//
//   - [deliver.ErrRetryable] for a transport error or timeout (Config.Timeout
//     or ctx; the Cause wraps context.DeadlineExceeded or the net error),
//     HTTP 5xx, 429 or 408, with RetryAfter set from the Retry-After header;
//   - [deliver.ErrPermanent] for other statuses, and for a message that
//     cannot be sent ([ErrIdempotencyKey], [ErrInvalidJSON]); a consumer's
//     401 (a bad signature) is permanent too.
//
// The error quotes the start of the response body. The signature timestamp
// is taken per attempt. Send is safe for concurrent use.
func (s *Sender) Send(ctx context.Context, id string, payload []byte) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	req, err := s.NewRequest(ctx, id, payload)
	if err != nil {
		return &deliver.Error{Kind: deliver.ErrPermanent, Op: opSend, Cause: redact.URLError(err)}
	}
	resp, err := s.cfg.HTTPClient.Do(req)
	if err != nil {
		return &deliver.Error{Kind: deliver.ErrRetryable, Op: opSend, Cause: redact.URLError(err)} // no path secret
	}
	defer resp.Body.Close()
	// Read a little of the body for the error message, and drain the rest
	// (bounded) so the connection can be reused.
	head, _ := io.ReadAll(io.LimitReader(resp.Body, int64(maxSnippet+redact.Longest(s.echo))))
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))

	err = deliver.ClassifyHTTP(resp.StatusCode, resp.Header.Get("Retry-After"))
	var de *deliver.Error
	if errors.As(err, &de) {
		de.Op = opSend
		if snippet := redact.Snippet(head, maxSnippet, s.echo); snippet != "" {
			de.Cause = fmt.Errorf("%w: %s", de.Cause, snippet)
		}
	}
	return err
}

// SendJSON marshals v with encoding/json and sends it as [Sender.Send] does.
// A value that cannot be marshalled is a permanent failure.
func (s *Sender) SendJSON(ctx context.Context, id string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return &deliver.Error{Kind: deliver.ErrPermanent, Op: opSend, Cause: fmt.Errorf("%w: %v", ErrInvalidJSON, err)}
	}
	return s.Send(ctx, id, b)
}

// validKey reports whether id can be an Idempotency-Key: 1 to 255
// printable ASCII characters without spaces.
func validKey(id string) bool {
	if id == "" || len(id) > maxIdempotencyKey {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] <= 0x20 || id[i] >= 0x7f {
			return false
		}
	}
	return true
}

// maxSnippet bounds the response text quoted in an error.
const maxSnippet = 200
