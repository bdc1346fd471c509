package as2partner

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/floodgate-go/floodgate/deliver/as2"
	"github.com/floodgate-go/floodgate/internal/x12"
)

// Stats counts a partner's requests by outcome. Every request ends in
// exactly one of Processed, Errors, ErrorMDNs, BadRequests or Abandoned
// (Slow requests end in Processed or Abandoned).
type Stats struct {
	// Requests is every request received.
	Requests int
	// Processed counts processed MDNs returned (or, for a request that asked
	// for no MDN, 200 answers), duplicates included.
	Processed int
	// UniqueProcessed is the number of distinct Message-IDs processed.
	UniqueProcessed int
	// Duplicates counts processings of a Message-ID already processed:
	// Processed - UniqueProcessed.
	Duplicates int
	// Errors counts HTTP 503 answers (Down, and Fragile with Reject503).
	Errors int
	// Slow counts Fragile excess requests held SlowLatency before processing.
	Slow int
	// ErrorMDNs counts MDNs with a "processed/error" disposition.
	ErrorMDNs int
	// Signed and Encrypted count processed requests that were signed (and
	// the signature verified) and encrypted (and decrypted).
	Signed, Encrypted int
	// Compressed counts processed requests that were compressed (and
	// decompressed), at any layer (RFC 5402).
	Compressed int
	// SignedMDNs counts MDNs returned signed, of any disposition.
	SignedMDNs int
	// BadRequests counts HTTP 400, 405 and 413 answers.
	BadRequests int
	// Abandoned counts requests whose client went away (context cancelled)
	// before they were answered.
	Abandoned int
	// MaxConcurrent is the largest number of requests in progress at once.
	MaxConcurrent int
}

// Partner is an AS2 receiver following a fault script. Create it with [New];
// [Partner.Close] stops its asynchronous receipt posts. All methods are
// safe for concurrent use.
type Partner struct {
	cfg   Config
	clock Clock

	mu       sync.Mutex
	started  bool
	sched    schedule        // the phase in force at the last request
	starts   []time.Time     // when phases 0..sched.idx began
	limiters []*rate.Limiter // per phase; nil for phases that are not Fragile
	received map[string]int  // Message-ID -> times processed
	controls map[string]int  // ISA13 -> times processed
	stats    Stats
	inflight int
	mdnSeq   uint64
	created  int64 // UnixNano at New, for MDN Message-IDs

	filenames map[string]string // Message-ID -> payload filename received
	async     asyncState
}

// New validates cfg, applies its defaults and returns a Partner. The script
// starts at [Partner.Start] or at the first request, whichever comes first.
// The error, if any, is "invalid config: ..." naming the field.
func New(cfg Config) (*Partner, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("invalid config: %w", err)
	}
	cfg.setDefaults()
	p := &Partner{
		cfg:      cfg,
		clock:    cfg.Clock,
		received: map[string]int{},
		controls: map[string]int{},
		created:  time.Now().UnixNano(),
	}
	p.limiters = p.newLimiters()
	p.filenames = map[string]string{}
	p.async.ctx, p.async.cancel = context.WithCancel(context.Background())
	return p, nil
}

func (p *Partner) newLimiters() []*rate.Limiter {
	ls := make([]*rate.Limiter, len(p.cfg.Script))
	for i, ph := range p.cfg.Script {
		if ph.Mode == Fragile {
			ls[i] = rate.NewLimiter(rate.Limit(ph.Capacity), ph.Burst)
		}
	}
	return ls
}

// Start sets the script's t=0 to now (Config.Clock). Calling it again
// restarts the script (its phases, their request counts and the Fragile
// token buckets); records and stats are kept.
func (p *Partner) Start() { p.StartAt(p.clock.Now()) }

// StartAt sets the script's t=0 to t.
func (p *Partner) StartAt(t time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.startLocked(t)
	p.limiters = p.newLimiters()
}

// startLocked requires p.mu held.
func (p *Partner) startLocked(t time.Time) {
	p.started = true
	p.sched = schedule{start: t}
	p.starts = []time.Time{t}
}

// Script returns the fault script with defaults applied.
func (p *Partner) Script() []Phase { return append([]Phase(nil), p.cfg.Script...) }

