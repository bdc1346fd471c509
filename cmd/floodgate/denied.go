package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// errReadDenied marks a read of a stream's messages that the server refused
// to the connection's user (a read-only operator's: docs/permissions.md).
var errReadDenied = errors.New("reading messages is not permitted to this user")

// readDeniedError is a refused read: the subject the server named in its
// permission violation, or the JetStream API error it answered.
type readDeniedError struct {
	Subject string // the denied subject, "" for an API error
	Err     error  // the API error, nil for a permission violation
}

func (e *readDeniedError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%v: %v", errReadDenied, e.Err)
	}
	return fmt.Sprintf("%v (permission violation for publish to %q)", errReadDenied, e.Subject)
}

func (e *readDeniedError) Is(target error) bool { return target == errReadDenied }
func (e *readDeniedError) Unwrap() error        { return e.Err }

// publishDenied extracts the subject of a publish permission violation
// (nats-server: Permissions Violation for Publish to "<subject>").
var publishDenied = regexp.MustCompile(`(?i)publish to "([^"]+)"`)

// denials receives a connection's asynchronous permission violations (its
// nats.ErrorHandler) and cancels the reads guarded against them. A denied
// JetStream API request gets no reply, only this asynchronous error, so a
// read would otherwise end only at its timeout. Safe for concurrent use.
type denials struct {
	mu      sync.Mutex
	denied  []string // subjects of publish violations seen
	watches map[*denialWatch]struct{}
}

type denialWatch struct {
	match  func(subject string) bool
	cancel context.CancelCauseFunc
}

// option is the connection option that reports violations to d.
func (d *denials) option() nats.Option { return nats.ErrorHandler(d.handler) }

func (d *denials) handler(_ *nats.Conn, _ *nats.Subscription, err error) {
	if !errors.Is(err, nats.ErrPermissionViolation) {
		return
	}
	m := publishDenied.FindStringSubmatch(err.Error())
	if m == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.denied = append(d.denied, m[1])
	for w := range d.watches {
		if w.match(m[1]) {
			w.cancel(&readDeniedError{Subject: m[1]})
		}
	}
}

// readsMessages reports whether subject is a JetStream API request that
// reads stream's messages: a message get (stored or direct), or creating
// or pulling from a consumer on it.
func readsMessages(stream, subject string) bool {
	p := jetstream.DefaultAPIPrefix
	for _, api := range []string{"STREAM.MSG.GET.", "DIRECT.GET.", "CONSUMER.CREATE.", "CONSUMER.DURABLE.CREATE.", "CONSUMER.MSG.NEXT."} {
		rest, ok := strings.CutPrefix(subject, p+api+stream)
		if ok && (rest == "" || rest[0] == '.') {
			return true
		}
	}
	return false
}

// guardRead runs read with a context that is cancelled as soon as the
// server denies a request reading stream's messages. It returns an error
// wrapping errReadDenied (a *readDeniedError) for such a denial, or for a
// JetStream API error 403; otherwise read's own error. ctx's deadline
// stays a hang guard only.
func (d *denials) guardRead(ctx context.Context, stream string, read func(context.Context) error) error {
	gctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	w := &denialWatch{match: func(s string) bool { return readsMessages(stream, s) }, cancel: cancel}
	d.mu.Lock()
	if d.watches == nil {
		d.watches = map[*denialWatch]struct{}{}
	}
	d.watches[w] = struct{}{}
	for _, s := range d.denied { // denied before the watch began
		if w.match(s) {
			cancel(&readDeniedError{Subject: s})
		}
	}
	d.mu.Unlock()
	defer func() { d.mu.Lock(); delete(d.watches, w); d.mu.Unlock() }()

	err := read(gctx)
	if err == nil {
		return nil
	}
	var rd *readDeniedError
	if errors.As(context.Cause(gctx), &rd) {
		return rd
	}
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && apiErr.Code == http.StatusForbidden {
		return &readDeniedError{Err: err}
	}
	return err
}

// errDenied marks a command stopped because the server refused one of its
// requests to the connection's user (a permission violation): a read-only
// operator's "purge", "replay", "open", "close" or "reset".
var errDenied = errors.New("not permitted to this user")

// deniedError is a request the server refused: the subject it named in its
// permission violation.
type deniedError struct{ Subject string }

func (e *deniedError) Error() string {
	return fmt.Sprintf("%v (permission violation for publish to %q)", errDenied, e.Subject)
}

func (e *deniedError) Is(target error) bool { return target == errDenied }

// guardAll returns a context that is cancelled, with a *deniedError as its
// cause, as soon as the server denies any publish of the connection (or
// has denied one already): a command that changes something needs every
// one of its requests, and a denied request gets no reply, so it would
// otherwise end only at ctx's deadline, which stays a hang guard. stop
// ends the watch; [deniedCause] turns the command's error into the denial.
func (d *denials) guardAll(ctx context.Context) (gctx context.Context, stop func()) {
	gctx, cancel := context.WithCancelCause(ctx)
	// The handler cancels with a *readDeniedError; this watch is not about
	// reads, so it cancels with the plain denial.
	w := &denialWatch{match: func(string) bool { return true }, cancel: func(cause error) {
		var rd *readDeniedError
		if errors.As(cause, &rd) {
			cause = &deniedError{Subject: rd.Subject}
		}
		cancel(cause)
	}}
	d.mu.Lock()
	if d.watches == nil {
		d.watches = map[*denialWatch]struct{}{}
	}
	d.watches[w] = struct{}{}
	if len(d.denied) > 0 {
		w.cancel(&deniedError{Subject: d.denied[0]})
	}
	d.mu.Unlock()
	return gctx, func() {
		d.mu.Lock()
		delete(d.watches, w)
		d.mu.Unlock()
		cancel(nil)
	}
}

// deniedCause returns the *deniedError that cancelled ctx (a context from
// [denials.guardAll]), or err when there was none or err is nil.
func deniedCause(ctx context.Context, err error) error {
	var de *deniedError
	if err != nil && errors.As(context.Cause(ctx), &de) {
		return de
	}
	return err
}
