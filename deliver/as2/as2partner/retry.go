package as2partner

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// maxRetryAfter caps a receipt URL's Retry-After.
const maxRetryAfter = time.Minute

// postError is a post of a receipt answered with a non-2xx status.
type postError struct {
	url        string
	status     int
	retryAfter string // the raw Retry-After header
}

func (e *postError) Error() string {
	return fmt.Sprintf("as2partner: posting the MDN to %s: HTTP %d", e.url, e.status)
}

// retryWait reports whether a post that failed with err may be retried
// (no answer, or a 5xx), and after how long.
func (c AsyncConfig) retryWait(err error) (time.Duration, bool) {
	var pe *postError
	if !errors.As(err, &pe) {
		return c.RetryDelay, true // no answer
	}
	if pe.status < 500 {
		return 0, false
	}
	if secs, perr := strconv.Atoi(strings.TrimSpace(pe.retryAfter)); perr == nil && secs > 0 {
		return min(time.Duration(secs)*time.Second, maxRetryAfter), true
	}
	return c.RetryDelay, true
}

// Close stops the receipts being posted (not held ones, see
// [AsyncConfig.Hold]): it cancels the Partner's base context, which ends
// their waits for Delay or a retry and their posts in flight, and returns
// once they have all ended. A receipt queued after Close is never posted.
// It does not close a server serving the Partner. Safe to call more than
// once, and concurrently.
func (p *Partner) Close() {
	p.async.mu.Lock()
	p.async.closed = true
	p.async.mu.Unlock()
	p.async.cancel()
	p.async.posts.Wait()
}

// postLater posts r after Config.Async.Delay, retrying, unless Close is
// called first.
func (p *Partner) postLater(r receipt) {
	p.async.mu.Lock()
	defer p.async.mu.Unlock()
	if p.async.closed {
		return
	}
	p.async.posts.Add(1)
	go func() {
		defer p.async.posts.Done()
		if sleep(p.async.ctx, p.cfg.Async.Delay) {
			p.postRetrying(p.async.ctx, r)
		}
	}()
}

// postRetrying posts r, and again up to Config.Async.Retries times while
// the post fails with no answer or a 5xx (see [AsyncConfig.Retries]),
// until ctx ends.
func (p *Partner) postRetrying(ctx context.Context, r receipt) {
	retries := p.cfg.Async.Retries
	if !p.cfg.Async.allowed(r.url) {
		retries = 0 // refused by post, and again each time
	}
	for try := 0; ; try++ {
		err := p.post(ctx, r)
		if err == nil || try >= retries || ctx.Err() != nil {
			return
		}
		wait, ok := p.cfg.Async.retryWait(err)
		if !ok || !sleep(ctx, wait) {
			return
		}
	}
}
