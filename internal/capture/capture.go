package capture

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// Buffer is a bytes.Buffer safe for concurrent use: a program's loggers
// and its output write to it while the test reads it.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p; it never fails.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String returns everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// Find waits until re matches what was written and returns the first
// match's first group (the whole match when re has no group). It gives up
// when ctx ends, with ok false.
func (b *Buffer) Find(ctx context.Context, re *regexp.Regexp) (string, bool) {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if m := re.FindStringSubmatch(b.String()); m != nil {
			return m[len(m)-1], true
		}
		select {
		case <-ctx.Done():
			return "", false
		case <-tick.C:
		}
	}
}

// Tap records every message published in the account of the connection it
// was started on: a subscription to ">" with no pending limits. Its
// methods are safe for concurrent use.
type Tap struct {
	nc  *nats.Conn
	sub *nats.Subscription

	mu       sync.Mutex
	text     strings.Builder
	subjects map[string]int // messages per subject
}

// NewTap subscribes to ">" on nc and returns once the server has the
// subscription (so no message published after NewTap returns is missed).
func NewTap(nc *nats.Conn) (*Tap, error) {
	t := &Tap{nc: nc, subjects: map[string]int{}}
	sub, err := nc.Subscribe(">", t.record)
	if err != nil {
		return nil, fmt.Errorf("capture: subscribe >: %w", err)
	}
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		return nil, fmt.Errorf("capture: pending limits: %w", err)
	}
	if err := nc.Flush(); err != nil {
		return nil, fmt.Errorf("capture: flush: %w", err)
	}
	t.sub = sub
	return t, nil
}

// record writes one message as "subject reply headers\ndata\n".
func (t *Tap) record(m *nats.Msg) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.subjects[m.Subject]++
	fmt.Fprintf(&t.text, "%s %s %v\n", m.Subject, m.Reply, m.Header)
	t.text.Write(m.Data)
	t.text.WriteByte('\n')
}

// Stop drains the subscription: it waits (at most 10 s) until the server
// has sent everything published before Stop and the tap has recorded it.
// It returns an error if the subscription dropped a message (the tap then
// missed something) or did not drain in time.
func (t *Tap) Stop() error {
	_ = t.nc.Flush()
	dropped, err := t.sub.Dropped()
	if err != nil {
		return fmt.Errorf("capture: %w", err)
	}
	if err := t.sub.Drain(); err != nil {
		return fmt.Errorf("capture: drain: %w", err)
	}
	for deadline := time.Now().Add(10 * time.Second); t.sub.IsValid(); {
		if time.Now().After(deadline) {
			return fmt.Errorf("capture: the tap did not drain in 10 s")
		}
		time.Sleep(10 * time.Millisecond) // polling the drain, a hang guard only
	}
	if dropped > 0 {
		return fmt.Errorf("capture: the tap dropped %d messages", dropped)
	}
	return nil
}

// String returns every message recorded so far.
func (t *Tap) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.text.String()
}

// Count returns the number of messages recorded on subjects starting with
// prefix.
func (t *Tap) Count(prefix string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for s, c := range t.subjects {
		if strings.HasPrefix(s, prefix) {
			n += c
		}
	}
	return n
}

// Subjects returns the subjects recorded, sorted, for failure messages.
func (t *Tap) Subjects() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]string, 0, len(t.subjects))
	for s := range t.subjects {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// Scraper fetches a URL repeatedly and keeps every answer with status 200:
// a program's metrics endpoint, which lives only as long as the program.
// Its methods are safe for concurrent use.
type Scraper struct {
	mu     sync.Mutex
	bodies []string
	done   chan struct{}
}

// Scrape fetches the URL that url returns (once it returns ok) every
// interval until ctx ends. Wait for the returned Scraper's Done before
// reading all it got.
func Scrape(ctx context.Context, url func() (string, bool), interval time.Duration) *Scraper {
	s := &Scraper{done: make(chan struct{})}
	go func() {
		defer close(s.done)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		client := &http.Client{Timeout: 5 * time.Second}
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			u, ok := url()
			if !ok {
				continue
			}
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
			if err != nil {
				continue
			}
			resp, err := client.Do(req)
			if err != nil {
				continue
			}
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err == nil && resp.StatusCode == http.StatusOK {
				s.mu.Lock()
				s.bodies = append(s.bodies, string(b))
				s.mu.Unlock()
			}
		}
	}()
	return s
}

// Done is closed when the scraper has stopped.
func (s *Scraper) Done() <-chan struct{} { return s.done }

// Bodies returns the answers so far, in order.
func (s *Scraper) Bodies() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.bodies...)
}

// Program is an example program running in-process for a test: its
// stdout captured, and the metrics URL it prints ("metrics: http://…")
// scraped until it returns.
type Program struct {
	// Stdout is what the program printed so far.
	Stdout  Buffer
	done    chan error
	scraper *Scraper
	stop    context.CancelFunc
}

var metricsLine = regexp.MustCompile(`metrics: (http://\S+)`)

// Start runs run in a goroutine with ctx and the Program's Stdout, and
// scrapes the metrics URL it prints every interval until it returns.
func Start(ctx context.Context, run func(ctx context.Context, stdout io.Writer) error, interval time.Duration) *Program {
	p := &Program{done: make(chan error, 1)}
	go func() { p.done <- run(ctx, &p.Stdout) }()
	sctx, stop := context.WithCancel(ctx)
	p.stop = stop
	p.scraper = Scrape(sctx, func() (string, bool) {
		m := metricsLine.FindStringSubmatch(p.Stdout.String())
		if m == nil {
			return "", false
		}
		return m[1], true
	}, interval)
	return p
}

// RunID returns the run id the program names its streams after
// ("streams: retry floodgate_retry_<id>,"), once printed; false when ctx
// ends first.
func (p *Program) RunID(ctx context.Context) (string, bool) {
	return p.Stdout.Find(ctx, regexp.MustCompile(`streams: retry floodgate_retry_(\w+),`))
}

// Wait waits at most guard (a hang guard) for the program to return, then
// for the scraper to stop, and returns the program's error; a program
// still running after guard is an error.
func (p *Program) Wait(guard time.Duration) error {
	var err error
	select {
	case err = <-p.done:
	case <-time.After(guard):
		err = fmt.Errorf("capture: the program did not return in %s", guard)
	}
	p.stop()
	<-p.scraper.Done()
	return err
}

// Metrics returns every scrape of the metrics endpoint, one after the
// other.
func (p *Program) Metrics() string { return strings.Join(p.scraper.Bodies(), "\n") }

// Scrapes returns how many times the metrics endpoint was scraped.
func (p *Program) Scrapes() int { return len(p.scraper.Bodies()) }
