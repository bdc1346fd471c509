package main

import (
	"fmt"
	"io"

	"github.com/floodgate-go/floodgate/internal/exampleutil"
)

// summary is the run's outcome; -summary writes it as one JSON object. The
// keys of [exampleutil.Summary] come first, totals over the consumers
// (partner_errors counts their slow and error answers) and "partners" per
// consumer, then the geofence ones: the recovery figures, open windows,
// closes and probes in flight are the faulty consumer's.
type summary struct {
	exampleutil.Summary
	// ClosedAfterRecoveryS is how long after the consumer's recovery the
	// breaker closed for good: 0 when it was closed at recovery and stayed
	// closed, -1 when it did not end closed.
	ClosedAfterRecoveryS float64 `json:"closed_after_recovery_s"`
	// RetripsAfterRecovery counts trips after the recovery grace: trips on
	// calls the recovered consumer answered.
	RetripsAfterRecovery int `json:"retrips_after_recovery"`
	// TripsInRecoveryGrace counts trips within the grace after recovery.
	// The grace ends with the breaker's last judgement of a call sent
	// before the recovery (a slow answer of the degraded consumer can be
	// judged up to min(-spike, -timeout) after it); RecoveryGraceS is its
	// length in seconds.
	TripsInRecoveryGrace int     `json:"trips_in_recovery_grace"`
	RecoveryGraceS       float64 `json:"recovery_grace_s"`
	// SlowAfterRecovery counts calls sent after the recovery that the
	// breaker judged slow (over -slow-call) or failed: on a healthy
	// machine 0; only these can cause a re-trip.
	SlowAfterRecovery int `json:"slow_after_recovery"`
	// RecoverAtS is the recovery, in seconds from the script's start; -1
	// when the consumer did not recover (-degraded-calls not reached).
	RecoverAtS float64 `json:"recover_at_s"`
	// OpenWindowsS lists the open windows drawn, in seconds, in order.
	OpenWindowsS []float64 `json:"open_windows_s"`
	// Closes counts transitions to closed.
	Closes int `json:"closes"`
	// Fixes counts GPS fixes published; TriggersExpected the triggers an
	// offline evaluation of those fixes gives.
	Fixes            int `json:"fixes"`
	TriggersExpected int `json:"triggers_expected"`
	// Unexpected counts triggers produced that the offline evaluation does
	// not give; ContentMismatches triggers whose body at the consumer
	// differs from the expected one.
	Unexpected        int `json:"unexpected"`
	ContentMismatches int `json:"content_mismatches"`
	Probes            int `json:"probes"`
	// MaxProbesInFlight is the most half-open probes seen in flight at
	// once; the breaker's cap is 2.
	MaxProbesInFlight int `json:"max_probes_in_flight"`
	Drained           int `json:"drained"`
	SlowResponses     int `json:"slow_responses"`
	// SignatureFailures counts requests the consumer rejected for a bad
	// Standard Webhooks signature or timestamp (401).
	SignatureFailures int `json:"signature_failures"`
}

func (s *summary) print(w io.Writer) {
	fmt.Fprintln(w)
	exampleutil.PrintPartners(w, s.Partners)
	fmt.Fprintf(w, "\nfixes %d, triggers produced %d (expected %d, unexpected %d)\n", s.Fixes, s.Produced, s.TriggersExpected, s.Unexpected)
	fmt.Fprintf(w, "delivered %d unique (%d duplicates recognised by idempotency key), misdelivered %d, dead-lettered %d, still queued %d, lost %d, content mismatches %d, signature failures %d\n",
		s.DeliveredUnique, s.Duplicates, s.Misdelivered, s.DeadLettered, s.Queued, s.Lost, s.ContentMismatches, s.SignatureFailures)
	fmt.Fprintf(w, "trips %d (faulty consumer: open windows %v s, probes %d (at most %d in flight), closes %d), diverted %d, drained %d, backlog peak %d, slow answers %d, partner errors %d\n",
		s.Trips, s.OpenWindowsS, s.Probes, s.MaxProbesInFlight, s.Closes, s.Diverted, s.Drained, s.BacklogPeak, s.SlowResponses, s.PartnerErrors)
	closed := fmt.Sprintf("%.1fs after", s.ClosedAfterRecoveryS)
	if s.ClosedAfterRecoveryS < 0 {
		closed = "never"
	}
	if s.RecoverAtS < 0 {
		fmt.Fprintf(w, "faulty consumer never recovered; elapsed %.1fs\n", s.ElapsedS)
		return
	}
	fmt.Fprintf(w, "faulty consumer recovered at %.1fs; breaker closed %s; re-trips after recovery %d (+%d within the %.1fs grace; %d calls judged slow after recovery); elapsed %.1fs\n",
		s.RecoverAtS, closed, s.RetripsAfterRecovery, s.TripsInRecoveryGrace, s.RecoveryGraceS, s.SlowAfterRecovery, s.ElapsedS)
}
