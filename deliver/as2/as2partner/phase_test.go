package as2partner_test

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/deliver/as2/as2partner"
)

// serve sends one valid AS2 request to p at the clock's time and returns
// the HTTP status.
func serve(t *testing.T, p *as2partner.Partner) int {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, "/as2", strings.NewReader("ISA"))
	r.Header = validHeaders()
	w := httptest.NewRecorder()
	p.ServeHTTP(w, r)
	return w.Code
}

// TestMinRequests runs a fault script whose outage needs 3 requests on a
// fake clock: the outage outlasts its Duration until the third request,
// the later phases shift by as much, and PhaseChanges and PhaseAt report
// the phases as they actually began.
func TestMinRequests(t *testing.T) {
	clock := &fakeClock{t: t0}
	p, err := as2partner.New(as2partner.Config{Clock: clock, Script: []as2partner.Phase{
		{Name: "healthy", Duration: 5 * time.Second},
		{Name: "outage", Duration: 2 * time.Second, MinRequests: 3, Mode: as2partner.Down},
		{Name: "fragile", Duration: 4 * time.Second, Mode: as2partner.Fragile, Capacity: 100},
		{Name: "recovered"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	p.StartAt(t0)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	for _, step := range []struct {
		at   time.Duration
		want int
	}{
		{time.Second, http.StatusOK},                     // healthy
		{5 * time.Second, http.StatusServiceUnavailable}, // outage, request 1
		{8 * time.Second, http.StatusServiceUnavailable}, // past its Duration, request 2
		{9 * time.Second, http.StatusServiceUnavailable}, // request 3: the outage ends now
		{9 * time.Second, http.StatusOK},                 // fragile, from the same instant
	} {
		clock.Set(at(step.at))
		if step.at == 8*time.Second {
			// 3 s into a 2 s outage, with 1 request of 3: still out.
			if got := p.PhaseAt(at(8 * time.Second)).Name; got != "outage" {
				t.Errorf("PhaseAt(t0+8s) before request 2 = %q, want outage", got)
			}
		}
		if got := serve(t, p); got != step.want {
			t.Errorf("request at t0+%v: HTTP %d, want %d", step.at, got, step.want)
		}
	}
	for _, tt := range []struct {
		at   time.Duration
		want string
	}{
		{-time.Second, "healthy"}, {5*time.Second - 1, "healthy"}, {5 * time.Second, "outage"},
		{9*time.Second - 1, "outage"}, {9 * time.Second, "fragile"},
		{13*time.Second - 1, "fragile"}, {13 * time.Second, "recovered"}, {time.Hour, "recovered"},
	} {
		if got := p.PhaseAt(at(tt.at)).Name; got != tt.want {
			t.Errorf("PhaseAt(t0+%v) = %q, want %q", tt.at, got, tt.want)
		}
	}
	want := []as2partner.PhaseChange{
		{Phase: 0, Name: "healthy", At: t0}, {Phase: 1, Name: "outage", At: at(5 * time.Second)},
		{Phase: 2, Name: "fragile", At: at(9 * time.Second)}, {Phase: 3, Name: "recovered", At: at(13 * time.Second)},
	}
	clock.Set(at(20 * time.Second)) // no request since t0+9s: fragile ended by its Duration
	if got := p.PhaseChanges(); !slices.Equal(got, want) {
		t.Errorf("PhaseChanges() = %v,\nwant %v", got, want)
	}
	if got := p.PhaseChangesAt(at(6 * time.Second)); !slices.Equal(got, want[:2]) {
		t.Errorf("PhaseChangesAt(t0+6s) = %v, want %v", got, want[:2])
	}
	if st := p.Stats(); st.Requests != 5 || st.Errors != 3 || st.Processed != 2 {
		t.Errorf("Stats = %+v, want 5 requests, 3 errors, 2 processed", st)
	}
}

// TestMinRequestsBeforeDuration: a phase that has its MinRequests early
// still lasts its Duration, and every request in it counts.
func TestMinRequestsBeforeDuration(t *testing.T) {
	clock := &fakeClock{t: t0}
	p, err := as2partner.New(as2partner.Config{Clock: clock, Script: []as2partner.Phase{
		{Name: "outage", Duration: 2 * time.Second, MinRequests: 2, Mode: as2partner.Down},
		{Name: "recovered"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	p.StartAt(t0)
	for i, d := range []time.Duration{0, 100 * time.Millisecond, time.Second, 2*time.Second - 1} {
		clock.Set(t0.Add(d))
		if got := serve(t, p); got != http.StatusServiceUnavailable {
			t.Errorf("request %d at t0+%v: HTTP %d, want 503", i+1, d, got)
		}
	}
	clock.Set(t0.Add(2 * time.Second))
	if got := serve(t, p); got != http.StatusOK {
		t.Errorf("request at t0+2s: HTTP %d, want 200", got)
	}
	if got := p.PhaseChanges(); len(got) != 2 || !got[1].At.Equal(t0.Add(2*time.Second)) {
		t.Errorf("PhaseChanges() = %v, want recovered at t0+2s", got)
	}
}

// TestMinRequestsRestart: Start restarts the counts with the phases, and
// no phase begins before the script starts.
func TestMinRequestsRestart(t *testing.T) {
	clock := &fakeClock{t: t0}
	p, err := as2partner.New(as2partner.Config{Clock: clock, Script: []as2partner.Phase{
		{Name: "outage", Duration: time.Second, MinRequests: 2, Mode: as2partner.Down},
		{Name: "recovered"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if got := p.PhaseChanges(); got != nil {
		t.Errorf("PhaseChanges() before the start = %v, want none", got)
	}
	clock.Set(t0.Add(time.Minute))
	serve(t, p) // starts the script: request 1 of 2
	clock.Set(t0.Add(2 * time.Minute))
	p.Start() // request 1 forgotten
	clock.Set(t0.Add(3 * time.Minute))
	if got := serve(t, p); got != http.StatusServiceUnavailable {
		t.Errorf("request 1 after restart: HTTP %d, want 503", got)
	}
	if got := p.PhaseAt(t0.Add(time.Hour)).Name; got != "outage" {
		t.Errorf("PhaseAt after 1 request of 2 = %q, want outage", got)
	}
	serve(t, p)
	if got := serve(t, p); got != http.StatusOK {
		t.Errorf("request 3 after restart: HTTP %d, want 200", got)
	}
}
