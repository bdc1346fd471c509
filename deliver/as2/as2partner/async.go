package as2partner

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path"
	"strings"
	"sync"
	"time"
)

// Defaults applied to zero fields of [AsyncConfig].
const (
	DefaultAsyncTimeout         = 10 * time.Second
	DefaultAsyncMaxResponseSize = 64 << 10 // 64 KiB
)

// ErrAsyncURL: an [AsyncConfig.AllowURLs] entry is not an absolute http://
// or https:// URL, or a timeout or size there is negative.
var ErrAsyncURL = errors.New("as2partner: async receipt settings: allowed URLs must be absolute http:// or https:// URLs, durations and sizes not negative")

// AsyncConfig makes the partner honour Receipt-Delivery-Option (RFC 4130
// §7.3): it answers such a request HTTP 200 with no body, and posts the
// MDN (signed when asked for, as a synchronous one) to the URL later.
//
// The URL comes from the request, so the partner posts only to URLs that
// AllowURLs allows (no server-side request forgery through it), follows
// no redirect, bounds each post by Timeout and reads at most
// MaxResponseSize bytes of the answer.
type AsyncConfig struct {
	// AllowURLs lists the URL prefixes receipts may be posted to: a
	// Receipt-Delivery-Option URL is allowed when its scheme and host
	// equal an entry's, case-insensitively (with the port when the entry
	// has one; an entry without a port allows any port of its host), and
	// its path, dot segments removed, is the entry's path or below it,
	// also with each segment's ";parameters" removed first (as Java servlet
	// containers read it: "/mdn/..;/admin" is not below "/mdn"); userinfo,
	// a NUL, a backslash and percent-encoded dots, slashes or backslashes
	// in the path are never allowed.
	// Hosts are compared by name, not by the address they resolve to: list
	// names you trust. Optional.
	// Default none: a request asking for an asynchronous MDN is refused
	// with HTTP 403 and not processed, since a test partner must not post
	// to an address a request chose unless it was told to trust it.
	AllowURLs []string
	// Delay is how long after the request the MDN is posted. Optional.
	// Default 0. Must not be negative. Ignored with Hold.
	Delay time.Duration
	// Hold keeps the receipts until [Partner.PostReceipts] posts them, so
	// a test decides when a receipt arrives. Optional. Default false.
	Hold bool
	// Timeout bounds each post. Optional. Default 10s. Must not be
	// negative.
	Timeout time.Duration
	// Retries is how many more times a receipt is posted (not with Hold)
	// when its post failed with a 5xx or no answer, as AS2 products do: 4xx
	// answers are final. Each retry waits for the answer's Retry-After
	// (delay-seconds, at most a minute) or else RetryDelay. Optional.
	// Default 0: one post. Must not be negative.
	Retries int
	// RetryDelay is the wait before a retry whose failed post gave no
	// Retry-After. Optional. Default 1s. Must not be negative.
	RetryDelay time.Duration
	// MaxResponseSize bounds the answer read from the receipt URL, in
	// bytes. Optional. Default 64 KiB. Must not be negative.
	MaxResponseSize int64
	// TLS is the client TLS configuration of posts to https:// receipt
	// URLs: the receipt endpoint's private CA in RootCAs, and a client
	// certificate in Certificates when the endpoint requires one (mTLS).
	// It is cloned; never printed. Optional. Default nil: the system's
	// roots and no client certificate.
	TLS *tls.Config
}

func (c *AsyncConfig) setDefaults() {
	if c.Timeout == 0 {
		c.Timeout = DefaultAsyncTimeout
	}
	if c.MaxResponseSize == 0 {
		c.MaxResponseSize = DefaultAsyncMaxResponseSize
	}
	if c.RetryDelay == 0 {
		c.RetryDelay = time.Second
	}
}

func (c AsyncConfig) validate() error {
	for i, a := range c.AllowURLs {
		u, err := url.Parse(a)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
			return fmt.Errorf("Config.Async.AllowURLs[%d] %q: %w", i, a, ErrAsyncURL)
		}
	}
	if c.Delay < 0 || c.Timeout < 0 || c.MaxResponseSize < 0 || c.Retries < 0 || c.RetryDelay < 0 {
		return fmt.Errorf("Config.Async.Delay, Timeout, MaxResponseSize, Retries or RetryDelay: %w", ErrAsyncURL)
	}
	return nil
}

// allowed reports whether the receipt URL raw may be posted to.
func (c AsyncConfig) allowed(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil || u.User != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return false
	}
	if encodedTraversal(u.RawPath) || encodedTraversal(u.EscapedPath()) || strings.Contains(u.Path, "\\") ||
		strings.IndexByte(u.Path, 0) >= 0 {
		return false
	}
	for _, a := range c.AllowURLs {
		au, err := url.Parse(a)
		if err != nil {
			continue
		}
		host := strings.EqualFold(au.Host, u.Host) || (au.Port() == "" && strings.EqualFold(au.Hostname(), u.Hostname()))
		if strings.EqualFold(au.Scheme, u.Scheme) && host && underPath(u.Path, au.Path) && underPath(withoutParams(u.Path), au.Path) {
			return true
		}
	}
	return false
}

