package main

import (
	"fmt"
	"io"

	"github.com/floodgate-go/floodgate/internal/exampleutil"
)

// summary is the run's outcome; -summary writes it as one JSON object.
// The common keys total over the retailers and "partners" has them per
// retailer; the recovery figures are the faulty retailer's. backlog_peak
// is the larger of the retry stream's depth, sampled every 100 ms, and the
// count of diverted messages not yet drained or dead-lettered, followed
// from events (which a starved sampler cannot miss).
type summary struct {
	exampleutil.Summary
	Drained         int `json:"drained"`
	SignedEncrypted int `json:"signed_encrypted"` // orders the retailers processed that were signed and encrypted
	SignedMDNs      int `json:"signed_mdns"`      // signed MDNs the retailers returned
	// RetripsAfterRecovery counts the faulty retailer's trips after its
	// breaker first closed once the outage was over (when the partner left
	// it, which -outage-calls can make later than -healthy + -outage):
	// trips the drain (or the fragile phase) caused.
	RetripsAfterRecovery int `json:"retrips_after_recovery"`
	// TimeToFullTrafficS runs from the end of the outage to the faulty
	// retailer's last close (full traffic admitted from then on); -1 if
	// it did not end closed.
	TimeToFullTrafficS float64 `json:"time_to_full_traffic_s"`
	// DrainS runs from the faulty retailer's recovery (its breaker's
	// first close after its last trip) to its backlog of 0; -1 if the
	// backlog never emptied.
	DrainS float64 `json:"drain_s"`
	// DrainRatePeak is the highest drain rate limit the faulty retailer's
	// adaptive control reached, in messages/s: read every 100 ms and at
	// each message it drained.
	DrainRatePeak float64 `json:"drain_rate_peak"`
	// With -mdn async: pending receipts stored (Send returned nil), those
	// resolved by their MDN, and those dead-lettered (negative MDN or
	// mdn-timeout).
	AsyncStored   int `json:"async_stored,omitempty"`
	AsyncResolved int `json:"async_resolved,omitempty"`
	AsyncDead     int `json:"async_dead_lettered,omitempty"`
}

func (s *summary) writeFile(path string) error { return exampleutil.WriteJSON(path, s) }

func (s *summary) print(w io.Writer) {
	fmt.Fprintln(w)
	exampleutil.PrintPartners(w, s.Partners)
	fmt.Fprintf(w, "\nproduced %d, delivered %d unique (%d duplicates), misdelivered %d, dead-lettered %d, still queued %d, lost %d\n",
		s.Produced, s.DeliveredUnique, s.Duplicates, s.Misdelivered, s.DeadLettered, s.Queued, s.Lost)
	fmt.Fprintf(w, "signed and encrypted %d, signed MDNs %d\n", s.SignedEncrypted, s.SignedMDNs)
	if s.AsyncStored > 0 {
		fmt.Fprintf(w, "async MDNs: %d receipts pending after send, %d resolved by their MDN, %d dead-lettered\n", s.AsyncStored, s.AsyncResolved, s.AsyncDead)
	}
	fmt.Fprintf(w, "trips %d, diverted %d, drained %d, backlog peak %d, partner errors %d, elapsed %.1fs\n",
		s.Trips, s.Diverted, s.Drained, s.BacklogPeak, s.PartnerErrors, s.ElapsedS)
	fmt.Fprintf(w, "faulty retailer: re-trips after recovery %d, time to full traffic %.1fs, drain %.1fs, peak drain rate %.0f/s\n",
		s.RetripsAfterRecovery, s.TimeToFullTrafficS, s.DrainS, s.DrainRatePeak)
}
