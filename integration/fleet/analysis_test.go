package fleet

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/floodgate-go/floodgate/breaker"
)

// phases breaks the partner's errors after recovery down by what the
// replica's breaker was doing when the failed request started, and times
// how a trip spread through the fleet.
type phases struct {
	probe      int // failed probes
	halfOpen   int // failed non-probe calls admitted in half-open (ramp share)
	beforeTrip int // started while closed, before any replica tripped: the wave that trips
	late       int // started while closed after another replica had tripped: learned late
	open       int // started while the replica was open (an admission that raced the trip)
	drained    int // of all errors after recovery: sent by a drainer (the rest are live)
	episodes   []episode
}

// episode is one trip of the fleet after recovery.
type episode struct {
	first  time.Time     // first replica to open
	spread time.Duration // until the last replica opened
	opened int           // replicas that opened
	errs   int           // closed-state errors that started before first (the tripping wave)
	late   int           // closed-state errors that started after first
}

func (ph phases) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "errors after recovery by phase: tripping wave %d, admitted after another replica tripped %d, admitted while open %d, half-open non-probe %d, probes %d (drained %d, live %d); trips:",
		ph.beforeTrip, ph.late, ph.open, ph.halfOpen, ph.probe, ph.drained, ph.beforeTrip+ph.late+ph.open+ph.halfOpen+ph.probe-ph.drained)
	for _, e := range ph.episodes {
		fmt.Fprintf(&b, " [%d replicas open within %v: wave %d, late %d]", e.opened, e.spread.Round(100*time.Microsecond), e.errs, e.late)
	}
	return b.String()
}

// stateOf returns the replica's state at t from its transitions.
func stateOf(trans []stateAt, t time.Time) (breaker.State, time.Time) {
	st, since := breaker.StateClosed, time.Time{}
	for _, tr := range trans {
		if tr.at.After(t) {
			break
		}
		st, since = tr.to, tr.at
	}
	return st, since
}

// analyse classifies the partner's errors after recovery.
func analyse(p *partner, reps []*replica) phases {
	trans := map[string][]stateAt{}
	var opens []stateAt
	for _, r := range reps {
		r.mu.Lock()
		ts := slices.Clone(r.trans)
		r.mu.Unlock()
		trans[r.name] = ts
		for _, tr := range ts {
			if tr.to == breaker.StateOpen {
				opens = append(opens, tr)
			}
		}
	}
	slices.SortFunc(opens, func(a, b stateAt) int { return a.at.Compare(b.at) })
	p.mu.Lock()
	reqs := slices.Clone(p.reqs)
	p.mu.Unlock()
	var recoveredAt time.Time
	for _, q := range reqs {
		if q.afterRecovered {
			recoveredAt = q.start
			break
		}
	}
	var ph phases
	// Trip episodes after recovery: opens within 150 ms of an episode's
	// first open belong to it (an open window lasts >= 300 ms).
	for _, o := range opens {
		if o.at.Before(recoveredAt) {
			continue
		}
		if n := len(ph.episodes); n > 0 && o.at.Sub(ph.episodes[n-1].first) < 150*time.Millisecond {
			e := &ph.episodes[n-1]
			e.spread, e.opened = o.at.Sub(e.first), e.opened+1
			continue
		}
		ph.episodes = append(ph.episodes, episode{first: o.at, opened: 1})
	}
	for _, q := range reqs {
		if !q.failed || !q.afterRecovered {
			continue
		}
		if q.drained {
			ph.drained++
		}
		if q.probe {
			ph.probe++
			continue
		}
		st, since := stateOf(trans[q.replica], q.start)
		switch st {
		case breaker.StateHalfOpen:
			ph.halfOpen++
			continue
		case breaker.StateOpen:
			ph.open++
			continue
		}
		// Closed since `since`: did another replica trip meanwhile?
		var ep *episode
		for i := range ph.episodes {
			e := &ph.episodes[i]
			if e.first.After(since) {
				ep = e
				break
			}
		}
		switch {
		case ep != nil && !ep.first.After(q.start):
			ph.late++
			ep.late++
		default:
			ph.beforeTrip++
			if ep != nil {
				ep.errs++
			}
		}
	}
	if os.Getenv("FLOODGATE_FLEET_TIMELINE") != "" {
		for _, e := range ph.episodes {
			fmt.Printf("episode at %s (+%v):\n", e.first.Format("15:04:05.000"), e.spread)
			for _, q := range reqs {
				if d := q.start.Sub(e.first); d > -200*time.Millisecond && d < 100*time.Millisecond {
					st, _ := stateOf(trans[q.replica], q.start)
					fmt.Printf("  %s start %+7.1fms end %+7.1fms probe=%v drained=%v failed=%v state=%v\n", q.replica, float64(d.Microseconds())/1000, float64(q.end.Sub(e.first).Microseconds())/1000, q.probe, q.drained, q.failed, st)
				}
			}
			for name, ts := range trans {
				for _, tr := range ts {
					if d := tr.at.Sub(e.first); d > -200*time.Millisecond && d < 100*time.Millisecond {
						fmt.Printf("  %s -> %v at %+7.1fms\n", name, tr.to, float64(d.Microseconds())/1000)
					}
				}
			}
		}
	}
	return ph
}