// encodedTraversal reports whether the escaped path p hides a dot, a slash
// or a backslash behind percent-encoding ("%2e", "%2f", "%5c", any case)
// or holds a backslash: servers differ in decoding these before removing
// dot segments, so "/mdn/..%2fadmin" may reach "/admin".
func encodedTraversal(p string) bool {
	l := strings.ToLower(p)
	return strings.Contains(l, "%2e") || strings.Contains(l, "%2f") || strings.Contains(l, "%5c") || strings.Contains(l, "\\")
}

// withoutParams returns the path p with the ";parameters" of each segment
// removed, as Java servlet containers (Tomcat, Jetty) read a path before
// removing dot segments: there "/mdn/..;/admin" is "/admin".
func withoutParams(p string) string {
	if !strings.Contains(p, ";") {
		return p
	}
	segs := strings.Split(p, "/")
	for i, s := range segs {
		segs[i], _, _ = strings.Cut(s, ";")
	}
	return strings.Join(segs, "/")
}

// underPath reports whether the decoded request path p is the decoded
// allowed path prefix or below it, segment-wise, after removing dot segments ("/mdn/../admin"
// is not under "/mdn", nor is "/mdnx").
func underPath(p, prefix string) bool {
	prefix = strings.TrimSuffix(prefix, "/")
	if prefix == "" {
		return true
	}
	if p == "" {
		p = "/"
	}
	p = path.Clean(p)
	return p == prefix || strings.HasPrefix(p, prefix+"/")
}

// AsyncStats counts asynchronous receipts.
type AsyncStats struct {
	// Queued counts receipts waiting to be posted now.
	Queued int
	// Posted counts receipts the receipt URL answered 2xx.
	Posted int
	// Failed counts posts that failed (transport error, timeout, non-2xx,
	// a redirect); a held receipt stays queued after a failure.
	Failed int
	// Refused counts requests refused for a URL AllowURLs does not allow.
	Refused int
}

// receipt is an MDN waiting to be posted.
type receipt struct {
	url    string
	header http.Header
	body   []byte
}

// asyncState is the partner's asynchronous receipts.
type asyncState struct {
	mu     sync.Mutex
	queue  []receipt
	stats  AsyncStats
	client *http.Client
	once   sync.Once
	closed bool               // Close was called: no more posts start
	ctx    context.Context    // the base context of posts, cancelled by Close
	cancel context.CancelFunc // cancels ctx
	posts  sync.WaitGroup     // posts started by queueReceipt
}

func (p *Partner) asyncClient() *http.Client {
	p.async.once.Do(func() {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.Proxy = nil
		if p.cfg.Async.TLS != nil {
			t.TLSClientConfig = p.cfg.Async.TLS.Clone()
		}
		p.async.client = &http.Client{
			Transport:     t,
			Timeout:       p.cfg.Async.Timeout,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	})
	return p.async.client
}

// AsyncStats returns the asynchronous receipt counters so far.
func (p *Partner) AsyncStats() AsyncStats {
	p.async.mu.Lock()
	defer p.async.mu.Unlock()
	s := p.async.stats
	s.Queued = len(p.async.queue)
	return s
}

// refuseAsync answers a request whose receipt URL is not allowed.
func (p *Partner) refuseAsync(w http.ResponseWriter, raw string) {
	p.async.mu.Lock()
	p.async.stats.Refused++
	p.async.mu.Unlock()
	p.badRequest(w, http.StatusForbidden, "Receipt-Delivery-Option URL not allowed: "+clean(raw))
}

// queueReceipt keeps an MDN for the request's receipt URL and answers the
// request 200 with no body.
func (p *Partner) queueReceipt(w http.ResponseWriter, to string, header http.Header, body []byte) {
	r := receipt{url: to, header: header.Clone(), body: body}
	if p.cfg.Async.Hold {
		p.async.mu.Lock()
		p.async.queue = append(p.async.queue, r)
		p.async.mu.Unlock()
	} else {
		p.postLater(r)
	}
	w.WriteHeader(http.StatusOK)
}

// PostReceipts posts every held receipt now ([AsyncConfig.Hold]) and
// returns how many the receipt URLs accepted (2xx). A receipt whose post
// fails stays held; the errors are joined.
func (p *Partner) PostReceipts(ctx context.Context) (int, error) {
	p.async.mu.Lock()
	q := p.async.queue
	p.async.queue = nil
	p.async.mu.Unlock()
	n := 0
	var errs []error
	for _, r := range q {
		if err := p.post(ctx, r); err != nil {
			errs = append(errs, err)
			p.async.mu.Lock()
			p.async.queue = append(p.async.queue, r)
			p.async.mu.Unlock()
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}

// post sends one receipt, checking its URL again.
func (p *Partner) post(ctx context.Context, r receipt) (err error) {
	defer func() {
		p.async.mu.Lock()
		if err != nil {
			p.async.stats.Failed++
		} else {
			p.async.stats.Posted++
		}
		p.async.mu.Unlock()
	}()
	if !p.cfg.Async.allowed(r.url) {
		return fmt.Errorf("as2partner: receipt URL %q not allowed", r.url)
	}
	ctx, cancel := context.WithTimeout(ctx, p.cfg.Async.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.url, bytes.NewReader(r.body))
	if err != nil {
		return err
	}
	req.Header = r.header.Clone()
	resp, err := p.asyncClient().Do(req)
	if err != nil {
		return fmt.Errorf("as2partner: posting the MDN to %s: %w", r.url, err)
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, p.cfg.Async.MaxResponseSize))
	if resp.StatusCode/100 != 2 {
		return &postError{url: r.url, status: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After")}
	}
	return nil
}