// PhaseAt returns the phase in force at t: the first phase before the script
// has started or before t=0, the last phase after the script's end. For a
// t after the last request, it assumes no request arrives until t (which
// matters only to a phase whose MinRequests is not reached yet: it goes
// on).
func (p *Partner) PhaseAt(t time.Time) Phase {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cfg.Script[p.phaseIndex(t)]
}

// phaseIndex requires p.mu held.
func (p *Partner) phaseIndex(t time.Time) int {
	if !p.started {
		return 0
	}
	if t.Before(p.sched.start) { // an earlier phase: the last begun by t
		return max(0, sort.Search(len(p.starts), func(i int) bool { return p.starts[i].After(t) })-1)
	}
	s := p.sched
	p.advance(&s, t, nil)
	return s.idx
}

// PhaseChange is the start of a phase of the fault script.
type PhaseChange struct {
	// Phase is the phase's index in the script, Name its name.
	Phase int
	Name  string
	// At is when it began: the script's t=0 for phase 0, else the end of
	// the phase before (Phase.Duration and Phase.MinRequests).
	At time.Time
}

// PhaseChanges returns the phases begun by now (Config.Clock), in order,
// each with the time it actually began: with Phase.MinRequests these
// depend on the requests received, not on the durations alone. The first
// is phase 0 at t=0; the result is empty before the script has started.
func (p *Partner) PhaseChanges() []PhaseChange { return p.PhaseChangesAt(p.clock.Now()) }

// PhaseChangesAt returns the phases begun by t, as [Partner.PhaseChanges];
// for a t after the last request it assumes, as [Partner.PhaseAt], that no
// request arrives until t.
func (p *Partner) PhaseChangesAt(t time.Time) []PhaseChange {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.started {
		return nil
	}
	starts := append([]time.Time(nil), p.starts...)
	s := p.sched
	p.advance(&s, t, func(at time.Time) { starts = append(starts, at) })
	var out []PhaseChange
	for i, at := range starts {
		if i > 0 && at.After(t) {
			break
		}
		out = append(out, PhaseChange{Phase: i, Name: p.cfg.Script[i].Name, At: at})
	}
	return out
}

// schedule is where the fault script is: the phase in force, when it
// began, and the requests it received.
type schedule struct {
	idx   int       // the phase
	start time.Time // when it began
	n     int       // requests it received
	metAt time.Time // when n reached its MinRequests (zero if 0 or not yet)
}

// end returns when phase s.idx ends, or false while that is not known:
// on the last phase (it lasts forever) and before MinRequests requests.
func (p *Partner) end(s schedule) (time.Time, bool) {
	if s.idx == len(p.cfg.Script)-1 {
		return time.Time{}, false
	}
	ph := p.cfg.Script[s.idx]
	if s.n < ph.MinRequests {
		return time.Time{}, false
	}
	e := s.start.Add(ph.Duration)
	if s.metAt.After(e) {
		e = s.metAt
	}
	return e, true
}

// advance moves s to the phase in force at t, given no request between
// s's last one and t; begun, if not nil, is called with the start of each
// phase it enters.
func (p *Partner) advance(s *schedule, t time.Time, begun func(time.Time)) {
	for {
		e, ok := p.end(*s)
		if !ok || t.Before(e) {
			return
		}
		*s = schedule{idx: s.idx + 1, start: e}
		if begun != nil {
			begun(e)
		}
	}
}

// arrive counts a request arriving at now, in the phase then in force,
// and returns that phase's index. It requires p.mu held.
func (p *Partner) arrive(now time.Time) int {
	if !p.started {
		p.startLocked(now)
	}
	p.advance(&p.sched, now, func(at time.Time) { p.starts = append(p.starts, at) })
	p.sched.n++
	if p.sched.n == p.cfg.Script[p.sched.idx].MinRequests {
		p.sched.metAt = now
	}
	return p.sched.idx
}

// Received returns a copy of the Message-IDs processed (the Message-ID
// header value as sent, e.g. "<id@floodgate>") with the number of times each
// was processed; a count above 1 is a duplicate.
func (p *Partner) Received() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]int, len(p.received))
	for k, v := range p.received {
		out[k] = v
	}
	return out
}

