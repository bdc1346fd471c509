package fleet

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/deliver/webhook"
)

// partner is the shared partner: an HTTP server whose health the test
// switches. It records every accepted message id, the errors it returned
// after recovery, and how many probes (requests marked X-Probe) are in
// flight at once.
type partner struct {
	srv *httptest.Server

	down      atomic.Bool
	limit     atomic.Int64 // when > 0, requests beyond this many in flight get 503
	hangProbe atomic.Bool  // hold the next probe until its client goes away
	hung      chan string  // replica holding the hung probe
	stop      chan struct{}
	latency   time.Duration

	inflight       atomic.Int64
	probes         atomic.Int64
	maxProbes      atomic.Int64
	recovered      atomic.Bool
	errsAfter      atomic.Int64
	errs           atomic.Int64
	probesTotal    atomic.Int64
	probesDownSeen atomic.Int64
	servedAfter    atomic.Int64 // requests answered after recovery, failed or not

	mu       sync.Mutex
	accepted map[string]int
	byRep    map[string]int // accepted per replica
	reqs     []request      // every request, for the per-phase analysis
}

// request is one request the partner served.
type request struct {
	start, end     time.Time
	replica        string
	probe, failed  bool
	drained        bool // sent by the drainer (from the backlog)
	afterRecovered bool
}

func newPartner(t testing.TB) *partner {
	p := &partner{latency: 60 * time.Millisecond, hung: make(chan string, 1), stop: make(chan struct{}), accepted: map[string]int{}, byRep: map[string]int{}}
	p.srv = httptest.NewServer(p)
	t.Cleanup(p.srv.Close)
	t.Cleanup(func() { close(p.stop) })
	return p
}

func (p *partner) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	probe := r.Header.Get("X-Probe") != ""
	if probe {
		n := p.probes.Add(1)
		defer p.probes.Add(-1)
		for {
			m := p.maxProbes.Load()
			if n <= m || p.maxProbes.CompareAndSwap(m, n) {
				break
			}
		}
		p.probesTotal.Add(1)
		if p.down.Load() {
			p.probesDownSeen.Add(1)
		}
		if p.hangProbe.CompareAndSwap(true, false) {
			// Read the body first: only then does net/http watch the
			// connection and cancel the context when the replica dies.
			_, _ = io.Copy(io.Discard, r.Body)
			p.hung <- r.Header.Get("X-Replica")
			select {
			case <-r.Context().Done(): // the replica died
			case <-p.stop:
			}
			return
		}
	}
	start := time.Now()
	n := p.inflight.Add(1)
	defer p.inflight.Add(-1)
	time.Sleep(p.latency)
	// recover sets recovered before it clears down: read recovered first,
	// so an outage error is never counted as one after recovery.
	after := p.recovered.Load()
	fail := p.down.Load() || (p.limit.Load() > 0 && n > p.limit.Load())
	p.mu.Lock()
	p.reqs = append(p.reqs, request{start: start, end: time.Now(), replica: r.Header.Get("X-Replica"), probe: probe, drained: r.Header.Get("X-Drained") != "", failed: fail, afterRecovered: after})
	p.mu.Unlock()
	if after {
		p.servedAfter.Add(1)
	}
	if fail {
		p.errs.Add(1)
		if after {
			p.errsAfter.Add(1)
		}
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	p.mu.Lock()
	p.accepted[r.Header.Get(webhook.HeaderIdempotencyKey)]++
	p.byRep[r.Header.Get("X-Replica")]++
	p.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

// fail makes the partner answer 503 to everything.
func (p *partner) fail() { p.recovered.Store(false); p.down.Store(true) }

// recover makes it healthy again, counting errors from now on as errors
// after recovery; limit > 0 keeps it fragile (503 beyond limit in flight).
func (p *partner) recover(limit int64) {
	p.limit.Store(limit)
	p.recovered.Store(true)
	p.down.Store(false)
}

func (p *partner) unique() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.accepted)
}

func (p *partner) acceptedFrom(replica string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.byRep[replica]
}