// ControlNumbers returns a copy of the X12 interchange control numbers
// (ISA13) of the payloads processed, with the number of times each was
// processed. Payloads that are not X12 are not counted.
func (p *Partner) ControlNumbers() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]int, len(p.controls))
	for k, v := range p.controls {
		out[k] = v
	}
	return out
}

// Stats returns the counters so far.
func (p *Partner) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stats
}

// ServeHTTP handles one AS2 request according to the phase in force when it
// arrives.
func (p *Partner) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	idx := p.arrive(p.clock.Now())
	limiter := p.limiters[idx]
	p.stats.Requests++
	p.inflight++
	p.stats.MaxConcurrent = max(p.stats.MaxConcurrent, p.inflight)
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.inflight--
		p.mu.Unlock()
	}()

	// Read the whole body first, as a server does before processing; it also
	// lets net/http notice a client that goes away during the latencies.
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, p.cfg.MaxBodySize))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			p.badRequest(w, http.StatusRequestEntityTooLarge, err.Error())
			return
		}
		p.count(func(s *Stats) { s.Abandoned++ })
		return
	}

	ph := p.cfg.Script[idx]
	if !sleep(r.Context(), ph.Latency) {
		p.count(func(s *Stats) { s.Abandoned++ })
		return
	}
	switch ph.Mode {
	case Down:
		p.unavailable(w, ph)
		return
	case Fragile:
		if !limiter.AllowN(p.clock.Now(), 1) {
			if ph.Excess == Reject503 {
				p.unavailable(w, ph)
				return
			}
			p.count(func(s *Stats) { s.Slow++ })
			if !sleep(r.Context(), ph.SlowLatency) {
				p.count(func(s *Stats) { s.Abandoned++ })
				return
			}
		}
	}
	p.process(w, r, body)
}

func (p *Partner) count(f func(*Stats)) {
	p.mu.Lock()
	f(&p.stats)
	p.mu.Unlock()
}

// sleep waits d, or until ctx is done; it reports whether d elapsed.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

func (p *Partner) unavailable(w http.ResponseWriter, ph Phase) {
	p.count(func(s *Stats) { s.Errors++ })
	http.Error(w, "AS2 service unavailable ("+ph.Name+")", http.StatusServiceUnavailable)
}

func (p *Partner) badRequest(w http.ResponseWriter, status int, msg string) {
	p.count(func(s *Stats) { s.BadRequests++ })
	http.Error(w, msg, status)
}

// request is what process reads from an AS2 request.
type request struct {
	from, to  string // AS2 IDs, unquoted
	messageID string
	mic       string
	wantsMDN  bool
	signedMDN bool   // a signed receipt was asked for
	micalg    string // the MIC and MDN signature digest asked for, or ""
	receiptTo string // Receipt-Delivery-Option: the async MDN's URL, or ""
}

// process reads and answers a request that the fault script let through.
func (p *Partner) process(w http.ResponseWriter, r *http.Request, body []byte) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		p.badRequest(w, http.StatusMethodNotAllowed, "AS2 requires POST")
		return
	}
	var req request
	var err error
	if req.from, err = parseAS2Name(r.Header.Get("AS2-From")); err != nil {
		p.badRequest(w, http.StatusBadRequest, "AS2-From: "+err.Error())
		return
	}
	if req.to, err = parseAS2Name(r.Header.Get("AS2-To")); err != nil {
		p.badRequest(w, http.StatusBadRequest, "AS2-To: "+err.Error())
		return
	}
	req.messageID = strings.TrimSpace(r.Header.Get("Message-ID"))
	if req.messageID == "" {
		p.badRequest(w, http.StatusBadRequest, "missing Message-ID")
		return
	}
	req.wantsMDN = r.Header.Get("Disposition-Notification-To") != ""
	req.signedMDN, req.micalg = as2.SignedReceiptRequest(r.Header.Get("Disposition-Notification-Options"))
	if req.receiptTo = strings.TrimSpace(r.Header.Get("Receipt-Delivery-Option")); req.receiptTo != "" && req.wantsMDN && !p.cfg.Async.allowed(req.receiptTo) {
		p.refuseAsync(w, req.receiptTo) // async.go: never post where a request says unless allowed
		return
	}
	if len(body) == 0 {
		p.badRequest(w, http.StatusBadRequest, "empty body")
		return
	}
	if p.cfg.AS2ID != "" && req.to != p.cfg.AS2ID {
		p.answerError(w, req, "authentication-failed",
			fmt.Sprintf("AS2-To %q is not this partner (%q)", req.to, p.cfg.AS2ID))
		return
	}
	contentType := r.Header.Get("Content-Type")
	if strings.TrimSpace(contentType) == "" {
		contentType = "application/octet-stream"
	}
	opened, err := as2.OpenMessage(contentType, body, as2.OpenOptions{
		Cert: p.cfg.Cert, Key: p.cfg.Key, SignerCert: p.cfg.SenderCert, MICAlgorithm: req.micalg,
		MaxDecompressedSize: p.cfg.MaxDecompressedSize,
	})
	switch {
	case errors.Is(err, as2.ErrDecryption):
		p.answerError(w, req, "decryption-failed", err.Error())
		return
	case errors.Is(err, as2.ErrDecompression): // RFC 5402 §5
		p.answerError(w, req, "decompression-failed", err.Error())
		return
	case errors.Is(err, as2.ErrSignature):
		p.answerError(w, req, "authentication-failed", err.Error())
		return
	case err != nil:
		p.answerError(w, req, "unexpected-processing-error", err.Error())
		return
	case p.cfg.RequireEncrypted && !opened.Encrypted:
		p.answerError(w, req, "insufficient-message-security", "the message is not encrypted")
		return
	case p.cfg.RequireSigned && !opened.Signed:
		p.answerError(w, req, "insufficient-message-security", "the message is not signed")
		return
	}
	// RFC 4130 §7.3.1: OpenMessage computed the MIC over the signed entity,
	// the decrypted entity, or the content alone, as the message requires.
	req.mic = opened.MIC
	payload := opened.Payload

	p.mu.Lock()
	p.received[req.messageID]++
	if p.received[req.messageID] > 1 {
		p.stats.Duplicates++
	} else {
		p.stats.UniqueProcessed++
	}
	p.stats.Processed++
	if opened.Signed {
		p.stats.Signed++
	}
	if opened.Encrypted {
		p.stats.Encrypted++
	}
	if opened.Compressed {
		p.stats.Compressed++
	}
	if cn, err := x12.ControlNumberOf(payload); err == nil {
		p.controls[cn]++
	}
	if name := filenameOf(opened.Header, r.Header); name != "" {
		p.filenames[req.messageID] = name
	}
	p.mu.Unlock()

	if !req.wantsMDN || p.cfg.NoMDN {
		w.WriteHeader(http.StatusOK)
		return
	}
	switch {
	case p.cfg.OmitMIC:
		req.mic = ""
	case p.cfg.WrongMIC:
		req.mic = alterMIC(req.mic)
	}
	p.writeMDN(w, req, "processed",
		fmt.Sprintf("The AS2 message %s from %q was received and processed. "+
			"This receipt does not guarantee that the content was interpreted or acted upon.", req.messageID, req.from))
}

// alterMIC returns mic, "<base64>, <alg>", with its digest's first byte
// flipped: a well-formed MIC that does not match.
func alterMIC(mic string) string {
	b64, alg, _ := strings.Cut(mic, ",")
	sum, err := base64.StdEncoding.DecodeString(strings.TrimSpace(b64))
	if err != nil || len(sum) == 0 {
		sum = make([]byte, sha256.Size)
		alg = " sha-256"
	}
	sum[0] ^= 0xff
	return base64.StdEncoding.EncodeToString(sum) + "," + alg
}

func (p *Partner) answerError(w http.ResponseWriter, req request, reason, text string) {
	p.count(func(s *Stats) { s.ErrorMDNs++ })
	if !req.wantsMDN {
		http.Error(w, text, http.StatusForbidden)
		return
	}
	p.writeMDN(w, req, "processed/error: "+reason,
		fmt.Sprintf("The AS2 message %s from %q was not processed: %s.", req.messageID, req.from, text))
}
